"""Task #2: ChainerMN on local CPU ranks; the grader tells each kind of mistake by its own reason.

Tiers: the check of the solution (correctness) and the skeletons are quick; the planted mistakes
(synthetic_class.MISTAKES, the same edits the synthetic classes hand in) run at the smallest
size that decides their check, and the watchdog's stops, in the slow tier; the throughput and
scaling ratios against the reference are timed."""

import re
import time

import pytest

from handson_lib.checking import checks
from handson_lib.verdicts import records
from handson_lib.autograder import synthetic_class
from conftest import GRADED_SEED, ROOT, failed_checks, mutant

SOLUTION = ROOT / "solutions" / "train_cifar_multi_node.py"
MISTAKES = synthetic_class.mistakes_in(SOLUTION.name)
MNIST_SOLUTION = ROOT / "solutions" / "train_mnist_multi_node.py"
MNIST_SKELETON = ROOT / "exercises" / "train_mnist_multi_node.py"
#: A planted mistake decides its check after a few steps: 2 iterations per rank and an evaluation.
SMALLEST = ["--epoch", "1", "--train-size", "256", "--test-size", "64", "--batchsize", "32", "--no-progress"]


def correctness_failures(report):
    """The failed correctness checks; an incorrect run is not timed, and its speed checks say so."""
    failed = failed_checks(report)
    speed = {c.name for c in report.speed_checks}
    for name in speed:
        assert failed[name].startswith("not timed: the run is not correct yet"), report.text()
    return {name: message for name, message in failed.items() if name not in speed}


@pytest.fixture(scope="module")
def reference(measure_reference):
    """The reference solution's graded run on 2 ranks with the seed the checks draw here
    (conftest.graders_seed), measured once per session (conftest.measure_reference); speed and
    scaling are timed step by step beside the reference."""
    return {2: measure_reference(SOLUTION.name, [*checks.GRADED_MULTI_NODE_ARGS, "--seed", str(GRADED_SEED)], np=2)}


@pytest.fixture(autouse=True)
def _session_seed(graders_seed):
    """Every check here draws the seed the reference was measured with, as in a grading session."""


def test_the_check_of_the_solution_passes_every_correctness_check(reference):
    # Untimed: its plain ratio to the reference is shown, not judged (the timed pass judges it).
    report = checks.check_multi_node(SOLUTION, reference=reference, scaling=False, timed=False)
    assert [c.name for c in report.speed_checks] == ["throughput vs the reference"]
    assert all(c.passed for c in report.checks if c not in report.speed_checks), report.text()
    assert [c.name for c in report.checks][:-1] == [
        "runs to the end", "shards are disjoint", "shards cover the training set",
        "parameters identical on every rank", "evaluator aggregated over ranks", "reports only on rank 0",
        "accuracy beats chance"]
    banner = reference[2].output
    assert "Num process (COMM_WORLD): 2" in banner and "Using naive communicator" in banner
    assert sum("Throughput:" in line for line in banner.splitlines()) == 1, "only rank 0 reports"


@pytest.mark.timed
def test_reference_passes_with_scaling(reference):
    report = checks.check_multi_node(SOLUTION, reference=reference)
    assert report.ok, report.text()
    assert [c.name for c in report.checks][-2:] == ["throughput vs the reference",
                                                    "scaling 1 -> 2 ranks vs the reference"]
    # The same script timed step by step beside itself: the ratios sit at 1 within the noise.
    for check in report.speed_checks:
        assert 0.8 < check.value < 1.25, check.line()
        assert "spread" in check.message, check.line()


@pytest.mark.timed
def test_a_slower_training_step_is_timed_as_slower(reference, tmp_path):
    """A correct script whose every step does its work twice (the same training): its step takes twice the
    reference's whatever the machine's speed and load (a fixed sleep would not: on a fast, idle
    machine 100 ms more is more than twice a step). Timed in turn with the reference's, its ratio
    lands in the half band (local: 0.4-0.7), while its scaling, slowed alike on 1 and 2 ranks,
    keeps the full band."""
    script = MISTAKES["twice_the_work_2"].plant(SOLUTION, tmp_path)
    report = checks.check_multi_node(script, reference=reference, site="local")
    assert [c.name for c in report.failed] == ["throughput vs the reference"], report.text()
    speed = {c.name: c.value for c in report.speed_checks}
    assert 0.4 < speed["throughput vs the reference"] < 0.7, report.text()
    assert speed["scaling 1 -> 2 ranks vs the reference"] > 0.75, report.text()
    assert checks.throughput_credit(report, points=2, print_fn=lambda *_: None) == 1.5


def test_skeleton_fails_not_implemented(skeleton_reports):
    report = skeleton_reports["multi-node"]
    # Every part not written yet, found by reading the script before any run.
    assert failed_checks(report)["runs to the end"].startswith(
        "not implemented yet: Task #2 is not complete: `comm`, `device`, `optimizer`, `evaluator` are still None")


