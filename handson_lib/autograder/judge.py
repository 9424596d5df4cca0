"""Verdicts decided outside the student's kernel (trusted side only; nothing in the sandbox imports it).

`handson autograde` runs a submission's notebook in its sandboxed kernel, all but two kinds of
cell, which the grader runs in its own process (`Judge`), restored from the source by nbgrader:

  - the grade cells: their tests read the student's answers as data, fetched from the kernel
    (numbers, strings, containers, numpy arrays). A function of the student's is never called in
    the kernel (which answers only that the name is a function): the grade cell's calls run in one
    fresh sandboxed process of the cell's own that holds the notebook's imports and answer cells
    only (`AnswerCalls`, `answer_sources`, harness.answer_call --serve), with data in and data
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
import collections
import contextlib
import functools
import importlib
import importlib.util
import io
import json
import os
import secrets
import select
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

from handson_lib import settings, tasks
from handson_lib.harness.answer_call import HEADER, pack
from handson_lib.harness.codec import CODEC, decode, encode

#: Locked cells (grade_id) that build what grade cells judge: run by the grader, never the kernel.
REPORT_CELLS = {task.report_cell for task in tasks.TASKS}
#: Set by `handson autograde` for nbgrader (not a HANDSON_ variable: it never crosses into the
#: sandbox): where the report cells' checks keep their runs, and the sandbox they start them in.
JUDGE_ENV = settings.variable("judge")
#: The most a kernel answer may weigh (its JSON text).
MAX_ANSWER_CHARS = 32 << 20
#: The most lists and objects an answer may hold (an array's rows count one each): json.loads
#: builds them all before the codec checks anything.
MOST_ANSWER_CONTAINERS = 1 << 20
#: The fresh process of a hidden test's `on_answers` call and of a grade cell's calls of the
#: student's functions (`python -m`), and the seconds a call may take (the answer cells' run too).
ANSWER_CALL_MODULE = "handson_lib.harness.answer_call"
ANSWER_CALL_SECONDS = 120
#: How long a grade cell's process of the answer cells may take to end by itself at the cell's end.
STOP_SECONDS = 2



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


class KernelAnswerError(Exception):
    """The kernel did not answer a request (a name it lacks, a function that raised or hung)."""


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
                                     env={**os.environ, "MPLBACKEND": "Agg"})
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
        try:
            yield
        finally:
            notebook.set_answer_call(None)


class _NoAnswer(Exception):
    """The answer cells' process gave no answer: "time" (past its limit) or "ended"."""


