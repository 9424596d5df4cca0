"""The grader's judge (handson_lib.autograder.judge): grade cells run in the grader's process, with the
student's answers fetched from the kernel as data and the student's functions called in a fresh
process of the answer cells. A stand-in kernel here: a namespace of its own in which the requests
are executed, as the sandboxed kernel would."""

import ast
import contextlib
import io
import json
import re

import numpy
import psutil
import pytest

from handson_lib.autograder import judge, nbgrader_ext


class StandInKernel:
    """Executes what the judge sends, in a namespace the judge never touches; counts requests."""

    def __init__(self, code=""):
        self.namespace = {}
        self.requests = []
        exec(code, self.namespace)

    def ask(self, code):
        self.requests.append(code)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(code, self.namespace)
        return out.getvalue()


def run(kernel_code, cell, reserved=frozenset()):
    """The cell judged against a kernel that ran `kernel_code`, which is also its one answer cell."""
    kernel = StandInKernel(kernel_code)
    outputs = judge.Judge(kernel.ask, reserved, answer_cells=lambda: [kernel_code]).run(cell, "a_test")
    return outputs, kernel


def errors(outputs):
    return [f"{o['ename']}: {o['evalue']}" for o in outputs if o["output_type"] == "error"]


def test_answers_cross_as_data_and_keep_their_types():
    value = {"t": (1, 2.5), 3: {1, 2}, "f": frozenset({"a"}), "n": None, "nan": float("nan"),
             "a": numpy.arange(3, dtype=numpy.int16), "s": numpy.float32(0.5), "l": [True, "x"]}
    back = judge.decode(json.loads(json.dumps(judge.encode(value))))
    assert back["t"] == (1, 2.5) and back[3] == {1, 2} and back["f"] == frozenset({"a"}) and back["n"] is None
    assert back["nan"] != back["nan"] and back["l"] == [True, "x"]
    assert back["a"].dtype == numpy.int16 and back["a"].tolist() == [0, 1, 2]
    assert type(back["s"]) is numpy.float32 and back["s"] == 0.5


def test_a_grade_cell_reads_the_answers_and_calls_the_functions_of_the_answer_cells():
    kernel = "placement = {0: (1, 0), 1: (1, 1)}\ndef total(b, n):\n    return b * n\n"
    cell = "assert placement[1] == (1, 1)\nassert total(32, 4) == 128\ntotal(2, 3)"
    outputs, stand_in = run(kernel, cell)
    assert errors(outputs) == []
    assert outputs[-1] == {"output_type": "execute_result", "execution_count": None, "metadata": {},
                           "data": {"text/plain": "6"}}
    assert len(stand_in.requests) == 2   # placement and total, by name; the calls are not the kernel's


def asked_names(requests):
    """The names the judge asked the kernel for, one per request; a request that is anything else
    (a call, arguments) fails the test."""
    names = []
    for code in requests:
        found = re.fullmatch(r"(?s).*_handson_encode\((\w+)\)\}\), flush=True\)\nexcept .*", code)
        assert found, code[len(judge.CODEC):]
        names.append(found.group(1))
    return names


#: A student's function that keeps what it is called with: in the kernel, a later cell would print it.
STASHING = "seen = []\n\n\ndef total_batch_size(b, n):\n    seen.append((b, n))\n    print('called with', b, n)\n" \
           "    return b * n\n"


def test_a_hidden_tests_call_never_reaches_the_kernel():
    """The kernel is asked only whether the name is there; the hidden test's arguments, the call
    and what the function prints stay out of it (and out of the cell's outputs)."""
    kernel = StandInKernel(STASHING)
    judged = judge.Judge(kernel.ask, answer_cells=lambda: [STASHING])
    outputs = judged.run("assert total_batch_size(32, 4) == 128\nassert total_batch_size(128, 8) == 1024\n"
                         "total_batch_size(2, 3)", "q1_total_batch_test")
    assert errors(outputs) == [] and outputs[-1]["data"] == {"text/plain": "6"}, outputs
    assert asked_names(kernel.requests) == ["total_batch_size"]
    assert not any(re.search(r"\b(32|128)\b", code[len(judge.CODEC):]) for code in kernel.requests)
    assert kernel.namespace["seen"] == []   # a later cell of the student's has nothing to print
    assert "called with" not in json.dumps(outputs)


