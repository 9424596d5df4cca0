"""Issue 47: the parallel structure is shown by what a run trained, never by what it says of itself.

The grader fixes the data's split and order (harness.controls), keeps the run's parameters at
iterations it picks, replays the training itself (checking.replay) and compares
(verdicts.structure). These tests plant each way of describing a run's structure without doing its
work and fail without the comparison; the whole runs are the planted mistakes of
tests/test_task1_multi_gpu.py and tests/test_task2_multi_node.py and the synthetic kinds of
tests/test_verdicts.py and tests/test_autograde.py."""

import numpy
import pytest

from handson_lib.autograder import synthetic_class
from handson_lib.checking import checks, replay, runs, scripts
from handson_lib.harness import controls
from handson_lib.verdicts import multi_node, seen, stopped, structure
from handson_lib.verdicts.report import Report
from handson_lib.verdicts.rules import Rules
from conftest import ROOT

TASK1 = ROOT / "solutions" / "train_cifar_multi_gpu.py"
SMALL = ["--epoch", "1", "--train-size", "256", "--test-size", "64", "--batchsize", "32", "--no-progress"]


# ----------------------------------------------------------------------------- what the launcher fixes

@pytest.fixture
def installed():
    """harness.controls installed in this process for a run of seed 1234, undone afterwards."""
    undo = controls.install(1234)
    try:
        yield 1234
    finally:
        undo()


def test_the_split_is_the_runs_whatever_seed_the_script_passes(installed):
    import chainer
    data = list(range(20))
    shards = [[list(s) for s in chainer.datasets.split_dataset_n_random(data, 2, seed=seed)]
              for seed in (None, 0, 1234, 99)]
    assert all(s == shards[0] for s in shards), shards
    order = controls.split_order(installed, 20)
    assert shards[0] == [list(order[:10]), list(order[10:])]
    # A random split in two halves is the same split (the hostile review's correct variant).
    halves = [list(s) for s in chainer.datasets.split_dataset_random(data, 10, seed=7)]
    assert halves == shards[0]


def test_installing_the_controls_is_undone_whole():
    import chainer
    from chainer.iterators import order_samplers
    before = (chainer.datasets.split_dataset_n_random, chainer.datasets.split_dataset_random,
              order_samplers.ShuffleOrderSampler.__init__)
    controls.install(5)()
    assert (chainer.datasets.split_dataset_n_random, chainer.datasets.split_dataset_random,
            order_samplers.ShuffleOrderSampler.__init__) == before


def test_iterators_the_script_makes_draw_nothing_from_numpys_global_generator(installed):
    """The first weights are drawn from numpy's global generator after seed_everything: an extra
    iterator (a test iterator left shuffling) must not move them."""
    from chainer.iterators import SerialIterator
    numpy.random.seed(5)
    SerialIterator(list(range(50)), 8)                 # shuffles by default
    after = numpy.random.random()
    numpy.random.seed(5)
    assert numpy.random.random() == after


def test_the_training_order_is_the_grader_s_and_the_evaluators_in_order():
    from chainer.iterators import SerialIterator
    from chainer.training import StandardUpdater, extensions
    import chainer
    train = SerialIterator(list(range(12)), 4, shuffle=False)
    updater = StandardUpdater(train, chainer.optimizers.SGD().setup(chainer.links.Linear(1, 1)))
    controls.fix_training_order(updater, 3)
    expected = controls.TrainingOrder(3, 0)(numpy.arange(12), 0)
    assert [x for _ in range(3) for x in train.next()] == list(expected)
    test = SerialIterator(list(range(6)), 4, repeat=False, shuffle=True)
    controls.fix_evaluation_order([extensions.Evaluator(test, chainer.links.Linear(1, 1))])
    assert list(test.next()) == [0, 1, 2, 3]


# ----------------------------------------------------------------------------- the comparison

def _replayed(plan, path, stepped, evaluation=None):
    return replay.Replayed(plan, path, stepped, 4, evaluation)


