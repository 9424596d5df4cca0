"""Under `handson autograde`, runs that would repeat one already made are taken from it: a
student's check reuses the notebook's identical run, and a course demo runs once per session."""

import json
import os
import subprocess
import sys

import numpy
import pytest

from handson_lib import launch
from handson_lib.grading import checks, notebook, runs
from conftest import ROOT

MNIST = ROOT / "solutions" / "train_mnist_multi_node.py"


def _parts(log):
    return [json.loads(line)["part"] for line in log.read_text().splitlines()]


@pytest.mark.slow
def test_a_check_reuses_the_students_identical_untimed_run(tmp_path, monkeypatch):
    monkeypatch.setenv("HANDSON_RUN_MEMO", str(tmp_path / "memo"))
    monkeypatch.setenv("HANDSON_PROFILE_LOG", str(tmp_path / "profile.jsonl"))
    script = tmp_path / MNIST.name
    script.write_text(MNIST.read_text())
    args = list(checks.MNIST_ARGS)
    first = runs.run_observed_mpi(script, 2, [*args, "--out", str(tmp_path / "a")], timeout=120, part="notebook")
    assert first.finished, first.output[-2000:]
    again = runs.run_observed_mpi(script, 2, args, timeout=120, part="check", reuse=True)
    assert again.output == first.output and again.ranks == first.ranks
    # The same arguments but other bytes (the student edited the script since): run again.
    script.write_text(MNIST.read_text() + "# edited\n")
    edited = runs.run_observed_mpi(script, 2, args, timeout=120, part="check after an edit", reuse=True)
    assert edited.finished and edited.output != first.output
    assert _parts(tmp_path / "profile.jsonl") == [
        "notebook", "check (the same run as the notebook's, reused)", "check after an edit"]


@pytest.mark.slow
def test_a_timed_run_is_never_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("HANDSON_RUN_MEMO", str(tmp_path / "memo"))
    obs = runs.run_observed_mpi(MNIST, 2, checks.MNIST_ARGS, timeout=120, timed=True, reuse=True)
    assert obs.finished and not (tmp_path / "memo").exists()