def test_the_calls_of_a_cell_share_one_fresh_process_stopped_with_the_cell():
    """The answer cells run once per grade cell, whose calls then share their process; the next
    cell starts from the answer cells again, and nothing is left running after a cell."""
    answers = ("import itertools, os\n_calls = itertools.count()\n\n\n"
               "def counted():\n    return next(_calls), os.getpid()\n")
    kernel = StandInKernel(answers)
    judged = judge.Judge(kernel.ask, answer_cells=lambda: [answers])
    first = judged.run("(counted(), counted())", "first")
    (n1, pid1), (n2, pid2) = ast.literal_eval(first[-1]["data"]["text/plain"])
    assert (n1, n2) == (0, 1) and pid1 == pid2, first
    assert not psutil.pid_exists(pid1) or psutil.Process(pid1).status() == psutil.STATUS_ZOMBIE
    (n3, pid3), = ast.literal_eval(judged.run("(counted(),)", "second")[-1]["data"]["text/plain"])
    assert n3 == 0 and pid3 != pid1
    assert psutil.Process().children(recursive=True) == []


def test_a_function_that_never_returns_is_stopped_with_a_clear_error():
    answers = "def total_batch_size(b, n):\n    while True:\n        pass\n\n\ndef fine():\n    return 1\n"
    kernel = StandInKernel(answers)
    judged = judge.Judge(kernel.ask, answer_cells=lambda: [answers], call_seconds=3)
    outputs = judged.run("assert total_batch_size(32, 4) == 128", "q1_total_batch_test")
    assert errors(outputs) == ["KernelAnswerError: total_batch_size(...): stopped after 3 s: your function did not "
                               "return in time (an infinite loop?)"]
    assert psutil.Process().children(recursive=True) == []
    # The cell's next call starts a fresh process.
    outputs = judged.run("try:\n    total_batch_size(1, 1)\nexcept Exception:\n    pass\nfine()", "next")
    assert outputs[-1]["data"] == {"text/plain": "1"}, outputs
    # Answer cells that never end: said once, and the cell's other calls fail at once.
    hanging = answers + "while True:\n    pass\n"
    judged = judge.Judge(StandInKernel(answers).ask, answer_cells=lambda: [hanging], call_seconds=3)
    outputs = judged.run("try:\n    fine()\nexcept Exception as e:\n    print(e)\nfine()", "hangs")
    assert "fine(...): stopped after 3 s: your answer cells did not finish running" in outputs[0]["text"]
    assert errors(outputs)[-1].startswith("KernelAnswerError: fine(...): stopped after 3 s: your answer cells")
    assert psutil.Process().children(recursive=True) == []


def test_a_function_returning_no_data_fails_as_before():
    answers = ("class _AlwaysEqual(int):\n    def __eq__(self, other):\n        return True\n"
               "    __hash__ = int.__hash__\n\n\ndef total_batch_size(b, n):\n    return _AlwaysEqual(0)\n")
    outputs, _ = run(answers, "assert total_batch_size(32, 4) == 128")
    assert errors(outputs) == ["TypeError: a value of type _AlwaysEqual (not data: a number, string, list, tuple, "
                               "set, dict or numpy array)"]
    outputs, _ = run("def total_batch_size(b, n):\n    raise ValueError('not yet')\n", "total_batch_size(1, 2)")
    assert errors(outputs) == ["KernelAnswerError: total_batch_size(...) with your answer cells: ValueError: not yet"]


def test_a_function_defined_outside_the_answer_cells_is_said_so():
    """A kernel that has the function from a cell that is no answer cell: the fresh process has not."""
    kernel = StandInKernel("def total_batch_size(b, n):\n    return b * n\n")
    outputs = judge.Judge(kernel.ask, answer_cells=lambda: ["import os", "raise ValueError('half done')"]).run(
        "total_batch_size(32, 4)", "q1_total_batch_test")
    assert errors(outputs) == [
        "KernelAnswerError: total_batch_size(...): no answer cell defines total_batch_size. The grader calls your "
        "function in a fresh process that runs only your notebook's imports and answer cells (the cells marked "
        "# PUT YOUR CODE HERE): define it in one of them (a cell failed: ValueError: half done)"]


