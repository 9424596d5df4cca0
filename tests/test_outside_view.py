"""What the grader sees of a run itself, outside the student's processes (issue 37): a record
written inside them can fail a check, never pass one alone.

Each defence here is planted against and fails without it: the review of the script as handed in,
the processes that compute and the CPU they use (launch.OutsideView), the ranks' traffic against
what averaging the gradients moves, the grader's own seed for the held-out evaluation, and the
grader's private timing slot. The runs that plant them whole are the synthetic kinds
`forged_structure` (tests/test_task1_multi_gpu.py, tests/test_verdicts.py) and `forged_alone`
(tests/test_hostile.py, in the sandbox; tests/test_autograde.py's class)."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy
import pytest

from handson_lib import launch
from handson_lib.checking import baselines, checks, evidence, source_review
from handson_lib.checking.timing import scored
from handson_lib.checking.runs import MPIObservation, Observation
from handson_lib.verdicts import multi_node, seen
from handson_lib.verdicts.rules import Rules

from conftest import ROOT

# ----------------------------------------------------------------------------- the review of the script

PLANTED = {
    "import atexit\natexit.register(print)\n": "imports atexit",
    "import os\nos._exit(0)\n": "uses os._exit",
    "import os\npath = os.environ['HANDSON_OBSERVE_DIR']\n": "names 'HANDSON_OBSERVE'",
    "open('observed-rank0.json', 'w')\n": "names 'observed-rank0.json'",
    "from handson_lib.harness import observe\n": "imports handson_lib.harness",
    "import handson_lib.checking.checks\n": "imports handson_lib.checking.checks",
    "import sys\nsys.modules['x'] = None\n": "names 'sys.modules'",
    "import gc\nfor o in gc.get_objects():\n    pass\n": "uses gc.get_objects",
    "import ctypes\n": "imports ctypes",
    "print(run.__qualname__)\n": "names '__qualname__'",
}


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_the_review_names_each_line_a_training_script_has_no_use_for(planted):
    script = "import chainer\n\n" + planted + "print('trained')\n"
    found = source_review.review(script)
    assert any(PLANTED[planted] == what for _, what in found), found
    assert seen.review_said(found).startswith("line 3 ") or seen.review_said(found).startswith("line 4 ")


def test_the_courses_own_scripts_pass_the_review():
    scripts = [*sorted((ROOT / "solutions").glob("*.py")), *sorted((ROOT / "exercises").rglob("*.py"))]
    assert len(scripts) >= 12
    assert {p.name: source_review.review(p.read_text()) for p in scripts if source_review.review(p.read_text())} == {}


def test_a_flagged_script_fails_its_run_as_tampering_for_review():
    report = checks.Report("multi-gpu", "x.py")
    report.add("runs to the end", True, "94 iterations in 19.8 s")
    seen.review_contradicts(report, [(12, "imports atexit"), (30, "uses os._exit")])
    check = report.checks[0]
    assert not check.passed and check.message.startswith(checks.TAMPERING), check
    assert "line 12 imports atexit; line 30 uses os._exit" in check.message


# ----------------------------------------------------------------------------- processes seen from outside

BURNS = """
import multiprocessing, os, sys, time

def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

if __name__ == "__main__":
    burn(float(sys.argv[1]))                                    # the parent's start-up
    workers = [multiprocessing.get_context("fork").Process(target=burn, args=(float(sys.argv[2]),))
               for _ in range(int(sys.argv[3]))]
    idle = multiprocessing.get_context("fork").Process(target=time.sleep, args=(1.5,))
    for p in workers + [idle]:
        p.start()
    burn(float(sys.argv[4]))                                    # the parent beside its children
    for p in workers + [idle]:
        p.join()
