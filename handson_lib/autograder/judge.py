"""Verdicts decided outside the student's kernel (trusted side only; nothing in the sandbox imports it).

`handson autograde` runs a submission's notebook in its sandboxed kernel, all but two kinds of
cell, which the grader runs in its own process (`Judge`), restored from the source by nbgrader:

  - the grade cells: their tests read the student's answers as data, fetched from the kernel
    (numbers, strings, containers, numpy arrays). A function of the student's is never called in
    the kernel (which answers only that the name is a function): the grade cell's calls run in one
    fresh sandboxed process of the cell's own that holds the notebook's imports and answer cells
    only (`answer_calls.AnswerCalls`, `answer_sources`, harness.answer_call --serve), with data in and data
    out, stopped with the cell; so no later cell of the student's sees a hidden test's arguments.
    A course function run on the student's code (`checking.notebook.on_answers`) runs the same
    way, in a fresh process of its own per call (harness.answer_call FOLDER);
  - the report cells (`REPORT_CELLS`): they run the checks, which start the submission's scripts
    in the sandbox and judge what comes back from outside.

So an input transformer, a monkeypatched `checks`, a forged `report` or an `os.chdir` in the
kernel decides nothing: whatever the kernel answers is an answer, never a verdict. (What a grade
cell compares an answer with may still come from the kernel: the measurements of notebooks 02-06,
which the kernel's own cells make; course/README.md, "Security model", lists it.)
"""

import ast
import builtins
import contextlib
import functools
import importlib
import importlib.util
import io
import json
import secrets
import sys
import traceback
from pathlib import Path

from handson_lib import settings, tasks
from handson_lib.autograder.answer_calls import (ANSWER_CALL_MODULE, ANSWER_CALL_SECONDS,  # noqa: F401
                                                 MAX_ANSWER_CHARS, MOST_ANSWER_CONTAINERS, STOP_SECONDS,
                                                 AnswerCalls, KernelAnswerError)
from handson_lib.harness.codec import CODEC, decode, encode

#: Locked cells (grade_id) that build what grade cells judge: run by the grader, never the kernel.
REPORT_CELLS = {task.report_cell for task in tasks.TASKS}
#: Set by `handson autograde` for nbgrader (not a HANDSON_ variable: it never crosses into the
#: sandbox): where the report cells' checks keep their runs, and the sandbox they start them in.
JUDGE_ENV = settings.variable("judge")



def is_report_cell(meta):
    """Whether a cell of this nbgrader metadata is a locked report cell (REPORT_CELLS)."""
    return bool(meta.get("locked")) and meta.get("grade_id") in REPORT_CELLS


#: The tag of a cell that only shows runs (the notebook's own runs of the student's script, a
#: course demo, a job sent to the local scheduler): `nbgrader autograde` does not run it, since the
#: report cells run the scripts themselves and no grade rests on it. Tagged in solutions/.
NOT_RUN_WHEN_GRADING = "not-run-when-grading"


def not_run_when_grading(cell):
    """Whether the autograder leaves this cell unrun: a code cell with the tag and no part in
    grading (a graded, answer or locked cell runs whatever its tags say)."""
    meta = cell.get("metadata", {})
    grading = meta.get("nbgrader", {})
    return (cell.get("cell_type") == "code" and NOT_RUN_WHEN_GRADING in meta.get("tags", [])
            and not any(grading.get(key) for key in ("grade", "solution", "locked", "task")))


def judged_by_grader(meta):
    """Whether a cell of this nbgrader metadata is run by the grader (a grade cell not judged in
    the kernel, or a locked report cell)."""
    if meta.get("grade") and not meta.get("solution"):
        return True
    return is_report_cell(meta)


def free_names(source):
    """The names a cell reads that nothing in it binds, nor Python's builtins."""
    tree = ast.parse(source)
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return sorted(read - bound - set(dir(builtins)))