def test_every_grade_cell_asks_the_kernel_again_and_keeps_nothing():
    kernel = StandInKernel("answer = 1\n")
    judged = judge.Judge(kernel.ask)
    assert errors(judged.run("assert answer == 1\nseen = answer", "first")) == []
    kernel.namespace["answer"] = 2   # a later cell of the student's changed it
    assert errors(judged.run("assert answer == 2", "second")) == []
    assert errors(judged.run("seen", "third")) == ["NameError: name 'seen' is not defined in your notebook"]


def test_a_wrong_answer_fails_in_the_grader():
    outputs, _ = run("def total(b, n):\n    return b\n", "assert total(32, 4) == 128, 'expected 128'")
    assert errors(outputs) == ["AssertionError: expected 128"]


def test_an_answer_equal_to_everything_is_no_data():
    kernel = "class Any(int):\n    def __eq__(self, other):\n        return True\nanswer = Any(0)\n"
    outputs, _ = run(kernel, "assert answer == 42")
    assert errors(outputs) == ["TypeError: answer: a value of type Any (not data: a number, string, list, tuple, "
                               "set, dict or numpy array)"]


def test_a_report_name_is_never_asked_of_the_kernel():
    outputs, stand_in = run("report = 'forged'\n", "assert report.checks", reserved=frozenset({"report"}))
    assert errors(outputs)[0].startswith("NameError: 'report' is made by a cell of the release")
    assert stand_in.requests == []


def test_a_missing_answer_and_a_silent_kernel_fail_clearly():
    outputs, _ = run("", "assert answer")
    assert errors(outputs) == ["NameError: name 'answer' is not defined in your notebook"]
    silent = judge.Judge(lambda code: "forged PASS\n")
    assert errors(silent.run("assert answer", "a_test"))[0].startswith(
        "KernelAnswerError: answer: no answer from the notebook's kernel")


def test_a_name_stands_only_for_a_module_the_course_imports():
    """The kernel says which module a name is: the grader imports it only when a solution notebook
    imports it too (never `antigravity`, a `__main__` or a module of the student's)."""
    outputs, _ = run("import json\nimport types\nfake = types.ModuleType('student_helpers')\n"
                     "runner = types.ModuleType('unittest.__main__')\n",
                     "assert json.dumps(1) == '1'\nfake")
    assert errors(outputs) == ["KernelAnswerError: fake: a module the grader does not import (student_helpers)"]
    outputs, _ = run("import types\nrunner = types.ModuleType('unittest.__main__')\n", "runner")
    assert errors(outputs) == ["KernelAnswerError: runner: a module the grader does not import (unittest.__main__)"]
    # The hidden tests' answer helpers: imported by the grade cells themselves, never a kernel's name.
    outputs, _ = run("from handson_lib.autograder import answers\n", "answers")
    assert errors(outputs) == ["KernelAnswerError: answers: a module the grader does not import "
                               "(handson_lib.autograder.answers)"]
    assert {"sqlite3", "numpy", "handson_lib.checking.checks", "handson_lib.profiling"} <= judge.course_modules()
    assert not {"antigravity", "unittest.__main__", "webbrowser"} & judge.course_modules()


def test_numbers_only_cross_as_numpy_arrays():
    for forged in ({"__ndarray__": 1, "dtype": "(60000,60000)f8"}, {"__numpy__": 10 ** 9, "dtype": "V8"},
                   {"__ndarray__": [1], "dtype": "O"}, {"__ndarray__": [1], "dtype": "U10"}):
        with pytest.raises(TypeError, match="numbers only"):
            judge.decode(forged)


def test_free_names_are_what_a_cell_reads_and_does_not_bind():
    cell = ("import numpy\nfrom pytest import approx\nfailed = [c for c in report.checks if c.name in wanted]\n"
            "def f(x):\n    return x + offset\ntry:\n    pass\nexcept ValueError as e:\n    print(e, len(failed))\n")
    assert judge.free_names(cell) == ["offset", "report", "wanted"]


def test_the_grader_runs_the_grade_and_report_cells_only():
    cells = {"grade": {"grade": True, "grade_id": "q1_test", "solution": False},
             "answer": {"grade": False, "grade_id": "q1", "solution": True},
             "report": {"grade": False, "grade_id": "task1_report", "locked": True},
             "forged_report": {"grade": False, "grade_id": "task1_report", "locked": False},
             "on_answers": {"grade": True, "grade_id": "make_iterator_test", "solution": False},
             "plain": None}
    judged = {}
    for name, meta in cells.items():
        nb_cell = nbgrader_ext.nbformat.v4.new_code_cell("pass")
        if meta is not None:
            nb_cell.metadata["nbgrader"] = meta
        judged[name] = nbgrader_ext.judged_outside(nb_cell)
    assert judged == {"grade": "q1_test", "answer": None, "report": "task1_report", "forged_report": None,
                      "on_answers": "make_iterator_test", "plain": None}


