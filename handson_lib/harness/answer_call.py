"""One call of a course function on a submission's answer cells, in a fresh process of its own
(under the course's grader, in the grading sandbox): a hidden test's `on_answers` call.

    python -m handson_lib.harness.answer_call FOLDER

FOLDER/request.json: {"module", "function", "cells": [source, ...], "args", "kwargs"} (the codec's
encoding; a callable argument is a name the cells define). The course function is taken from its
module before any of the submission's code runs. The cells then run in a fresh namespace, in
order: the notebook's imports and its answer cells, nothing else of the kernel (not its later
cells, not what it computed). A cell that fails is passed over, its error said when a name it
should have made is asked for. FOLDER/answer.json gets {"value": ...} or {"error": "..."}.

The grader decides from that value; nothing here is a verdict.
"""

import builtins
import importlib
import json
import linecache
import sys
import traceback
from pathlib import Path

from handson_lib.harness.codec import decode, encode


def call(request):
    function = getattr(importlib.import_module(request["module"]), request["function"])
    answers, failures = {"__name__": "__main__", "__builtins__": builtins}, []   # exec takes a plain dict
    for number, source in enumerate(request["cells"], 1):
        name = f"<answer cell {number}>"
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)   # its source, as a kernel keeps it
        try:
            exec(compile(source, name, "exec"), answers)
        except BaseException as error:   # the student's cell: it may fail, even exit
            failures.append(f"{type(error).__name__}: {str(error)[:300]}")

    def named(name):
        if name in answers:
            return answers[name]
        said = "; ".join(failures[-3:])
        raise NameError(f"{name!r} is not defined by your answer cells" + (f" (a cell failed: {said})" if said else ""))

    return function(*decode(request["args"], None, named), **decode(request["kwargs"], None, named))


def main(argv=None):
    folder = Path((argv or sys.argv[1:])[0])
    request = json.loads((folder / "request.json").read_text())
    try:
        answer = {"value": encode(call(request))}
    except BaseException as error:
        traceback.print_exc()
        answer = {"error": f"{type(error).__name__}: {str(error)[:500]}"}
    (folder / "answer.json").write_text(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
