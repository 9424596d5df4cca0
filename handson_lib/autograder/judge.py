"""Verdicts decided outside the student's kernel (trusted side only; nothing in the sandbox imports it).

`handson autograde` runs a submission's notebook in its sandboxed kernel, all but two kinds of
cell, which the grader runs in its own process (`Judge`), restored from the source by nbgrader:

  - the grade cells: their tests read the student's answers as data, fetched from the kernel
    (numbers, strings, containers, numpy arrays); a function of the student's is called in the
    kernel, with data in and data out;
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
import traceback
from pathlib import Path

#: Locked cells (grade_id) that build what grade cells judge: run by the grader, never the kernel.
REPORT_CELLS = {"task1_job_report", "task1_report", "task2_mnist_report", "task2_job_report", "task2_report"}
#: Set by `handson autograde` for nbgrader (not a HANDSON_ variable: it never crosses into the
#: sandbox): where the report cells' checks keep their runs, and the sandbox they start them in.
JUDGE_ENV = "GRADER_JUDGE"
#: The most a kernel answer may weigh (its JSON text).
MAX_ANSWER_CHARS = 32 << 20

#: Encoding of answers as JSON, the same text in the kernel (sent with every request) and here.
CODEC = r'''
def _handson_encode(value, depth=0):
    import math, sys, types
    np = sys.modules.get("numpy")
    kind = type(value)
    if depth > 40:
        return {"__opaque__": "nested too deep"}
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if kind is list:
        return [_handson_encode(v, depth + 1) for v in value]
    if kind in (tuple, set, frozenset):
        return {"__" + kind.__name__ + "__": [_handson_encode(v, depth + 1) for v in value]}
    if kind is dict:
        return {"__dict__": [[_handson_encode(k, depth + 1), _handson_encode(v, depth + 1)] for k, v in value.items()]}
    if np is not None and kind is np.ndarray and value.dtype.kind in "biuf":
        return {"__ndarray__": _handson_encode(value.tolist(), depth + 1), "dtype": str(value.dtype)}
    if np is not None and isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return {"__numpy__": _handson_encode(value.item(), depth + 1), "dtype": str(value.dtype)}
    if kind is types.ModuleType:
        return {"__module__": value.__name__}
    if callable(value):
        return {"__callable__": getattr(value, "__name__", "?")}
    return {"__opaque__": kind.__name__}


def _handson_decode(data, module=None, call=None):
    import numpy
    if isinstance(data, list):
        return [_handson_decode(v, module, call) for v in data]
    if not isinstance(data, dict):
        return data
    if "__float__" in data:
        return float(data["__float__"])
    for name, kind in (("__tuple__", tuple), ("__set__", set), ("__frozenset__", frozenset)):
        if name in data:
            return kind(_handson_decode(v, module, call) for v in data[name])
    if "__dict__" in data:
        return {_handson_decode(k, module, call): _handson_decode(v, module, call) for k, v in data["__dict__"]}
    if "__ndarray__" in data or "__numpy__" in data:
        try:
            dtype = numpy.dtype(str(data.get("dtype")))
        except (TypeError, ValueError):
            dtype = None
        if dtype is None or dtype.kind not in "biuf" or dtype.shape or dtype.fields or dtype.itemsize > 8:
            raise TypeError("a numpy array of dtype " + str(data.get("dtype"))[:40] + " (numbers only)")
        if "__numpy__" in data:
            return dtype.type(data["__numpy__"])
        return numpy.array(_handson_decode(data["__ndarray__"]), dtype=dtype)
    if "__module__" in data and module is not None:
        return module(data["__module__"])
    if "__callable__" in data and call is not None:
        return call(data["__callable__"])
    raise TypeError("a value of type " + str(data.get("__opaque__", "?")) + " (not data: a number, string, "
                    "list, tuple, set, dict or numpy array)")
'''
_codec = {}
exec(CODEC, _codec)
encode, decode = _codec["_handson_encode"], _codec["_handson_decode"]


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

    def __init__(self, ask, reserved=frozenset()):
        self.ask = ask
        self.reserved = reserved     # made by the report cells: never asked of the kernel
        self.namespace = {"__name__": "__judge__", "__builtins__": builtins}

    # -- the kernel, as data
    def _request(self, expression):
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
                answer = json.loads(line[len(nonce) + 1:])
                if "error" in answer:
                    raise KernelAnswerError(answer["error"])
                return answer["value"]
        raise KernelAnswerError("no answer from the notebook's kernel (the cell was interrupted, or the kernel "
                                "printed nothing): " + printed.strip()[-300:])

    def _proxy(self, name):
        if not isinstance(name, str) or not name.isidentifier():
            raise KernelAnswerError(f"a function named {name!r}")

        def call(*args, **kwargs):
            payload = json.dumps({"args": encode(list(args)), "kwargs": encode(kwargs)})
            expression = (f"(lambda _p: {name}(*_handson_decode(_p['args']), **_handson_decode(_p['kwargs'])))"
                          f"(__import__('json').loads({payload!r}))")
            try:
                return decode(self._request(expression), _trusted_module, self._proxy)
            except KernelAnswerError as error:
                raise KernelAnswerError(f"{name}(...) in your notebook: {error}") from None
        call.__name__ = name
        return call

    def call_in_kernel(self, function, *args, **kwargs):
        """checking.notebook.in_kernel under the judge: `function` (a top-level function of a course
        module) is called in the kernel, the kernel's functions and classes among the arguments by
        their names there; its result comes back as data."""
        module, name = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
        if module not in course_modules() or module.startswith("handson_lib.autograder") or not name.isidentifier() \
                or getattr(importlib.import_module(module), name, None) is not function:
            raise KernelAnswerError(f"in_kernel: {function!r} is no function of the course's modules")
        payload = json.dumps({"args": encode(list(args)), "kwargs": encode(kwargs)})
        expression = (f"(lambda _p, _g: getattr(__import__('importlib').import_module({module!r}), {name!r})"
                      f"(*_handson_decode(_p['args'], None, _g.__getitem__), "
                      f"**_handson_decode(_p['kwargs'], None, _g.__getitem__)))"
                      f"(__import__('json').loads({payload!r}), globals())")
        try:
            return decode(self._request(expression), _trusted_module, self._proxy)
        except KernelAnswerError as error:
            raise KernelAnswerError(f"{name}(...) with your notebook's code: {error}") from None

    def fetch(self, name):
        if not name.isidentifier():
            raise ValueError(name)
        try:
            return decode(self._request(name), _trusted_module, self._proxy)
        except KernelAnswerError as error:
            if str(error).startswith("NameError"):
                raise NameError(f"name {name!r} is not defined in your notebook") from None
            raise KernelAnswerError(f"{name}: {error}") from None
        except TypeError as error:
            raise TypeError(f"{name}: {error}") from None

    # -- the cells
    def run(self, source, label, report=False):
        """Run one cell of the source here; returns its outputs as nbformat dicts (a stream, an
        execute_result for a last expression, an error)."""
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
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), self._in_kernel_calls():
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
    def _in_kernel_calls(self):
        from handson_lib.checking import notebook
        notebook.set_kernel_call(self.call_in_kernel)
        try:
            yield
        finally:
            notebook.set_kernel_call(None)


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