"""


@pytest.mark.parametrize("children, child_cpu, parent_beside, busy", [
    (2, 0.6, 0.0, 3),     # two workers beside their parent: three computing
    (0, 0.0, 1.2, 1),     # one process does the work: one
    (1, 0.05, 1.5, 1),    # a child that barely works beside a busy parent is no worker
])
def test_the_outside_view_counts_the_processes_that_compute(tmp_path, children, child_cpu, parent_beside, busy):
    script = tmp_path / "burns.py"
    script.write_text(BURNS)
    outside = launch.OutsideView(interval=0.05)
    res = launch.run_watched([sys.executable, str(script), "0.4", str(child_cpu), str(children), str(parent_beside)],
                             60, outside=outside)
    assert res.ok, res.output
    view = outside.result()
    computing = seen.busy_processes(view)
    assert len(computing) == busy, view
    assert view["cpu"] >= 0.4 + children * child_cpu * 0.8 + parent_beside * 0.8, view
    assert view["loopback_bytes"] is None   # no network namespace of its own outside the sandbox


def test_the_sandboxs_bwrap_is_no_worker_beside_one_process_that_computed():
    """The grading sandbox's view of a one-process run (as seen there): two bwraps, the second
    spending 0.15 CPU-seconds mounting the library file by file, then the one process that trained."""
    sandboxed = {"processes": [
        {"pid": 2648, "ppid": 2623, "name": "bwrap", "cpu": 0.04, "parent_cpu_at_birth": None},
        {"pid": 2651, "ppid": 2648, "name": "bwrap", "cpu": 0.15, "parent_cpu_at_birth": 0.04},
        {"pid": 2652, "ppid": 2651, "name": "python3.11", "cpu": 19.16, "parent_cpu_at_birth": 0.15}]}
    assert [p["pid"] for p in seen.busy_processes(sandboxed)] == [2652]
    two = {"processes": [*sandboxed["processes"],
                         {"pid": 2660, "ppid": 2652, "name": "python3.11", "cpu": 8.0, "parent_cpu_at_birth": 2.0}]}
    assert [p["pid"] for p in seen.busy_processes(two)] == [2652, 2660]


def _report(*names):
    report = checks.Report("task", "x.py")
    for name in names:
        report.add(name, True, "the records say so")
    return report


def test_workers_the_records_claim_but_the_grader_did_not_see_are_tampering():
    report = _report("one worker process per device")
    one = {"processes": [{"pid": 10, "ppid": 1, "name": "python", "cpu": 30.0, "parent_cpu_at_birth": None}]}
    seen.workers_seen(report, one, 2)
    assert not report.checks[0].passed and report.checks[0].message.startswith(
        checks.TAMPERING + "the grader saw 1 process(es) computing (30.0 CPU-seconds), 2 expected"), report.text()
    two = {"processes": [*one["processes"], {"pid": 11, "ppid": 10, "name": "python", "cpu": 12.0,
                                              "parent_cpu_at_birth": 4.0}]}
    honest = _report("one worker process per device")
    seen.workers_seen(honest, two, 2)
    assert honest.ok


def test_a_run_that_says_it_trained_with_too_little_cpu_is_tampering():
    reference = Observation(0, False, "", {"iterations": 94, "batch_sizes": [32, 32]}, {}, 20.0,
                            outside={"cpu": 30.0})
    args = ["--epoch", "3", "--train-size", "2000"]
    work = baselines.work(args, reference, "reference")
    assert work == (6000, 94 * 64)
    early = _report("runs to the end")
    seen.work_seen(early, 4.0, baselines.expected_cpu(reference, work), Rules())
    assert not early.ok and "its processes used 4.0 CPU-seconds" in early.checks[0].message, early.text()
    honest = _report("runs to the end")
    seen.work_seen(honest, 26.0, baselines.expected_cpu(reference, work), Rules())
    assert honest.ok
    # Fewer images asked (a planted mistake's smallest run): less CPU expected in proportion.
    small = _report("runs to the end")
    seen.work_seen(small, 4.0, baselines.expected_cpu(
        reference, baselines.work(["--epoch", "1", "--train-size", "256"], reference, "reference")), Rules())
    assert small.ok


def _mpi(np, loopback, iterations=80, size=545098, last_sampled=80):
    """A run's observation; the grader's last sample of the loopback saw it at `last_sampled`."""
    ranks = {r: {"iterations": iterations, "batch_sizes": [32], "dataset": {"n_train": 1280}} for r in range(np)}
    traffic = [[0, 0], [last_sampled, loopback]] if loopback is not None else []
    return MPIObservation(np, 0, False, "", ranks, {r: numpy.zeros(size, numpy.float32) for r in range(np)}, 20.0,
                          outside={"cpu": 10.0, "loopback_bytes": loopback, "traffic": traffic})


def test_ranks_that_sent_each_other_next_to_nothing_did_not_average_their_gradients():
    reference = _mpi(2, None)
    work = baselines.work(["--epoch", "4", "--train-size", "1280"], reference, "reference")
    alone = _report("parameters identical on every rank")
    seen.averaging_seen(alone, *baselines.averaging(_mpi(2, 10_000_000), reference, work), Rules())   # the scatter only
    message = alone.checks[0].message
    assert not alone.ok and message.startswith(checks.TAMPERING + "the ranks sent each other 10.0 MB in their first "
                                               "80 iterations; averaging the gradients moves about 349 MB"), message
    honest = _report("parameters identical on every rank")
    seen.averaging_seen(honest, *baselines.averaging(_mpi(2, 368_000_000), reference, work), Rules())
    assert honest.ok
    # Outside the sandbox the bytes are not seen: nothing to weigh.
    assert baselines.averaging(_mpi(2, None), reference, work) is None


def test_only_the_iterations_the_graders_samples_saw_are_weighed():
    """A short run on a busy machine may end between two of the grader's samples: its last one saw
    the start-up's bytes only (a class of 60 graded 4 at a time took a correct MNIST conversion for
    ranks training alone). The bytes are weighed against the iterations the samples covered."""
    reference = _mpi(2, None)
    work = baselines.work(["--epoch", "4", "--train-size", "1280"], reference, "reference")
    assert baselines.averaging(_mpi(2, 900_000, last_sampled=1), reference, work) is None   # start-up only
    half = _report("parameters identical on every rank")
    seen.averaging_seen(half, *baselines.averaging(_mpi(2, 184_000_000, last_sampled=40), reference, work), Rules())
    assert half.ok, half.text()   # half the run seen, half the bytes
    alone = _report("parameters identical on every rank")
    seen.averaging_seen(alone, *baselines.averaging(_mpi(2, 2_000_000, last_sampled=40), reference, work), Rules())
    assert not alone.ok and "in their first 40 iterations" in alone.checks[0].message, alone.text()
    # A mark past the training asked is held to the training asked, no more.
    over = baselines.averaging(_mpi(2, 368_000_000, last_sampled=10_000), reference, work)
    assert over[2] == 80, over


# ----------------------------------------------------------------------------- the grader's seed

def test_a_model_trained_before_the_run_does_not_fit_the_graders_seed(tmp_path):
    """The grader evaluates on held-out images of the seed it gave the run, whatever the record
    says: a model trained on seed 0 (shipped with the script) is right on seed 0's classes only."""
    import chainer
    from chainer import serializers
    from handson_lib.data import synthetic
    from handson_lib.runtime import models
    x, t, _, _ = synthetic.synthetic_arrays(600, 0, seed=0)
    x = x.reshape(len(x), -1)
    numpy.random.seed(0)
    model = models.MLP(64, 10)
    classifier = chainer.links.Classifier(model)
    optimizer = chainer.optimizers.Adam()
    optimizer.setup(classifier)
    for _ in range(8):
        for start in range(0, len(x), 50):
            optimizer.update(classifier, x[start:start + 50], t[start:start + 50])
    target = {}
    serializers.DictionarySerializer(target).save(model)
    numpy.savez(tmp_path / "model.npz", **{k: numpy.asarray(v) for k, v in target.items() if v is not None})
    record = {"finished": True, "model": {"class": "MLP", "args": [64, 10], "kwargs": {}},
              "dataset": {"name": "synthetic", "shape": [3072], "seed": 0, "n_test": 100}}
    believed = evidence.measure(record, tmp_path / "model.npz")                 # the record's seed
    graders = evidence.measure(record, tmp_path / "model.npz", seed=987654321)  # the grader's
    assert believed["accuracy"] > 0.6, believed
    assert graders["accuracy"] < 0.25, graders