class AnswerCalls:
    """The fresh process in which a grade cell calls the student's functions (harness.answer_call
    --serve; in the sandbox when the session has one): started at the cell's first call, it runs
    the notebook's imports and answer cells once (`answer_cells()`), then answers each call as
    data over its stdin and stdout. Stopped at the cell's end (Judge.run), and at a call past its
    time limit (the cell's next call starts a fresh one). The kernel sees none of it: neither the
    calls nor their arguments."""

    def __init__(self, answer_cells, folder=None, seconds=ANSWER_CALL_SECONDS):
        self.answer_cells, self.folder, self.seconds = answer_cells, folder, seconds
        self._proc, self._folders, self._output = None, None, collections.deque(maxlen=16)
        self._broken = None   # (why, limit): the answer cells did not run; every call of the cell says so

    def call(self, name, args, kwargs):
        """The answer to `name(*args, **kwargs)`: {"value": ...}, {"error": ...} or {"missing": name}."""
        from handson_lib.checking import runs
        limit = runs.run_limit(self.seconds)
        if self._broken is None and self._proc is None:
            try:
                self._start()
                ready = self._exchange({"cells": list(self.answer_cells())}, limit, name)
                if not isinstance(ready, dict) or ready.get("ready") is not True:
                    raise _NoAnswer("ended")
            except _NoAnswer as why:
                self._broken = (str(why), limit)
                self.stop(wait=0)
        if self._broken is not None:
            raise KernelAnswerError(self._why(name, *self._broken, starting=True))
        try:
            answer = self._exchange({"function": name, "args": encode(list(args)), "kwargs": encode(kwargs)},
                                    limit, name)
        except _NoAnswer as why:
            self.stop(wait=0)
            raise KernelAnswerError(self._why(name, str(why), limit, starting=False)) from None
        if not isinstance(answer, dict) or not {"value", "error", "missing"} & set(answer):
            self.stop()
            raise KernelAnswerError(f"{name}(...): no answer from the process that runs your answer cells")
        return answer

    def _why(self, name, why, limit, starting):
        from handson_lib.messages import tr
        if why == "time" and starting:
            return tr("{name}(...): stopped after {seconds:.0f} s: your answer cells did not finish running "
                      "(an infinite loop?)", name=name, seconds=limit)
        if why == "time":
            return tr("{name}(...): stopped after {seconds:.0f} s: your function did not return in time "
                      "(an infinite loop?)", name=name, seconds=limit)
        return tr("{name}(...): the process that runs your answer cells ended before it answered",
                  name=name)

    def _start(self):
        from handson_lib import launch
        from handson_lib.checking import runs
        self._folders = contextlib.ExitStack()
        folder = self._folders.enter_context(runs.run_folder("handson-calls-", dir=self.folder))
        self._proc = subprocess.Popen(
            launch.wrapped_command([sys.executable, "-m", ANSWER_CALL_MODULE, "--serve"], folder),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=folder,
            env={**os.environ, "MPLBACKEND": "Agg"}, start_new_session=True)
        for pipe in (self._proc.stdin, self._proc.stdout):
            os.set_blocking(pipe.fileno(), False)
        # What the student's code prints: drained (a full pipe would stall it), its end kept for
        # the grader's log, never for the feedback.
        threading.Thread(target=self._drain, args=(self._proc.stderr,), daemon=True).start()

    def _drain(self, pipe):
        for chunk in iter(lambda: pipe.read1(4096), b""):
            self._output.append(chunk)
        pipe.close()

    def _exchange(self, message, limit, name):
        deadline = time.monotonic() + limit
        data, fd = memoryview(pack(message)), self._proc.stdin.fileno()
        while data:
            if not self._ready(fd, select.POLLOUT, deadline):
                continue
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise self._ended() from None
        (length,) = HEADER.unpack(self._read(HEADER.size, deadline))
        if length > MAX_ANSWER_CHARS:
            self.stop()
            raise KernelAnswerError(f"{name}(...): an answer of {length} characters (at most {MAX_ANSWER_CHARS})")
        raw = self._read(length, deadline)
        try:
            from handson_lib.checking import evidence   # the containers capped, as every answer's
            return evidence.parse_record(raw, MOST_ANSWER_CONTAINERS, "an answer")
        except ValueError:
            raise self._ended() from None

    def _read(self, size, deadline):
        chunks, fd = [], self._proc.stdout.fileno()
        while size > 0:
            if not self._ready(fd, select.POLLIN, deadline):
                continue
            try:
                chunk = os.read(fd, min(size, 1 << 20))
            except BlockingIOError:
                continue
            if not chunk:
                raise self._ended()
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    @staticmethod
    def _ready(fd, event, deadline):
        """Whether `fd` is ready for `event` (or at its end) before the deadline; past it, _NoAnswer."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise _NoAnswer("time")
        poller = select.poll()   # not select(): the grader's descriptors may number over 1024
        poller.register(fd, event)
        return bool(poller.poll(max(1, int(left * 1000))))

    def _ended(self):
        try:
            status = self._proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            status = None
        said = b"".join(self._output).decode(errors="replace")[-2000:]
        print(f"[judge] the process of the answer cells ended (exit status {status}): {said}", file=sys.__stderr__)
        return _NoAnswer("ended")

    def stop(self, wait=STOP_SECONDS):
        """Stop the process (its whole tree) and remove its folder; nothing of it is left running.
        `wait`: seconds it may take to end by itself once its requests end (0: it is stuck)."""
        from handson_lib import launch
        proc, self._proc = self._proc, None
        if proc is not None:
            for pipe in (proc.stdin, proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
            try:   # the end of its requests ends it (a SIGTERM waits on the sandbox's init, which ignores it)
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass
            launch.kill_tree(proc, grace=0.2)   # what is left: a hung call, a process it started
        folders, self._folders = self._folders, None
        if folders is not None:
            folders.close()


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