def test_a_course_demo_runs_once_per_grading_session(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HANDSON_DEMO_MEMO", str(tmp_path / "demos"))
    monkeypatch.setenv("HANDSON_PROFILE_LOG", str(tmp_path / "profile.jsonl"))
    demo = tmp_path / "demo.py"
    demo.write_text("import os\nprint('rank pid', os.getpid(), flush=True)\n")
    first = notebook.run_demo(2, [str(demo)])
    assert first.ok and first.output.count("rank pid") == 2
    # Another student's copy of the same demo (another temporary path, the same code).
    copy = tmp_path / "copy.py"
    copy.write_text(demo.read_text())
    assert notebook.run_demo(2, [str(copy)]).output == first.output
    assert "reused this demo's run from an earlier student" in capsys.readouterr().out
    demo.write_text(demo.read_text() + "print('changed', flush=True)\n")
    changed = notebook.run_demo(2, [str(demo)])
    assert changed.output.count("changed") == 2
    assert notebook.run_demo(4, [str(copy)]).output.count("rank pid") == 4   # other ranks: run again
    assert _parts(tmp_path / "profile.jsonl") == [
        "notebook: course demo on 2 rank(s)",
        "notebook: course demo on 2 rank(s) (the same run as an earlier student's, reused)",
        "notebook: course demo on 2 rank(s)", "notebook: course demo on 4 rank(s)"]


def test_without_the_autograder_a_demo_always_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("HANDSON_DEMO_MEMO", raising=False)
    demo = tmp_path / "demo.py"
    demo.write_text("import os\nprint('pid', os.getpid(), flush=True)\n")
    assert notebook.run_demo(1, [str(demo)]).output != notebook.run_demo(1, [str(demo)]).output


def test_a_smaller_task2_run_takes_its_limits_from_the_correctness_run():
    """02's 1-rank run (one epoch) does less work per rank than the check's 2-rank run: its
    watchdog comes from that reference, which every grading session measures anyway."""
    basis = list(checks.MULTI_NODE_ARGS)
    assert notebook._limit_basis("train_cifar_multi_node.py", [*basis, "--epoch", "1"], 1) == (basis, 2)
    assert notebook._limit_basis("train_cifar_multi_node.py", basis, 2) == (basis, 2)
    for other in ([*basis, "--epoch", "9"], [*basis, "--epoch", "1", "--batchsize", "8"]):
        assert notebook._limit_basis("train_cifar_multi_node.py", other, 1) == (other, 1)
    assert notebook._limit_basis("train_mnist_multi_node.py", ["--epoch", "1"], 2) == (["--epoch", "1"], 2)


PLOTTING_SCRIPT = '''
import argparse, chainer, numpy
from chainer import training
from chainer.training import extensions
parser = argparse.ArgumentParser()
parser.add_argument("--out")
out = parser.parse_args().out
data = chainer.datasets.TupleDataset(numpy.random.rand(32, 4).astype("f"), numpy.random.randint(0, 2, 32).astype("i"))
model = chainer.links.Classifier(chainer.links.Linear(4, 2))
optimizer = chainer.optimizers.SGD()
optimizer.setup(model)
updater = training.StandardUpdater(chainer.iterators.SerialIterator(data, 8), optimizer)
trainer = training.Trainer(updater, (2, "epoch"), out=out)
trainer.extend(extensions.LogReport())
trainer.extend(extensions.PlotReport(["main/loss"], "epoch", filename="loss.png"))
trainer.run()
'''


@pytest.mark.parametrize("draw", [True, False])
def test_the_autograder_registers_plot_reports_but_draws_none(tmp_path, draw):
    """HANDSON_PLOT_REPORTS=0 (the course's nbgrader configuration): the extension is there for
    the rank-0 check, the PNG is not drawn."""
    script = tmp_path / "plotting.py"
    script.write_text(PLOTTING_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "HANDSON_PLOT_REPORTS"}
    if not draw:
        env["HANDSON_PLOT_REPORTS"] = "0"
    res = subprocess.run([sys.executable, "-m", "handson_lib.grading.observe", str(tmp_path / "observed"),
                          str(script), "--out", str(tmp_path / "result")], env={**env, "MPLBACKEND": "Agg"},
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    record = json.loads((tmp_path / "observed" / "observed.json").read_text())
    assert "PlotReport" in record["extensions"], record["extensions"]
    assert (tmp_path / "result" / "loss.png").exists() is draw


@pytest.mark.slow
def test_the_mnist_speed_is_shown_only_where_it_compares_like_with_like(tmp_path, monkeypatch, measure_reference):
    """Under the autograder the conversion's run shares the machine with other students' runs
    while the reference ran alone: no ratio of the two is shown (it is never scored anyway)."""
    monkeypatch.delenv("HANDSON_REFERENCE_CACHE", raising=False)
    reference = {2: measure_reference(MNIST.name, checks.MNIST_ARGS, np=2)}
    alone = checks.check_mnist_multi_node(MNIST, reference=reference)
    assert "throughput vs the reference" in [c.name for c in alone.checks]
    monkeypatch.setenv("HANDSON_REFERENCE_CACHE", str(tmp_path / "session"))
    graded = checks.check_mnist_multi_node(MNIST, reference=reference)
    assert graded.ok and not graded.speed_checks, graded.text()


def _kept_runs():
    """One run of each kind the grader keeps, with arrays, records and output."""
    workers = {0: {"index": numpy.array(0), "pid": numpy.array(11), "params": numpy.arange(6, dtype="f")},
               1: {"index": numpy.array(1), "pid": numpy.array(12), "params": numpy.arange(6, dtype="f")}}
    return [runs.Observation(0, False, "Throughput: 1 [images/sec.] (1 / 1)\n", {"finished": True, "pid": 10},
                             workers, 2.5, 60.0, {"first_progress": 1.0, "stalled": False}),
            runs.MPIObservation(2, 0, False, "[1,0]<stdout>: x\n", {0: {"finished": True}, 1: {"finished": True}},
                                {0: numpy.ones(4, "f"), 1: numpy.ones(4, "f")}, 3.0, None, None),
            launch.MPIResult(["mpiexec", "-n", "2"], 0, "rank pid 1\n", 1.5, waited=0.2)]


@pytest.mark.parametrize("run", _kept_runs(), ids=lambda r: type(r).__name__)
def test_a_kept_run_reads_back_as_it_was(tmp_path, run):
    runs.save_run(run, tmp_path / "kept.json")
    back = runs.load_run(tmp_path / "kept.json", type(run))
    for name, value in vars(run).items():
        if name in ("workers", "params"):
            assert _arrays(getattr(back, name)) == _arrays(value), name
        else:
            assert getattr(back, name) == value, name


def _arrays(field):
    """{(key, name): values} of a workers {index: {name: array}} or params {rank: array} field."""
    return {(key, name): numpy.asarray(array).tolist() for key, item in field.items()
            for name, array in (item.items() if isinstance(item, dict) else [(None, item)])}
