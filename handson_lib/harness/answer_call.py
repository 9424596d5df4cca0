"""A submission's answer cells in a fresh process of its own (under the course's grader, in the
grading sandbox), where the grader calls what they define: nothing of the kernel takes part, and
the kernel never sees a call.

    python -m handson_lib.harness.answer_call FOLDER     a hidden test's `on_answers` call
    python -m handson_lib.harness.answer_call --serve    the student's functions a grade cell calls

FOLDER/request.json: {"module", "function", "cells": [source, ...], "args", "kwargs"} (the codec's
encoding; a callable argument is a name the cells define). The course function is taken from its
module before any of the submission's code runs. The cells then run in a fresh namespace, in
order: the notebook's imports and its answer cells, nothing else of the kernel (not its later
cells, not what it computed). A cell that fails is passed over, its error said when a name it
should have made is asked for. FOLDER/answer.json gets {"value": ...} or {"error": "..."}.

`--serve` speaks in messages on its stdin and stdout (`pack`: a length, then JSON): the first
request is {"cells": [...]}, run as above, answered {"ready": true}; each next one is
{"function": NAME, "args", "kwargs"}, the function NAME of the cells called, answered {"value"},
{"error"} or {"missing": NAME, "failed": "..."} (no cell defines it). The student's code prints to
stderr and reads an empty stdin: what it prints never mixes with the answers. It ends at the end
of its stdin, or when the grader stops it (a grade cell's end, a call past its time limit).

The grader decides from the values; nothing here is a verdict.
"""

import builtins
import importlib
import json
import linecache
import os
import struct
import sys
import traceback
from pathlib import Path

from handson_lib.harness.codec import decode, encode

#: A message's header: the length of its JSON (UTF-8 bytes), 4 bytes big-endian.
HEADER = struct.Struct(">I")


def pack(message):
    """One message of the serving protocol, as bytes."""
    data = json.dumps(message).encode()
    return HEADER.pack(len(data)) + data


def _read_message(stream):
    """The next message of `stream`, or None at its end."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    data = stream.read(HEADER.unpack(header)[0])
    return json.loads(data)


def run_cells(sources):
    """(the namespace, the failures) of the cells run in order in a fresh namespace."""
    answers, failures = {"__name__": "__main__", "__builtins__": builtins}, []   # exec takes a plain dict
    for number, source in enumerate(sources, 1):
        name = f"<answer cell {number}>"
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)   # its source, as a kernel keeps it
        try:
            exec(compile(source, name, "exec"), answers)
        except BaseException as error:   # the student's cell: it may fail, even exit
            failures.append(f"{type(error).__name__}: {str(error)[:300]}")
    return answers, failures


def _said(failures):
    return "; ".join(failures[-3:])


def _names_in(answers, failures):
    def named(name):
        if name in answers:
            return answers[name]
        said = _said(failures)
        raise NameError(f"{name!r} is not defined by your answer cells" + (f" (a cell failed: {said})" if said else ""))
    return named


def call(request):
    function = getattr(importlib.import_module(request["module"]), request["function"])
    named = _names_in(*run_cells(request["cells"]))
    return function(*decode(request["args"], None, named), **decode(request["kwargs"], None, named))


def serve(requests, replies):
    """Answer the grader's calls of the functions the answer cells define, one message at a time."""
    first = _read_message(requests)
    if first is None:
        return
    answers, failures = run_cells(first["cells"])
    named = _names_in(answers, failures)
    replies.write(pack({"ready": True}))
    replies.flush()
    while (request := _read_message(requests)) is not None:
        name = request["function"]
        if name not in answers:
            answer = {"missing": name, "failed": _said(failures)}
        else:
            try:
                answer = {"value": encode(answers[name](*decode(request["args"], None, named),
                                                       **decode(request["kwargs"], None, named)))}
            except BaseException as error:   # the student's function: it may raise, even exit
                answer = {"error": f"{type(error).__name__}: {str(error)[:500]}"}
        replies.write(pack(answer))
        replies.flush()


def _serve_on_private_pipes():
    """serve() on the process's stdin and stdout, taken aside first: the student's code gets an
    empty stdin and prints to stderr (a print never forges an answer's bytes)."""
    requests, replies = open(os.dup(0), "rb"), open(os.dup(1), "wb")
    empty = os.open(os.devnull, os.O_RDONLY)
    os.dup2(empty, 0)
    os.close(empty)
    os.dup2(2, 1)
    serve(requests, replies)


def main(argv=None):
    argv = argv or sys.argv[1:]
    if argv[0] == "--serve":
        _serve_on_private_pipes()
        return 0
    folder = Path(argv[0])
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
