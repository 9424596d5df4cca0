"""Hostile submissions: each kind of attack the grader defends against, planted here, with the
effect of the defence asserted (the test fails without it).

The kinds that take a whole grading run are synthetic students of the classes graded in
tests/test_autograde.py: a process started outside the kernel and left running (`daemon`), the
grader's ratio line forged with values that are no numbers (`forged_ratio_line`), a test cell
edited to pass (`tampered_test`), a grade cell deleted, an endless cell, `sys.exit`, a killed
kernel, 200,000 lines of output; there too, Ctrl-C and a failed regrade.
"""

import json
import subprocess
import sys
import time

import numpy
import pytest

from handson_lib import launch
from handson_lib.grading import checks, runs
from test_grading_memo import _kept_runs


@pytest.fixture
def own_lock(tmp_path, monkeypatch):
    """A timing-slot lock file of this test's own: runs of other tests do not interfere."""
    monkeypatch.setattr(launch, "TIMING_LOCK", tmp_path / "timing.lock")
    monkeypatch.delenv(launch.SLOT_HELD, raising=False)


def test_under_the_autograder_a_changed_working_directory_points_nowhere_else(tmp_path, monkeypatch):
    """`handson autograde` names the submission's folder: a cell that moves the working directory
    (to a copy of the solutions, say) does not change which scripts the checks run."""
    handed_in, elsewhere = tmp_path / "autograded" / "student" / "task2", tmp_path / "elsewhere"
    for folder in (handed_in, elsewhere):
        folder.mkdir(parents=True)
        (folder / "train_cifar_multi_node.py").write_text(f"# {folder.name}\n")
    monkeypatch.setenv("HANDSON_GRADING", str(handed_in))
    monkeypatch.chdir(elsewhere)
    assert checks.locate("train_cifar_multi_node.py") == handed_in / "train_cifar_multi_node.py"
    (handed_in / "train_cifar_multi_node.py").unlink()
    with pytest.raises(FileNotFoundError, match="was not handed in: submit it in the same folder as the notebook "
                                                r"\(task2/train_cifar_multi_node.py\)"):
        checks.locate("train_cifar_multi_node.py")
    monkeypatch.setenv("HANDSON_GRADING", "1")   # nbgrader's own CLI: the folder the kernel works in
    assert checks.locate("train_cifar_multi_node.py") == elsewhere / "train_cifar_multi_node.py"


def test_a_planted_cache_file_is_never_executed_nor_believed(tmp_path):
    """What a hostile run writes where the grader keeps runs (a pickle that runs code when loaded,
    a record of another shape, arrays holding objects) is not such a run: it is read as none,
    and the grader measures again. Nothing in it runs."""
    import pickle

    class Payload:
        def __reduce__(self):
            return (open, (str(tmp_path / "executed"), "w"))

    path = tmp_path / "reference-0123456789abcdef.json"
    path.write_bytes(pickle.dumps(Payload()))
    assert runs.load_run(path, runs.MPIObservation) is None
    good = _kept_runs()[1]
    runs.save_run(good, path)
    kept = json.loads(path.read_text())
    for forged in ({**kept, "kind": "Observation"}, {**kept, "format": 0},
                   {**kept, "fields": {**kept["fields"], "returncode": "0"}},
                   {**kept, "fields": {**kept["fields"], "seconds": True, "extra": 1}}):
        path.write_text(json.dumps(forged))
        assert runs.load_run(path, runs.MPIObservation) is None, forged
    path.write_text(json.dumps(kept))
    numpy.savez(path.with_suffix(".npz"), **{"params/0": numpy.array([Payload()], dtype=object)})
    assert runs.load_run(path, runs.MPIObservation) is None   # object arrays are refused (allow_pickle=False)
    assert not (tmp_path / "executed").exists()


def test_a_slot_held_forever_costs_a_bounded_wait_not_the_run(monkeypatch, own_lock):
    """Any account can lock the slot's file: a process that holds it forever (a hostile student's,
    or a stuck one) makes a run wait SLOT_PATIENCE at most; the run goes on without the slot and
    its speed checks say that it shared the machine."""
    monkeypatch.setattr(launch, "SLOT_PATIENCE", 1.5)
    launch._lock_file(launch.TIMING_LOCK).close()
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'rb'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)",
                               str(launch.TIMING_LOCK)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        started = time.monotonic()
        res = launch.run_watched([sys.executable, "-c", "print('ran')"], 30, timed=True)
        assert res.ok and res.output.strip() == "ran" and res.contended, res
        assert 1.5 <= time.monotonic() - started < 15
        shared = launch.run_watched([sys.executable, "-c", "print('ran')"], 30, timed=False)
        assert shared.ok and shared.contended   # an untimed run waits as long at most
    finally:
        holder.kill()
        holder.wait()
    free = launch.run_watched([sys.executable, "-c", "print('ran')"], 30, timed=True)
    assert free.ok and not free.contended
    contended = runs.Observation(0, False, "", {}, {}, 1.0, progress={"contended": True})
    assert "another process held its timing slot longer than 2 s" in checks._contention(contended, None)
    assert checks._contention(runs.Observation(0, False, "", {}, {}, 1.0, progress={})) == ""