def _trusted_module(name):
    """A module a kernel's name stands for: only one the course's notebooks import themselves."""
    if name not in course_modules() or name.startswith(("handson_lib.autograder", "handson_lib.authoring")):
        raise KernelAnswerError(f"a module the grader does not import ({name})")
    return importlib.import_module(name)


@functools.cache
def course_modules(root=None):
    """The modules the solution notebooks import (`import a.b`, `from a import b` where b is a
    module): the only ones a name asked of the kernel may stand for in the grader."""
    from handson_lib import COURSE_ROOT
    names = set()
    for path in sorted((Path(root or COURSE_ROOT) / "solutions").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            try:
                tree = ast.parse("".join(cell["source"]))
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names.update(a.name for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module)
                    names.update(f"{node.module}.{a.name}" for a in node.names
                                 if importlib.util.find_spec(node.module) is not None
                                 and _is_module(f"{node.module}.{a.name}"))
    return frozenset(names)


def _is_module(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


class Judge:
    """The grader's side of one notebook: a namespace of its own, filled by the report cells and
    by the answers it asks the kernel for (`ask(code) -> what the kernel printed`)."""

    def __init__(self, ask, reserved=frozenset(), answer_cells=tuple, call_folder=None,
                 call_seconds=ANSWER_CALL_SECONDS):
        self.ask = ask
        self.reserved = reserved     # made by the report cells: never asked of the kernel
        self.answer_cells = answer_cells   # () -> the sources a fresh process runs (imports, answer cells)
        self.call_folder = call_folder     # where such a process's folder is made (seen by the sandbox)
        self.call_seconds = call_seconds
        self.namespace = {"__name__": "__judge__", "__builtins__": builtins}
        self._calls = None   # the running grade cell's AnswerCalls

    # -- the kernel, as data
    def _request(self, expression):
        from handson_lib.checking import evidence
        nonce = secrets.token_hex(8)
        code = (CODEC + "\ntry:\n    print(" + repr(nonce) + ", __import__('json').dumps({'value': _handson_encode("
                + expression + ")}), flush=True)\nexcept BaseException as _e:\n    print(" + repr(nonce)
                + ", __import__('json').dumps({'error': type(_e).__name__ + ': ' + str(_e)[:500]}), flush=True)\n"
                "del _handson_encode, _handson_decode\n")
        printed = self.ask(code)
        for line in printed.splitlines():
            if line.startswith(nonce + " "):
                if len(line) > MAX_ANSWER_CHARS:
                    raise KernelAnswerError(f"an answer of {len(line)} characters (at most {MAX_ANSWER_CHARS})")
                try:
                    answer = evidence.parse_record(line[len(nonce) + 1:], MOST_ANSWER_CONTAINERS, "an answer")
                except ValueError as error:
                    raise KernelAnswerError(str(error)[:300]) from None
                if "error" in answer:
                    raise KernelAnswerError(answer["error"])
                return answer["value"]
        raise KernelAnswerError("no answer from the notebook's kernel (the cell was interrupted, or the kernel "
                                "printed nothing): " + printed.strip()[-300:])

    def _proxy(self, name):
        """A function of the student's, called by a grade cell: in the cell's fresh process that
        holds the answer cells (AnswerCalls), never in the kernel."""
        if not isinstance(name, str) or not name.isidentifier():
            raise KernelAnswerError(f"a function named {name!r}")

        def call(*args, **kwargs):
            if self._calls is None:
                raise KernelAnswerError(f"{name}(...) called after its grade cell ended")
            answer = self._calls.call(name, args, kwargs)
            if "missing" in answer:
                from handson_lib.messages import tr
                said = tr("{name}(...): no answer cell defines {name}. The grader calls your function in a fresh "
                          "process that runs only your notebook's imports and answer cells (the cells marked "
                          "# PUT YOUR CODE HERE): define it in one of them", name=name)
                if answer.get("failed"):
                    said += " " + tr("(a cell failed: {failed})", failed=str(answer["failed"])[:600])
                raise KernelAnswerError(said)
            if "error" in answer:
                raise KernelAnswerError(f"{name}(...) with your answer cells: {str(answer['error'])[:600]}")
            return decode(answer["value"], _trusted_module, self._proxy)
        call.__name__ = name
        return call

    def call_on_answers(self, function, *args, **kwargs):
        """checking.notebook.on_answers under the judge: `function` (a top-level function of a course
        module) is called in a fresh process of its own (in the sandbox when the session has one)
        that holds the notebook's imports and answer cells (`answer_cells`) and nothing else of the
        kernel; the submission's functions and classes among the arguments by their names there.
        Its result comes back as data."""
        module, name = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
        if module not in course_modules() or module.startswith(("handson_lib.autograder", "handson_lib.authoring")) \
                or not name.isidentifier() or getattr(importlib.import_module(module), name, None) is not function:
            raise KernelAnswerError(f"on_answers: {function!r} is no function of the course's modules")
        request = {"module": module, "function": name, "cells": list(self.answer_cells()),
                   "args": encode(list(args)), "kwargs": encode(kwargs)}
        said = f"{name}(...) with your answer cells"
        try:
            return decode(self._fresh_call(request, said), _trusted_module, None)
        except TypeError as error:
            raise KernelAnswerError(f"{said}: {error}") from None

    def _fresh_call(self, request, said):
        from handson_lib import launch
        from handson_lib.checking import evidence, runs
        with runs.run_folder("handson-answers-", dir=self.call_folder) as folder:
            (Path(folder) / "request.json").write_text(json.dumps(request))
            res = launch.run_watched([sys.executable, "-m", ANSWER_CALL_MODULE, folder],
                                     runs.run_limit(ANSWER_CALL_SECONDS), cwd=folder,
                                     env=settings.child_env(MPLBACKEND="Agg"))
            runs.defuse(folder)
            try:
                text = evidence.read_left(Path(folder) / "answer.json", MAX_ANSWER_CHARS)
                answer = (evidence.parse_record(text, MOST_ANSWER_CONTAINERS, "an answer")
                          if text is not None else None)
            except ValueError as error:
                raise KernelAnswerError(f"{said}: {error}") from None
        if not isinstance(answer, dict) or not ("value" in answer or "error" in answer):
            how = "ran past its time limit" if res.timed_out else f"ended with exit status {res.returncode}"
            raise KernelAnswerError(f"{said}: no answer (the call {how}): {res.tail(5)}")
        if "error" in answer:
            raise KernelAnswerError(f"{said}: {str(answer['error'])[:600]}")
        return answer["value"]

    def fetch(self, name):
        if not name.isidentifier():
            raise ValueError(name)
        try:
            value = self._request(name)
            if isinstance(value, dict) and "__callable__" in value:
                # The kernel says only that the name is a function; the call is made elsewhere.
                return self._proxy(name)
            return decode(value, _trusted_module, self._proxy)
        except KernelAnswerError as error:
            if str(error).startswith("NameError"):
                from handson_lib.messages import tr
                raise NameError(tr("name {name!r} is not defined in your notebook", name=name)) from None
            raise KernelAnswerError(f"{name}: {error}") from None
        except TypeError as error:
            raise TypeError(f"{name}: {error}") from None

    # -- the cells
    def run(self, source, label, report=False):
        """Run one cell of the source here; returns its outputs as nbformat dicts (a stream, an
        execute_result for a last expression, an error)."""
        with self._cell_calls(report):
            return self._run(source, label, report)

    @contextlib.contextmanager
    def _cell_calls(self, report):
        """A grade cell's calls of the student's functions, in one fresh process stopped with the cell.
        A report cell's checks are handed the reference solutions (the checks import none themselves)."""
        if report:
            from handson_lib.checking import against, reference
            with against.reference_solutions_from(reference):
                yield
            return
        self._calls = AnswerCalls(self.answer_cells, self.call_folder, self.call_seconds)
        try:
            yield
        finally:
            calls, self._calls = self._calls, None
            calls.stop()

    def _run(self, source, label, report):
        outputs, out = [], io.StringIO()
        # A report cell adds to what the later cells see; a grade cell sees that and the kernel's
        # answers as they are now (asked again for every cell), and keeps nothing.
        namespace = self.namespace if report else dict(self.namespace)
        try:
            tree = ast.parse(source)
            if not report:
                for name in free_names(source):
                    if name in namespace:
                        continue
                    if name in self.reserved:
                        raise NameError(f"{name!r} is made by a cell of the release that this notebook does "
                                        "not hold as released (restore it)")
                    namespace[name] = self.fetch(name)
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), self._answer_calls():
                exec(compile(tree, f"<{label}>", "exec"), namespace)
                value = None if last is None else eval(compile(ast.Expression(last.value), f"<{label}>", "eval"),
                                                       namespace)
            if out.getvalue():
                outputs.append({"output_type": "stream", "name": "stdout", "text": out.getvalue()})
            if value is not None:
                outputs.append({"output_type": "execute_result", "execution_count": None, "metadata": {},
                                "data": {"text/plain": repr(value)}})
        except (Exception, SystemExit) as error:   # the cell's verdict: an error output is a failure
            if out.getvalue():
                outputs.append({"output_type": "stream", "name": "stdout", "text": out.getvalue()})
            frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == f"<{label}>"]
            outputs.append({"output_type": "error", "ename": type(error).__name__, "evalue": str(error),
                            "traceback": [f"{label}, line {f.lineno}" for f in frames]
                            + [f"{type(error).__name__}: {error}"]})
        return outputs


    @contextlib.contextmanager
    def _answer_calls(self):
        from handson_lib.checking import notebook
        notebook.set_answer_call(self.call_on_answers)
        notebook.set_answer_source(self.answer_source)
        try:
            yield
        finally:
            notebook.set_answer_call(None)
            notebook.set_answer_source(None)

    def answer_source(self, function):
        """checking.notebook.answer_source under the judge: the notebook's imports and answer cells as
        handed in (answer_sources), whatever the kernel made of them; a grade cell passes the
        student's function by its name."""
        name = getattr(function, "__name__", None)
        if not isinstance(name, str) or not name.isidentifier():
            raise KernelAnswerError(f"answer_source: {function!r} is no function of your answer cells")
        return "\n\n".join(self.answer_cells())