def test_a_comparison_passes_only_on_every_kept_parameter_matching():
    plan = replay.Plan(3, (3,))
    p = {k: numpy.full(10, float(k), numpy.float32) for k in (2, 3, 4)}
    done = _replayed(plan, {3: p[3].astype(numpy.float64)}, {4: p[4].astype(numpy.float64)})
    both = structure.compare({"rank0": p, "rank1": dict(p)}, done, ["rank0", "rank1"])
    assert both.matched(Rules()) and both.steps == 2, both
    # rank 1 kept other parameters at iteration 3: not identical on every rank
    apart = structure.compare({"rank0": p, "rank1": {**p, 3: p[3] + 0.5}}, done, ["rank0", "rank1"])
    assert not apart.matched(Rules()) and apart.where[apart.farthest(Rules())] == "rank1@3", apart
    # a missing file, and an update that is not the replay's
    assert structure.compare({"rank0": p}, done, ["rank0", "rank1"]).missing[0] == "rank1@2"
    off = structure.compare({"rank0": {**p, 4: p[4] + 0.3}}, done, ["rank0"])
    assert not off.matched(Rules()) and off.farthest(Rules()) == structure.STEP, off
    # a forged file of another shape, or not numbers, never matches
    bad = structure.compare({"rank0": {**p, 3: numpy.zeros(3)}}, done, ["rank0"])
    assert not bad.matched(Rules())


def test_what_the_records_passed_is_overruled_where_the_training_does_not_show_it():
    report = Report("multi-node", "x.py")
    for name in multi_node.STRUCTURE:
        report.add(name, True, "the records say so")
    comparison = structure.Comparison(missing=["rank0@5"])
    assert not structure.shown_by_training(report, multi_node.STRUCTURE, comparison, Rules(), 2, "ranks")
    first, *rest = report.checks
    assert not first.passed and "rank0 kept no parameters at iteration 5" in first.message
    assert all(not c.passed and "(see above)" in c.message for c in rest), report.text()


# ----------------------------------------------------------------------------- a real run and the replay

@pytest.fixture(scope="module")
def task1_run(tmp_path_factory):
    seed = 4242
    plan = replay.snapshot_plan("multi-gpu", SMALL, 2, seed)
    obs = runs.run_observed(TASK1, ["--gpus", "0", "1", *SMALL, "--seed", str(seed)], 300, snapshots=plan.iterations)
    assert obs.finished, obs.output
    return obs, replay.replay("multi-gpu", SMALL, 2, seed, plan, obs.snapshots)


def test_the_solution_trains_what_the_grader_replays_to_the_bit(task1_run):
    obs, replayed = task1_run
    comparison = structure.compare(obs.snapshots, replayed, ["main", "worker1"])
    assert comparison.matched(Rules()), comparison
    # The path and the workers to the bit; an update within the rounding of MomentumSGD's velocity,
    # which the grader takes from two kept parameters (their difference).
    assert comparison.worst[structure.PATH] == comparison.worst[structure.ALIKE] == 0.0, comparison
    assert comparison.worst[structure.STEP] < 1e-4, comparison


def test_a_path_kept_for_the_session_replays_as_the_path_computed(task1_run, tmp_path):
    """The replay's path from the start is computed for a session's first student and kept in its
    reference cache (the grader's): the next students' replays, from it, are the same to the bit;
    another seed's replay computes its own; a kept file that is not the model's parameters is
    computed again."""
    from handson_lib import settings
    obs, computed = task1_run
    seed, plan = 4242, computed.plan
    cache = tmp_path / "references"
    cache.mkdir()
    with settings.override(reference_cache=str(cache)):
        first = replay.replay("multi-gpu", SMALL, 2, seed, plan, obs.snapshots)
        kept = sorted(cache.glob("replay-path-*.npz"))
        assert len(kept) == 1
        again = replay.replay("multi-gpu", SMALL, 2, seed, plan, obs.snapshots)
        for replayed in (first, again):
            assert replayed.parameters.keys() == computed.parameters.keys()
            for k, array in computed.parameters.items():
                assert numpy.array_equal(replayed.parameters[k], array)
            for k, array in computed.stepped.items():
                assert numpy.array_equal(replayed.stepped[k], array)
        assert structure.compare(obs.snapshots, again, ["main", "worker1"]).matched(Rules())
        # The kept path is what the replay used: planted otherwise, the run no longer matches it.
        with numpy.load(kept[0]) as arrays:
            numpy.savez(kept[0], **{name: arrays[name] * 1.01 for name in arrays.files})
        assert not structure.compare(obs.snapshots, replay.replay("multi-gpu", SMALL, 2, seed, plan, obs.snapshots),
                                     ["main", "worker1"]).matched(Rules())
        numpy.savez(kept[0], p1=numpy.zeros(3))
        assert structure.compare(obs.snapshots, replay.replay("multi-gpu", SMALL, 2, seed, plan, obs.snapshots),
                                 ["main", "worker1"]).matched(Rules())
        replay.replay("multi-gpu", SMALL, 2, seed + 1, plan, None)
        assert len(list(cache.glob("replay-path-*.npz"))) == 2


