"""The scored timing's seams (handson_lib.checking.timing): its settings passed as one dataclass,
each launch stating where the grading sandbox puts it (launch.Confinement, never read back from
its argv), and the reference solutions handed to the checks by their caller."""

import sys

import pytest

from handson_lib import launch
from handson_lib.checking import against, timing
from handson_lib.checking.timing import paired


@pytest.fixture
def recorded(monkeypatch):
    """The Confinement each wrapped launch asked for, the launch itself replaced by `pass`."""
    seen = []

    def wrapper(cmd, cwd):
        seen.append((launch.asked_confinement(), cmd))
        return [sys.executable, "-c", "pass"]
    monkeypatch.setattr(launch, "_WRAPPER", wrapper)
    return seen


def test_a_plain_launch_asks_for_a_runs_place_and_a_stated_one_is_passed_on(recorded):
    launch.Launched([sys.executable, "-c", "pass"]).proc.wait(timeout=30)
    asked = launch.Confinement("reference", own_folder=True)
    launch.Launched([sys.executable, "-c", "pass"], confinement=asked).proc.wait(timeout=30)
    assert [c for c, _ in recorded] == [launch.Confinement(), asked]
    assert launch.asked_confinement() == launch.Confinement()   # only while the wrapper runs


@pytest.mark.parametrize("who, role", [("reference", "reference"), ("student", "runs")])
def test_each_side_of_the_paired_timing_states_its_confinement(recorded, tmp_path, who, role):
    (tmp_path / "train.py").write_text("print('a training script')\n")
    side = paired.Side(who, tmp_path / "train.py", None, ["--batchsize", "8"], tmp_path / who, {})
    try:
        side.launched.proc.wait(timeout=30)
    finally:
        side.close()
    ((confinement, cmd),) = recorded
    # One process (Task #1's kind of launch, `ranks` None) keeps one core busy: its CPU quota.
    assert confinement == launch.Confinement(role, own_folder=True, cores=1)
    assert paired.STEPPER_MODULE in cmd


def test_the_sandbox_follows_the_stated_confinement_not_the_commands_words(tmp_path):
    from handson_lib.autograder import nbgrader_ext, sandbox
    spec = {"settings": str(tmp_path / "sandbox.json"), "runs": str(tmp_path / "runs"), "own": str(tmp_path / "own")}
    side = tmp_path / "runs" / "handson-paired-x" / "reference"
    side.mkdir(parents=True)
    # A student's run that names the stepper and "reference" in its argv gets the runs' sandbox.
    cmd = nbgrader_ext.judge_sandbox_command(spec, ["python", "-m", timing.STEPPER_MODULE, "reference"], side,
                                             launch.Confinement())
    assert cmd[cmd.index("run") + 1:cmd.index("run") + 4] == [spec["settings"], spec["own"], "runs"]
    cmd = nbgrader_ext.judge_sandbox_command(spec, ["python", "train.py"], side,
                                             launch.Confinement("reference", own_folder=True, cores=2))
    assert cmd[cmd.index("run") + 1:cmd.index("run") + 6] == [
        str(sandbox.paired_settings_path(spec["settings"])), spec["own"], "reference", str(side.resolve()),
        sandbox.NO_FOLDER]
    assert cmd[cmd.index("--") - 1] == "2"   # its CPU quota: two cores


def test_the_timings_settings_are_passed_not_read_from_constants():
    assert timing.SCORED == timing.PairedTiming() and timing.SCORED.steps == 16
    strict = timing.PairedTiming(student_step_factor=2.0, student_step_floor=0.0, student_total_factor=1.0,
                                 student_total_floor=0.0)
    assert paired.student_limits([1.0, 1.0], 120.0, strict) == (2.0, 2.0)
    assert paired.student_limits([1.0, 1.0], 120.0) == (8.0, 15.0)


def test_the_reference_solutions_are_what_the_caller_hands_in(monkeypatch):
    class Solutions:
        def available(self, name):
            return name == "train_cifar_multi_gpu.py"
    monkeypatch.setattr(against, "_HANDED_IN", None)
    assert against.default_against() == "self"
    with against.reference_solutions_from(Solutions()):
        assert against.default_against() == "reference"
        assert against.default_against("train_cifar_multi_node.py") == "self"
    assert against.reference_solutions() is None


def test_the_judge_hands_a_report_cells_checks_the_reference_solutions(monkeypatch):
    from handson_lib.autograder import judge
    from handson_lib.checking import reference
    monkeypatch.setattr(against, "_HANDED_IN", None)
    cell = "from handson_lib.checking import against\nprint(against.reference_solutions().__name__)"
    outputs = judge.Judge(lambda code: "").run(cell, "task1_report", report=True)
    assert outputs == [{"output_type": "stream", "name": "stdout", "text": reference.__name__ + "\n"}], outputs
    assert against.reference_solutions() is None   # only while the report cell runs
