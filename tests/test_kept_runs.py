"""What the grader keeps of runs and draws during them: kept runs read back as plain data, plot
reports are registered but not drawn, speeds are shown only where they compare like with like."""

import json
import os
import subprocess
import sys

import numpy
import pytest

from handson_lib import launch, settings
from handson_lib.checking import checks, runs
from conftest import ROOT

MNIST = ROOT / "solutions" / "train_mnist_multi_node.py"


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
    res = subprocess.run([sys.executable, "-m", "handson_lib.harness.observe", str(tmp_path / "observed"),
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
    monkeypatch.delenv(settings.VARIABLES["session"], raising=False)
    reference = {2: measure_reference(MNIST.name, checks.MNIST_ARGS, np=2)}
    alone = checks.check_mnist_multi_node(MNIST, reference=reference)
    assert "throughput vs the reference" in [c.name for c in alone.checks]
    monkeypatch.setenv(settings.VARIABLES["session"], str(tmp_path / "session"))
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