def answer_sources(cells):
    """The sources an on_answers call runs, of `cells` (the notebook's cells before the grade
    cell), in order: each answer cell whole, and of every other code cell that nbgrader lets the
    student write (not a grade cell, not a report cell, not one left unrun) its imports only, so
    that the answer cells find the modules they use. Nothing that the kernel computed."""
    sources = []
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") != "code" or not_run_when_grading(cell):
            continue
        source = "".join(cell.get("source", ""))
        if meta.get("solution"):
            sources.append(source)
        elif not judged_by_grader(meta):
            try:
                tree = ast.parse(source)
            except SyntaxError:   # IPython's own syntax (a magic): no imports taken from it
                continue
            imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
            if imports:
                sources.append("\n".join(ast.unparse(node) for node in imports))
    return sources


def report_names(root=None):
    """The names the report cells of the course's solutions bind at their top level (imports too)."""
    from handson_lib import COURSE_ROOT
    names = set()
    for path in sorted((Path(root or COURSE_ROOT) / "solutions").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") in REPORT_CELLS:
                names.update(_assigned("".join(cell["source"])))
    return frozenset(names)


def _assigned(source):
    names = set()
    for node in ast.parse(source).body:
        for target in getattr(node, "targets", []) + [getattr(node, "target", None)]:
            if isinstance(target, ast.Name):
                names.add(target.id)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names