def _check_mistake(name, reference, tmp_path, **kwargs):
    mistake = MISTAKES[name]
    script = mistake.plant(SOLUTION, tmp_path)
    kwargs.setdefault("args", SMALLEST)
    return mistake, checks.check_multi_node(script, reference=reference, scaling=False, min_accuracy=0.0, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in MISTAKES if MISTAKES[n].fails])
def test_a_planted_mistake_fails_its_own_check_only(reference, tmp_path, name):
    """An incorrect run is not timed either: its speed checks say so (correctness_failures)."""
    mistake, report = _check_mistake(name, reference, tmp_path)
    failed = correctness_failures(report)
    assert set(failed) == mistake.fails, report.text()
    assert mistake.says in "\n".join(failed.values()), report.text()


@pytest.mark.slow
def test_deadlock_on_one_rank_is_stopped_within_the_time_limit(reference, tmp_path):
    started = time.monotonic()
    # A limit below the watchdog's stall floor (15 s without a first iteration): the limit stops it.
    _, report = _check_mistake("deadlock", reference, tmp_path, timeout=12)
    assert time.monotonic() - started < 12 + 20
    message = failed_checks(report)["runs to the end"]
    assert message.startswith("deadlock: the 2-rank run did not finish within 12 s"), message
    assert "rank 0 last output:" in message and "rank 1 last output:" in message


@pytest.mark.slow
def test_deadlock_is_stopped_early_once_the_iterations_stop(reference, tmp_path):
    """Under a long time limit the watchdog stops a deadlock once no iteration has come for 4 times
    the reference's longest wait (its start-up), not at the limit."""
    stall = checks.student_stall(reference[2])
    limit = checks.student_limit(reference[2], 300)
    assert stall is not None and stall < limit
    started = time.monotonic()
    _, report = _check_mistake("deadlock", reference, tmp_path, timeout=300)
    # Not at the limit: once the stall's seconds of a whole core have passed (more wall seconds
    # when the machine is loaded past its cores).
    assert time.monotonic() - started < limit
    message = failed_checks(report)["runs to the end"]
    waited = re.match(r"deadlock: the 2-rank run waited (\d+) s for its first training iteration and was stopped "
                      r"early by the watchdog", message)
    assert waited and int(waited.group(1)) >= int(stall), message


@pytest.mark.slow
def test_crash_on_one_rank_is_reported_and_aborts_the_others(reference, tmp_path):
    started = time.monotonic()
    mistake, report = _check_mistake("crash_on_one_rank", reference, tmp_path, timeout=120)
    assert time.monotonic() - started < 60
    message = failed_checks(report)["runs to the end"]
    assert f"rank 1 {mistake.says}" in message, message


def test_removed_communicator_gets_a_clear_message(tmp_path):
    from handson_lib import launch
    res = launch.run_mpi(1, [SOLUTION, "--communicator", "hierarchical", "--epoch", "1"], timeout=60)
    assert res.returncode != 0
    assert "communicator 'hierarchical' was removed in Chainer 7" in res.output


def test_the_mnist_check_of_the_solution_passes(measure_reference):
    reference = {2: measure_reference(MNIST_SOLUTION.name, checks.MNIST_ARGS, np=2)}
    report = checks.check_mnist_multi_node(MNIST_SOLUTION, reference=reference)
    # Its speed is shown, never scored: a ratio taken beside the other tests' runs.
    assert [c.name for c in report.checks][-1] == "throughput vs the reference"
    assert all(c.passed for c in report.checks[:-1]) and len(report.checks) == 8, report.text()


def _code_lines(path):
    """The code of a script without its docstring and comments (the gaps are comments only)."""
    import ast
    import io
    import tokenize
    text = path.read_text()
    doc = ast.get_docstring(ast.parse(text), clean=False)
    text = text.replace(f'"""{doc}"""', "", 1)
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type != tokenize.COMMENT]
    return [line.rstrip() for line in tokenize.untokenize(tokens).splitlines() if line.strip()]


def test_mnist_skeleton_is_the_single_process_script():
    """"ChainerMN in seconds" starts from train_mnist.py itself: the student only adds lines."""
    skeleton = _code_lines(MNIST_SKELETON)
    assert skeleton == _code_lines(ROOT / "solutions" / "train_mnist.py")
    assert "chainermn" not in "\n".join(skeleton)
    text = MNIST_SKELETON.read_text()
    assert sum(line.strip() == "# PUT YOUR CODE HERE" for line in text.splitlines()) == 6
    for api in ("create_communicator", "intra_rank", "scatter_dataset", "create_multi_node"):
        assert api not in text, f"the skeleton names {api}: the notebook teaches it"


def test_mnist_skeleton_fails_with_a_reason_per_missing_step(skeleton_reports):
    report = skeleton_reports["mnist-multi-node"]
    failed = failed_checks(report)
    assert set(failed) == {"shards are disjoint", "shards cover the training set", "parameters identical on every rank",
                           "evaluator aggregated over ranks", "reports only on rank 0"}, report.text()
    assert "chainermn.scatter_dataset" in failed["shards are disjoint"]
    assert "plain MomentumSGD" in failed["parameters identical on every rank"]
    # Each rank trains alone (in its own order) and evaluates alone: no mean over the ranks.
    assert "create_multi_node_evaluator" in failed["evaluator aggregated over ranks"]
    assert "ranks [1] also run" in failed["reports only on rank 0"]