# ----------------------------------------------------------------------------- the grader's timing slot

def test_the_graders_timing_slot_is_its_accounts_alone(tmp_path, monkeypatch):
    private = tmp_path / "handson-timing-me" / "timing.lock"
    monkeypatch.setattr(launch, "PRIVATE_TIMING_LOCK", private)
    monkeypatch.setattr(launch, "TIMING_LOCK", private)
    monkeypatch.delenv(launch.SLOT_HELD, raising=False)
    with launch.timing_slot(True) as slot:
        assert not slot.contended
    info = os.stat(private.parent)
    assert info.st_mode & 0o777 == 0o700 and info.st_uid == os.getuid()
    assert os.stat(private).st_mode & 0o077 == 0
    # A folder that others may write (planted before the grader made its own) is refused, not used.
    for planted in ("open", "link"):
        other = tmp_path / f"planted-{planted}" / "timing.lock"
        if planted == "open":
            other.parent.mkdir(mode=0o777)
            os.chmod(other.parent, 0o777)
        else:
            (tmp_path / "elsewhere").mkdir(exist_ok=True)
            other.parent.symlink_to(tmp_path / "elsewhere")
        monkeypatch.setattr(launch, "PRIVATE_TIMING_LOCK", other)
        monkeypatch.setattr(launch, "TIMING_LOCK", other)
        with pytest.raises(OSError, match="is not this account's alone"):
            with launch.timing_slot(True):
                pass