def test_parameters_a_run_hands_in_never_reach_the_replays_path(tmp_path):
    """A timed launch on 2 ranks ends its first epoch at iteration 10: parameters it leaves for
    that iteration (not one the plan asked for) are not taken, and those of an iteration the plan
    did ask for are evaluated on, then put back: the path to 18 is the one computed from the start,
    and so is the path kept for the session's next students (a run's planted parameters poisoned
    every later student's timing check before)."""
    from handson_lib import settings
    args = ["--train-size", "640", "--test-size", "64", "--batchsize", "32", "--no-progress"]
    size = replay.replay("multi-node", args, 2, 77, replay.timing_plan(3), None).parameters[3].size
    planted = {"rank0": {10: numpy.full(size, 0.5, numpy.float32)}}
    for plan in (replay.timing_plan(18), replay.Plan(10, (), late=18)):
        clean = replay.replay("multi-node", args, 2, 77, plan, None)
        cache = tmp_path / f"references-{plan.early}"
        cache.mkdir()
        with settings.override(reference_cache=str(cache)):
            poisoned = replay.replay("multi-node", args, 2, 77, plan, planted)
            again = replay.replay("multi-node", args, 2, 77, plan, None)
        for replayed in (poisoned, again):
            assert numpy.array_equal(replayed.parameters[18], clean.parameters[18]), plan
        assert (poisoned.evaluation is not None) == (plan.early == 10)


def test_parameters_of_one_process_trained_otherwise_do_not_match(task1_run):
    """The snapshots of the same run with its worker's files dropped, or the main's from another
    training (a shift of the parameters): no match."""
    obs, replayed = task1_run
    main_only = {"main": obs.snapshots["main"]}
    assert not structure.compare(main_only, replayed, ["main", "worker1"]).matched(Rules())
    shifted = {who: {k: p * 1.01 for k, p in kept.items()} for who, kept in obs.snapshots.items()}
    assert not structure.compare(shifted, replayed, ["main", "worker1"]).matched(Rules())


# ----------------------------------------------------------------------------- the evaluator's values

def _ranks(reported):
    return {r: {"evaluations": [{"reported": rep, "local": rep, "wrapped": True}]} for r, rep in enumerate(reported)}


EVALUATION = {"ranks": [{"validation/main/accuracy": 0.5, "validation/main/loss": 1.4},
                        {"validation/main/accuracy": 0.7, "validation/main/loss": 1.0}],
              "mean": {"validation/main/accuracy": 0.6, "validation/main/loss": 1.2},
              "mean_strict": {"validation/main/accuracy": 0.6, "validation/main/loss": 1.2},
              "whole": {"validation/main/accuracy": 0.61, "validation/main/loss": 1.19}}


@pytest.mark.parametrize("reported, passed, says", [
    ([EVALUATION["mean"]] * 2, True, ""),
    (EVALUATION["ranks"], False, "each rank reported its own part's"),
    ([EVALUATION["whole"]] * 2, False, "the whole test set's"),
    ([{"validation/main/accuracy": 0.6, "validation/main/loss": 3.0}] * 2, False, "computed by the grader"),
])
def test_an_evaluator_passes_on_the_value_the_grader_computes_not_on_its_record(reported, passed, says):
    run = runs.MPIObservation(2, 0, False, "", _ranks(reported), {}, 1.0)
    report = Report("multi-node", "x.py")
    report.add("evaluator aggregated over ranks", True, "the records say so")
    multi_node._evaluator_computed(report, run, EVALUATION, 1e-4)
    check = report.checks[0]
    assert check.passed is passed and says in check.message, check