def test_mnist_throughput_line_counts_every_rank(tmp_path):
    from handson_lib import launch
    res = launch.run_mpi(2, [MNIST_SOLUTION, "--epoch", "1", "--no-progress", "--out", tmp_path], timeout=120)
    assert res.returncode == 0, res.output[-3000:]
    lines = [line for line in res.output.splitlines() if "Throughput:" in line]
    assert len(lines) == 1, "only rank 0 reports"
    # 2 ranks x batch 100 per timed iteration
    images = int(lines[0].split("(")[1].split("/")[0])
    assert images % 200 == 0 and images > 0, lines[0]


def _stretch_cells():
    import json
    cells = {c["id"]: "".join(c["source"]) for c in
             json.loads((ROOT / "solutions" / "02_multi_node.ipynb").read_text())["cells"]}
    return cells["stretch-answer"], cells["stretch-run"], cells["stretch-test"]


MEAN_OF_RANKS = '''
    correct = numpy.bincount(t[predicted == t], minlength=n_class)
    total = numpy.bincount(t, minlength=n_class)
    return comm.allreduce_obj(correct / numpy.maximum(total, 1)) / comm.size
'''


@pytest.mark.parametrize("variant", ["solution", "mean_of_ranks", "skeleton", "from_the_course"])
def test_stretch_grade_cell_accepts_only_the_aggregated_metric(tmp_path, monkeypatch, variant):
    """`from_the_course` (issue 47's fourth win): the answer returns the course function the test
    compares with; the test's set is one the grader draws, each rank given its part alone, so the
    function's default (the digits' own test set) is not it."""
    from handson_lib.autograder.synthetic_class import STRETCH_FROM_THE_COURSE
    answer, run, test = _stretch_cells()
    source = answer
    if variant == "mean_of_ranks":
        head, rest = source.split("    correct = ", 1)
        source = head + MEAN_OF_RANKS.lstrip("\n")
    elif variant == "skeleton":
        source = source.split("    ### BEGIN SOLUTION")[0]
    elif variant == "from_the_course":
        source = STRETCH_FROM_THE_COURSE
    lines = [line for line in source.splitlines() if "### " not in line]
    cell = tmp_path / "answer_cell.py"  # a file, as a kernel's cell is for linecache
    cell.write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(cell.read_text(), str(cell), "exec"), scope)
    if variant == "solution":
        exec(run, scope)   # the notebook's own run (not run when grading: the test runs its own)
        exec(test, scope)
        assert scope["stretch"]["shard_sizes"] == [180, 179]
        sizes = scope["checked"]["shard_sizes"]
        assert sum(sizes) == len(scope["held"][1]) and 150 <= sum(sizes) <= 300 and sizes[0] != sizes[1], sizes
    else:
        with pytest.raises(AssertionError, match="returned None" if variant == "skeleton" else "whole test set"):
            exec(test, scope)


def _shard_report(shards, train):
    report = checks.Report("multi-node", "x.py")
    records._shard_checks(report, {"shards": shards, "train_fingerprints": train}, what="rank")
    return {c.name: c for c in report.checks}


def test_the_padding_of_equal_length_shards_is_no_overlap_but_more_is():
    """scatter_dataset's default force_equal_length=True: 10 images on 4 ranks are windows of 3
    that overlap by 2 images (02 teaches it). Anything more than that padding is an overlap."""
    train = list(range(10))
    windows = [[0, 1, 2], [2, 3, 4], [5, 6, 7], [7, 8, 9]]
    checks_seen = _shard_report(windows, train)
    assert checks_seen["shards are disjoint"].passed, checks_seen["shards are disjoint"].message
    assert "2 image(s) in two shards" in checks_seen["shards are disjoint"].message
    assert checks_seen["shards cover the training set"].passed
    for wrong in ([[0, 1, 2], [2, 3, 4], [4, 5, 6], [6, 7, 8]],     # overlaps, and image 9 in no shard
                  [[0, 1, 2], [0, 1, 2], [5, 6, 7], [7, 8, 9]],     # as many twice, but not windows
                  [list(range(10))] * 4):                          # every rank trains everything
        assert not _shard_report(wrong, train)["shards are disjoint"].passed, wrong
    assert _shard_report([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]], train)["shards are disjoint"].passed


@pytest.mark.slow
@pytest.mark.parametrize("script, np, check", [(SOLUTION, 3, checks.check_multi_node),
                                               (MNIST_SOLUTION, 4, checks.check_mnist_multi_node)])
def test_the_self_check_passes_the_solution_on_any_number_of_ranks(script, np, check):
    """The training sets do not split evenly over 3 and 4 ranks: the default equal-length shards
    overlap by their padding, which the shard check accepts (the student's self-check mode)."""
    report = check(script, np=np, against="self", scaling=False)   # the self-check's own arguments
    assert correctness_failures(report) == {}, report.text()
    assert "the padding of scatter_dataset's force_equal_length=True" in report.checks[1].message, report.text()