def test_the_default_slot_is_not_the_old_world_writable_file():
    assert launch.PRIVATE_TIMING_LOCK.parent.name == f"handson-timing-{os.getuid()}"
    assert launch.PRIVATE_TIMING_LOCK != Path("/tmp/handson-timing.lock")


# ----------------------------------------------------------------------------- the reference slowed down

def _timing(reference_step, student_step=0.1, steps=16):
    from handson_lib.checking.timing import PairedObservation
    return PairedObservation(2, {"reference": [reference_step] * steps, "student": [student_step] * steps},
                             {"reference": 64, "student": 64}, "", 3.0)


@pytest.mark.parametrize("again, credited", [(0.1, True), (0.3, False)])
def test_a_timing_whose_reference_ran_slow_is_timed_again_then_flagged(monkeypatch, tmp_path, again, credited):
    """Something beside the reference's steps slowed them (a helper of the submission, say): the
    student's ratio would gain. Timed again, twice at most; slowed every time, flagged and not
    credited."""
    from handson_lib import settings
    monkeypatch.setenv(settings.VARIABLES["reference_cache"], str(tmp_path))
    for _ in range(3):
        scored._keep_rate("multi-node:2:ranks", 640.0)   # the session's earlier timings: 0.1 s a step
    timings = iter([_timing(0.3), _timing(again), _timing(again)])
    monkeypatch.setattr(scored, "_time_in_turn", lambda *a, **k: next(timings))
    report = checks.Report("multi-node", "x.py")
    said = []
    rules = Rules(throughput_bands=((0.7, 1.0), (0.4, 0.5)), min_throughput_ratio=0.7, min_scaling_ratio=0.75)
    scored._paired_speed_checks(report, "x.py", "ref.py", 2, False, 60, None, rules, "multi-node", said.append)
    assert any("timing once more" in line for line in said), said
    (check,) = report.checks
    if credited:
        assert check.passed and abs(check.value - 1.0) < 1e-9, check
    else:
        assert not check.passed and check.message.startswith(checks.TAMPERING + "the reference's steps ran 3.0 times "
                                                             "slower"), check


def test_an_honest_script_that_saves_its_model_is_not_flagged():
    """A review's false positive costs an honest student the task: saving the weights as model.npz,
    a comment that names anything, are a training script's own business."""
    script = ("import chainer\n# the weights go to model.npz (and heartbeat, observed.json are just words here)\n"
              "chainer.serializers.save_npz(args.out + '/mymodel.npz', model)\n"
              "chainer.serializers.save_npz('model.npz', model)\n")
    assert source_review.review(script) == []
    assert source_review.review("import sys\nif '--seed' not in sys.argv:\n    pass\n") == [(2, "names 'sys.argv'")]



