"""The student's self-check (`handson check ... --against self`): it fails fast on a skeleton, says
how far a long run got, and times the script's steps on n devices in turn with its own on 1, the
machine's load said and weighed (issue 40, items 2 and 3)."""

import re

import pytest

from handson_lib import launch
from handson_lib.checking import checks, multi_gpu, timing
from handson_lib.checking.timing import scored
from handson_lib.verdicts import speed, structure
from conftest import ROOT


# ------------------------------------------------------------------------------ fails fast

@pytest.mark.parametrize("script, unset", [
    ("train_cifar_multi_gpu.py", ["train_iters", "devices"]),
    ("train_cifar_multi_node.py", ["comm", "device", "optimizer", "evaluator"]),
])
def test_a_skeletons_unwritten_parts_are_found_by_reading_it(script, unset):
    assert checks.still_unset(ROOT / "exercises" / script) == unset
    assert checks.still_unset(ROOT / "solutions" / script) == []


SKELETON_PART = '''
import chainermn
from handson_lib import runtime

def main():
    comm = device = None
    # PUT YOUR CODE HERE
{code}
    runtime.require_done("Task #2", comm=comm, device=device)
'''


@pytest.mark.parametrize("code, unset", [
    ("    comm = chainermn.create_communicator('naive')", ["device"]),
    ("    comm, device = chainermn.create_communicator('naive'), 0", []),           # one line, two names
    ("    if (comm := chainermn.create_communicator('naive')):\n        device = 0", []),
    ("    for device in [0]:\n        comm = 1", []),
    ("    globals()['comm'] = 1", []),                 # set where a reading cannot follow: the run decides
    ("    exec('comm = 1')", []),
    ("    pass", ["comm", "device"]),
    ("    comm = None", ["comm", "device"]),           # None again is still None
])
def test_a_part_written_any_way_python_allows_is_never_called_unwritten(tmp_path, code, unset):
    script = tmp_path / "train.py"
    script.write_text(SKELETON_PART.format(code=code))
    assert checks.still_unset(script) == unset


def test_a_script_that_does_not_parse_is_left_to_the_run(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("def main(:\n    runtime.require_done('Task #2', comm=comm)\n")
    assert checks.still_unset(script) == []


def test_the_skeletons_self_check_fails_before_any_run(monkeypatch):
    def no_run(*args, **kwargs):
        raise AssertionError("a run was started for a skeleton")
    monkeypatch.setattr(multi_gpu, "run_observed", no_run)
    monkeypatch.setattr(scored, "run_paired", no_run)
    report = checks.check_multi_gpu(ROOT / "exercises" / "train_cifar_multi_gpu.py", against="self")
    failed = {c.name: c.message for c in report.failed}
    assert len(failed) == len(report.checks) == 8
    assert "`train_iters`, `devices` are still None" in failed["runs to the end"]
    assert "nothing was run" in failed["runs to the end"]


# ------------------------------------------------------------------------------ says how far it got

def test_a_long_run_says_how_far_it_got(tmp_path, monkeypatch):
    said = []
    watch = launch.ProgressWatch(tmp_path, say=said.append, every=0.0)
    watch.poll()
    assert said and "starting up" in said[-1]
    (tmp_path / "heartbeat-rank0").write_bytes(b"40")
    (tmp_path / "heartbeat-rank1").write_bytes(b"41")
    watch.poll()
    assert re.fullmatch(r"  \.\.\. \d+ s: 41 training iterations", said[-1]), said
    (tmp_path / "heartbeat-rank1").write_bytes(b"not a number")   # a run writes its own marks
    watch.poll()
    assert said[-1].endswith(": 40 training iterations")


def test_the_ticker_speaks_once_per_period():
    said = []
    ticker = launch.Ticker(said.append, every=3600)
    for _ in range(5):
        ticker.tick(lambda seconds: "tick")
    assert said == []
    ticker.every, ticker.next = 0.0, 0.0
    ticker.tick(lambda seconds: f"{seconds:.0f}")
    assert said == ["0"]


# ------------------------------------------------------------------------------ timed in turn, load weighed

def _timing(speedup, cores_ratio, others, steps=16):
    """A paired timing of the student's own script: 1-device steps of 1 s using 1 core, n-device
    steps `speedup` times as fast per image, using `cores_ratio` times the 1-device steps' CPU."""
    one, two = [1.0] * steps, [2.0 / speedup] * steps
    return timing.PairedObservation(
        2, {"reference": one, "student": two}, {"reference": 32, "student": 64}, "", 30.0,
        {"waited": 0.0, "contended": False, "others_cores": others, "cores": 2},
        {"reference": {"own": sum(one), "waiting": 0.0}, "student": {"own": cores_ratio * sum(two), "waiting": 0.0}})


@pytest.mark.parametrize("speedup, cores_ratio, others, passed, says_load, judged", [
    (1.7, 1.95, 0.05, True, False, 1.7),     # a quiet machine: the speed-up as timed
    (0.95, 1.0, 1.5, True, True, 1.9),       # a busy one gave the 2-device steps no more CPU than 1
    (0.5, 1.0, 1.5, False, True, 1.0),       # ... and a script that wastes half its CPU fails there too
    (1.0, 1.9, 0.0, False, False, 1.0),      # a quiet machine, no speed-up: no load to blame
    (1.1, 1.05, 1.1, True, True, 2.0),       # per core, never past what 2 workers can give
])
def test_the_self_checks_speed_up_is_judged_per_core_where_the_load_held_it_back(
        monkeypatch, speedup, cores_ratio, others, passed, says_load, judged):
    calls = []

    def fake_run_paired(reference, script, args, **kwargs):
        calls.append((reference, script, args, kwargs))
        return _timing(speedup, cores_ratio, others)
    monkeypatch.setattr(scored, "run_paired", fake_run_paired)
    # What the timed steps trained matches the grader's replay (tested in test_structure.py).
    monkeypatch.setattr(scored, "_trained", lambda *a: [(2, structure.Comparison(compared=2, steps=1))])
    report = checks.Report("multi-gpu", "train.py", against="self")
    scored._self_speed_check(report, "throughput: 2 devices vs your 1-device run", "train.py", 2, ["--epoch", "1"],
                             60, 30, checks.rules_for("self", "local"), lambda *_: None, "multi-gpu", devices=True)
    (check,) = report.checks
    assert check.passed is passed, check.message
    assert check.value == pytest.approx(judged, rel=0.02)
    assert ("busy machine" in check.message) is (says_load and not passed), check.message
    assert ("per CPU they used" in check.message) is (says_load and cores_ratio < 1.7), check.message
    # The student's own script on both sides: 2 devices against 1, the same arguments otherwise.
    reference, script, args, kwargs = calls[0]
    assert reference == script == "train.py" and args[:3] == ["--gpus", "0", "1"]
    assert kwargs["own_baseline"].args[:2] == ["--gpus", "0"] and kwargs["own_baseline"].args[2:] == args[3:]


def test_the_scaling_line_says_why_two_ranks_may_step_slower_in_the_sandbox(monkeypatch):
    assert speed.over_tcp(checks.rules_for("reference")) == ""      # shared memory between ranks
    monkeypatch.setattr(launch, "_WRAPPER", lambda cmd, cwd: cmd)     # runs go through the sandbox
    assert "the ranks talk over TCP" in speed.over_tcp(checks.rules_for("reference"))