# ----------------------------------------------------------------------------- what is graded

def test_a_module_beside_the_script_is_named_and_never_run(tmp_path):
    """Issue 47's second win: a helper of the student's own beside the script rewrites the records.
    Only the assignment's files are graded: the check says so before any run, and a run imports
    nothing from beside the script (it runs a copy of it alone)."""
    mistake = synthetic_class.MISTAKES["imports_its_helper"]
    script = mistake.plant(TASK1, tmp_path)
    assert scripts.beside_the_script(script) == ["cifar_utils"]
    report = checks.check_multi_gpu(script, args=SMALL, against="self")
    assert not report.ok and "imports cifar_utils, which lie(s) beside it" in report.checks[0].message, report.text()
    probe = tmp_path / "probe.py"
    probe.write_text("import cifar_utils\n")
    obs = runs.run_observed(probe, [], 60)
    assert "No module named 'cifar_utils'" in obs.output, obs.output


def test_the_sandbox_copies_only_the_assignments_files(tmp_path):
    from handson_lib.autograder import sandbox
    for name in ("01_multi_gpu.ipynb", "train_cifar_multi_gpu.py", "cifar_utils.py", "miyabi/run.sh", "notes/x.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x")
    graded = ["01_multi_gpu.ipynb", "train_cifar_multi_gpu.py", "miyabi/run.sh"]
    copied = {str(p.relative_to(tmp_path)) for p in sandbox._copied(tmp_path, graded)}
    assert copied == {*graded, "miyabi"}
    assert sandbox.left_out(tmp_path, graded) == ["cifar_utils.py", "notes/x.txt"]


# ----------------------------------------------------------------------------- slow is not broken

def test_a_run_stopped_while_it_still_trains_is_called_slow_not_a_loop():
    slow = runs.Observation(-9, True, "", {}, {}, 300.0, 300.0,
                            {"stalled": False, "iterations": 61, "since_progress": 2.0})
    assert "too slow for the grader, not an infinite loop" in stopped.why_it_stopped(slow, 300)
    looping = runs.Observation(-9, True, "", {}, {}, 40.0, 300.0,
                               {"stalled": True, "stall": 20, "first_progress": 4.0, "iterations": 10,
                                "since_progress": 20.0})
    assert "an infinite loop, or workers waiting" in stopped.why_it_stopped(looping, 300)
    burning = runs.Observation(-9, True, "", {}, {}, 80.0, 300.0, {"over_cpu": True})
    assert "more CPU than five times" in stopped.why_it_stopped(burning, 300)


def test_the_cpu_watchdog_stops_a_loop_whatever_the_clock(tmp_path):
    from handson_lib import launch
    res = launch.run_watched(["python3", "-c", "while True: pass"], 120, cpu_limit=1.5)
    assert res.timed_out and res.over_cpu and res.seconds < 60, res
    assert "[watchdog]" in res.output


@pytest.mark.parametrize("header", ["epoch       main/loss   validation/main/loss",
                                    "epoch       iteration   main/loss   elapsed_time",
                                    "iteration   validation/main/accuracy"])
def test_any_printreport_header_of_rank_0_is_seen(header):
    """The hostile review's false negative: a header with an `iteration` column is a report too."""
    report = Report("multi-node", "x.py")
    report.add("reports only on rank 0", True, "the records say so")
    seen.reports_seen(report, f"[1,0]<stdout>: {header}\n")
    assert report.checks[0].passed, report.checks[0]


def test_reports_are_believed_only_where_rank_0_is_seen_printing_them():
    report = Report("multi-node", "x.py")
    report.add("reports only on rank 0", True, "the records say so")
    seen.reports_seen(report, "[1,0]<stdout>: Num process (COMM_WORLD): 2\n")
    assert not report.checks[0].passed
    honest = Report("multi-node", "x.py")
    honest.add("reports only on rank 0", True, "the records say so")
    seen.reports_seen(honest, "[1,0]<stdout>: epoch       main/loss   validation/main/loss\n")
    assert honest.checks[0].passed