def test_an_endless_line_of_output_costs_the_grader_no_more_than_its_cap():
    """A run's output is read in chunks and kept up to max_output: 50 MB printed without a newline
    (a hostile review held 2 GB of the grader's memory with 400 MB) never sits whole in memory."""
    import tracemalloc
    tracemalloc.start()
    try:
        res = launch.run_watched([sys.executable, "-c", "import sys; sys.stdout.write('x' * (50 << 20))"], 120,
                                 max_output=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.ok and (1 << 20) <= len(res.output) < (1 << 20) + 200, len(res.output)
    assert "output cut at" in res.output
    assert peak < 16 << 20, peak


# ----------------------------------------------------------------------------- the launcher's tagged output

#: Rank 1 ran PrintReport: its lines as `mpiexec --output tag` printed them in a real run.
EVERY_RANK_REPORTS = """[1,0]<stdout>: Num process (COMM_WORLD): 2
[1,0]<stdout>: epoch       main/loss   validation/main/loss  main/accuracy  validation/main/accuracy  elapsed_time
[1,1]<stdout>: epoch       main/loss   validation/main/loss  main/accuracy  validation/main/accuracy  elapsed_time
[1,1]<stdout>: \x1b[J1           2.50135     2.28358               0.0546875      0.1875                    0.748662
[1,0]<stdout>: \x1b[J1           2.36661     2.28358               0.0859375      0.1875                    0.667727
[1,0]<stdout>: Throughput: 746.77 [images/sec.] (128 / 0.171)
"""


def _reports(output, extensions):
    obs = MPIObservation(2, 0, False, output, {r: {"extensions": e} for r, e in enumerate(extensions)}, {}, 20.0)
    report = checks.Report("multi-node", "train.py")
    multi_node._reporting_said(report, obs)
    seen.reports_seen(report, obs.output)
    return report.checks[0]


def test_a_record_of_reports_on_rank_0_only_is_not_believed_over_the_launchers_tagged_output():
    forged = _reports(EVERY_RANK_REPORTS, [["LogReport", "PrintReport"], []])
    assert not forged.passed and forged.message.startswith(checks.TAMPERING), forged.message
    assert "rank(s) [1] printed the trainer's reports" in forged.message
    honest = _reports("\n".join(line for line in EVERY_RANK_REPORTS.splitlines() if not line.startswith("[1,1]")),
                      [["LogReport", "PrintReport"], []])
    assert honest.passed, honest.message
    bars = _reports("[1,0]<stdout>: epoch  main/loss\n[1,2]<stdout>:      total [####......]  40.00%\n",
                    [["LogReport", "PrintReport", "ProgressBar"], [], []])
    assert not bars.passed and "rank(s) [2]" in bars.message
    # Rank 0 seen printing no report at all: its records' words are not believed either.
    silent = _reports("[1,0]<stdout>: Num process (COMM_WORLD): 2\n", [["LogReport", "PrintReport"], []])
    assert not silent.passed and "rank 0 printed no report" in silent.message, silent.message
    # A failed check keeps the records' own words: they say which ranks and what to do.
    told = _reports(EVERY_RANK_REPORTS, [["LogReport", "PrintReport"], ["LogReport", "PrintReport"]])
    assert not told.passed and "add them under `if comm.rank == 0:`" in told.message


def test_the_stop_of_the_other_processes_lasts_a_few_steps_of_a_fast_run_not_the_longest_window(tmp_path):
    """A short run (the MNIST conversion: 15 iterations in about 1 s) seen by the watchdog's looks a
    few iterations at a time: the window is a few of its steps (the shortest, 2 s), not the gaps
    between looks taken for steps (it was 10 s of a 12 s run); a slow run's steps set it."""
    fast = launch.DependenceProbe(tmp_path / "heartbeat", at=12)
    fast._marks = [(100.0, 1), (100.6, 9), (101.2, 15)]
    assert fast.window() == fast.shortest
    slow = launch.DependenceProbe(tmp_path / "heartbeat", at=12)
    slow._marks = [(100.0, 1), (101.0, 2), (102.0, 3)]
    assert slow.window() == 6.0   # six of its 1 s steps
    unseen = launch.DependenceProbe(tmp_path / "heartbeat", at=12)
    assert unseen.window() == unseen.shortest


#: A run whose marking process needs another: each step waits for its helper's answer (`needs`),
#: or goes on alone (`alone`); it marks every step in a heartbeat file, 100 steps a second.
STEPS_WITH_A_HELPER = textwrap.dedent("""
    import subprocess, sys, time
    from pathlib import Path
    helper = subprocess.Popen([sys.executable, "-c", "import sys\\nfor line in sys.stdin:\\n    print(line, end='', flush=True)"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    for step in range(1, 3000):
        if sys.argv[2] == "needs" or (sys.argv[2] == "needs-then-alone" and step <= 60):
            helper.stdin.write("step\\n")
            helper.stdin.flush()
            helper.stdout.readline()
        Path(sys.argv[1]).write_text(str(step))
        time.sleep(0.01)
""")


@pytest.mark.parametrize("run", ["needs", "alone"])
def test_the_steps_a_fast_run_made_while_the_grader_found_its_processes_are_not_counted(tmp_path, run):
    """On a busy machine the grader takes a while to find a run's processes and stop them: a fast
    run's marking process made steps meanwhile, with its helper still running (a correct MNIST
    conversion was taken for rank 0 training alone after 3 such steps). Counted from the stop, a
    process that needs its helper made at most the step in hand; one that does not goes on."""
    heartbeat = tmp_path / "heartbeat"
    proc = subprocess.Popen([sys.executable, "-c", STEPS_WITH_A_HELPER, str(heartbeat), run])
    probe = launch.DependenceProbe(heartbeat, at=20, shortest=1.0, longest=1.0)
    find = probe._who
    probe._who = lambda root: (find(root), time.sleep(0.3))[0]   # a busy machine: 30 steps meanwhile
    try:
        deadline = time.monotonic() + 60
        while probe.result is None and time.monotonic() < deadline:
            probe.tick(proc.pid)
            time.sleep(0.02)
    finally:
        probe.release()
        proc.kill()
        proc.wait()
    assert probe.result is not None and probe.result.get("stopped") == 1, probe.result
    if run == "needs":
        assert probe.result["advanced"] <= 1, probe.result
    else:
        assert probe.result["advanced"] > 10, probe.result


def test_a_run_that_trains_together_only_up_to_the_compared_iterations_meets_the_second_window(tmp_path):
    """A run that waits for its helper up to step 60 (past every iteration the grader compares) and
    goes on alone after it: a window at 20 alone sees a process that needs its helper; the second
    window, after the compared iterations, sees it go on alone, and that is the probe's result."""
    heartbeat = tmp_path / "heartbeat"
    proc = subprocess.Popen([sys.executable, "-c", STEPS_WITH_A_HELPER, str(heartbeat), "needs-then-alone"])
    probe = launch.DependenceProbe(heartbeat, at=(20, 80), shortest=1.0, longest=1.0)
    try:
        deadline = time.monotonic() + 60
        while len(probe.results) < 2 and time.monotonic() < deadline:
            probe.tick(proc.pid)
            time.sleep(0.02)
    finally:
        probe.release()
        proc.kill()
        proc.wait()
    first, second = probe.results
    assert first["advanced"] <= 1 and second["advanced"] > 10, probe.results
    assert probe.result is second


def test_the_grader_draws_a_window_after_the_compared_iterations_of_task_2s_graded_run():
    """Task #2 on 2 epochs against the reference: one window anywhere, one after the last iteration
    the grader compares (the run is long enough for it), neither near a compared one."""
    from handson_lib.checking import checks, replay
    for seed in range(20):
        plan = replay.snapshot_plan("multi-node", checks.GRADED_MULTI_NODE_ARGS, 2, seed)
        at = replay.probe_iteration("multi-node", checks.GRADED_MULTI_NODE_ARGS, 2, plan)
        assert len(at) == 2 and at[1] > max(plan.iterations) + 3, (plan, at)
        assert all(abs(a - kept) > 3 for a in at for kept in plan.iterations), (plan, at)


def test_a_mark_caught_being_rewritten_is_read_again(tmp_path):
    """A run that marks a hundred steps a second truncates its mark as often: a window that ended on
    the empty file had no result (the probe's test of a run going on alone failed so under load)."""
    import threading
    heartbeat = tmp_path / "heartbeat"
    heartbeat.write_text("")
    probe = launch.DependenceProbe(heartbeat, at=5)
    probe._from, probe._stopped, probe._window = 5, [], 1.0
    threading.Timer(0.02, lambda: heartbeat.write_text("40")).start()
    probe._finish()
    assert probe.results[-1]["advanced"] == 35, probe.results