def test_the_report_cells_of_the_solutions_are_locked_and_make_the_reports():
    assert judge.report_names() == {"report", "job_report", "mnist_report", "checks"}
    found = set()
    for path in sorted((judge.Path(__file__).parents[1] / "solutions").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade_id") in judge.REPORT_CELLS:
                assert meta["locked"] and not meta["grade"] and not meta["solution"]
                # A report cell reads nothing of the kernel's: the grader runs it alone.
                assert judge.free_names("".join(cell["source"])) == []
                found.add(meta["grade_id"])
    assert found == judge.REPORT_CELLS


RAMP = """
class Ramp:
    def __init__(self, base_lr, base_batch, batch, warmup_iterations):
        self.rate = base_lr * batch / base_batch
    def lr_at(self, iteration):
        return self.rate
"""


def _answer_cell(source):
    cell = nbgrader_ext.nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": False, "grade_id": "answer", "solution": True}
    return cell


def test_on_answers_runs_a_course_function_on_the_answer_cells_in_a_fresh_process():
    cell = ("from handson_lib.checking.notebook import on_answers\n"
            "from handson_lib.experiments import large_batch as lb\n"
            "assert on_answers(lb.rate_at, Ramp, 0.1, 32, 64, 0, 3) == 0.2\n")
    kernel = StandInKernel(RAMP)
    outputs = judge.Judge(kernel.ask, answer_cells=lambda: [RAMP]).run(cell, "a_test")
    assert errors(outputs) == []
    # Not in the kernel: the kernel was only asked for the class's name.
    assert not any("rate_at" in r for r in kernel.requests), kernel.requests
    # Outside the judge (the student's own notebook) the same cell is a plain call.
    namespace = {}
    exec(RAMP, namespace)
    exec(cell, namespace)


def test_the_kernels_own_cells_and_a_replaced_course_function_decide_nothing_of_on_answers():
    """What the kernel did beside the answer cells (here: replaced the course function) is not in
    the fresh process; an answer cell that replaces it runs after the grader took the function."""
    cells = [nbgrader_ext.nbformat.v4.new_code_cell("from handson_lib.experiments import large_batch as lb\n"
                                                    "lb.rate_at = lambda *a, **k: 0.2\nnot_an_import = 1"),
             _answer_cell("class Ramp:\n    def __init__(self, *a):\n        pass\n"
                          "    def lr_at(self, iteration):\n        return 0.7\n"
                          "lb.rate_at = lambda *a, **k: 0.2\n")]
    sources = judge.answer_sources(cells)
    assert sources == ["from handson_lib.experiments import large_batch as lb", cells[1].source]
    kernel = StandInKernel(RAMP)   # (in this process: a replacement here would be the grader's own)
    cell = ("from handson_lib.checking.notebook import on_answers\n"
            "from handson_lib.experiments import large_batch as lb\n"
            "assert on_answers(lb.rate_at, Ramp, 0.1, 32, 64, 0, 3) == 0.2, 'forged'\n")
    outputs = judge.Judge(kernel.ask, answer_cells=lambda: sources).run(cell, "a_test")
    assert errors(outputs) == ["AssertionError: forged"], outputs


def test_on_answers_calls_only_the_course_functions_and_takes_only_data_back():
    outputs, _ = run(RAMP, "import os\nfrom handson_lib.checking.notebook import on_answers\n"
                           "on_answers(os.getcwd)\n")
    assert errors(outputs) == ["KernelAnswerError: on_answers: <built-in function getcwd> is no function of "
                               "the course's modules"]
    # A course function returning an object (here, the student's own instance) gives no object back.
    kernel = StandInKernel(RAMP)
    outputs = judge.Judge(kernel.ask, answer_cells=lambda: [RAMP]).run(
        "from handson_lib.checking.notebook import on_answers\nfrom handson_lib.experiments import tuning\n"
        "on_answers(tuning.iterator_facts, Ramp, 8)\n", "a_test")
    assert len(errors(outputs)) == 1 and "with your answer cells" in errors(outputs)[0], errors(outputs)
    # A name no answer cell makes: said, with the failure of the cell that should have.
    outputs = judge.Judge(kernel.ask, answer_cells=lambda: ["raise ValueError('half done')"]).run(
        "from handson_lib.checking.notebook import on_answers\nfrom handson_lib.experiments import large_batch as lb\n"
        "on_answers(lb.rate_at, Ramp, 0.1, 32, 64, 0, 3)\n", "a_test")
    assert "'Ramp' is not defined by your answer cells (a cell failed: ValueError: half done)" in errors(outputs)[0]
    from handson_lib.checking import notebook
    assert notebook._ANSWER_CALL is None   # the hook is the judge's only while a cell runs


def _tagged(source, nbgrader=None):
    cell = nbgrader_ext.nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = [judge.NOT_RUN_WHEN_GRADING]
    if nbgrader is not None:
        cell.metadata["nbgrader"] = nbgrader
    return cell


def test_a_cell_that_only_shows_runs_is_not_run_when_grading():
    executor = nbgrader_ext.JudgedExecute()
    cell, _ = executor.preprocess_cell(_tagged("raise SystemExit('ran')"), {}, 0)   # no kernel: never sent
    assert [o["output_type"] for o in cell.outputs] == ["stream"]
    assert "not run by the autograder" in cell.outputs[0]["text"]
    # The tag never skips a cell that grading needs: an answer, a grade cell, a locked cell.
    for meta in ({"solution": True, "grade_id": "q1"}, {"grade": True, "grade_id": "q1_test"},
                 {"locked": True, "grade_id": "task1_report"}):
        assert not judge.not_run_when_grading(_tagged("pass", meta)), meta
    assert not judge.not_run_when_grading(nbgrader_ext.nbformat.v4.new_code_cell("pass"))


def test_no_cell_reads_what_a_cell_not_run_when_grading_makes():
    """The solutions' tagged cells only show runs: a later cell that read their names would fail
    under the autograder."""
    tagged_any = False
    for path in sorted((judge.Path(__file__).parents[1] / "solutions").glob("*.ipynb")):
        made = set()
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            if judge.not_run_when_grading(cell):
                tagged_any = True
                for node in ast.walk(ast.parse(source)):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                        made.add(node.id)
                    elif isinstance(node, (ast.Import, ast.ImportFrom)):
                        made |= {(a.asname or a.name).split(".")[0] for a in node.names}
            else:
                read = set(judge.free_names(source)) & made
                if judge.judged_by_grader(cell.get("metadata", {}).get("nbgrader", {})):
                    read -= judge.report_names()   # the grader's own, never the kernel's
                assert not read, f"{path.name}: {sorted(read)} made by a cell not run when grading"
    assert tagged_any


def _stream(text, msg_id="cell-1"):
    return {"msg_type": "stream", "parent_header": {"msg_id": msg_id}, "header": {"msg_type": "stream"},
            "content": {"name": "stdout", "text": text}}


def test_a_kernel_cells_output_is_cut_as_it_arrives():
    executor = nbgrader_ext.JudgedExecute()
    executor.reset_execution_trackers()
    executor.clear_before_next_output = False   # as nbclient sets it when a cell starts
    executor._output_limit, executor._output_used, executor._output_cut = 1 << 20, {}, set()
    outs = []
    line = "x" * 1000 + "\n"
    for _ in range(5000):   # 5 MB printed, a line at a time
        executor.output(outs, _stream(line), None, 0)
    kept = sum(len(o.get("text", "")) for o in outs)
    assert kept <= (1 << 20) and "output cut" in outs[-1]["text"], (kept, outs[-1])
    # The cell's error still comes through, shortened.
    executor.output(outs, {"msg_type": "error", "parent_header": {"msg_id": "cell-1"}, "header": {"msg_type": "error"},
                           "content": {"ename": "ValueError", "evalue": "e" * 100_000, "traceback": ["t"] * 1000}},
                    None, 0)
    assert outs[-1]["output_type"] == "error" and len(outs[-1]["evalue"]) == 2000
    # Another cell starts with its own allowance.
    executor.output(outs, _stream("next cell\n"), None, 1)
    assert outs[-1]["text"] == "next cell\n"
