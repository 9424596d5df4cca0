"""The course on two stacks: this venv and the second one that `make test-all` builds
(`make second-stack`: Python 3.12 + NumPy 2), short runs with one seed at the tasks' batch 32
(handson_lib/experiments/stacks.py; README "Supported stacks").

Task #1 gives the same losses to within float32 rounding: the reporter averages its float32 losses in
float64 on NumPy 1 and in float32 on NumPy 2 (NEP 50), so the epoch's mean differs in the 7th digit.
Task #2 is not reproducible from run to run even on one stack (measured: epoch-1 loss 2.344-2.356 on
NumPy 1 alone: the solution's scatter_dataset shuffles without a seed), so the two stacks must agree
within that spread."""

import os
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT
from handson_lib.experiments import stacks

pytestmark = pytest.mark.slow

#: task -> (relative tolerance of the losses, absolute tolerance of the accuracies). Task #2's short
#: run is not repeatable to the bit (its two ranks): its validation accuracy on 128 images after 8
#: iterations, near chance, spread over 0.14-0.33 in runs on the same stack (1 in 3 beyond 0.1 of
#: the other stack's); its losses, the check that matters, stay within 5 %.
TOLERANCE = {"task1": (1e-6, 1e-6), "task2": (0.05, 0.25)}


@pytest.fixture(scope="module")
def other_python():
    python = os.environ.get("HANDSON_SECOND_STACK") or ROOT / ".venv-py312" / "bin" / "python"
    if not os.path.exists(python):
        pytest.skip(f"no second stack at {python}: `make second-stack` builds it (Python 3.12 + NumPy 2)")
    return python


def numpy_major(python):
    return subprocess.run([str(python), "-c", "import numpy; print(numpy.__version__.split('.')[0])"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()


@pytest.mark.parametrize("task", sorted(stacks.TASKS))
def test_same_losses_on_numpy_1_and_2(task, other_python, tmp_path):
    import sys
    assert numpy_major(sys.executable) != numpy_major(other_python), (
        "both stacks have the same NumPy major version: the comparison would prove nothing")
    here = stacks.run_task(sys.executable, task, tmp_path / "here")
    there = stacks.run_task(other_python, task, tmp_path / "there")
    assert len(here["log"]) == len(there["log"]) >= 1
    rel, acc = TOLERANCE[task]
    for a, b in zip(here["log"], there["log"]):
        for key, tolerance in (("main/loss", pytest.approx(a["main/loss"], rel=rel)),
                               ("validation/main/loss", pytest.approx(a["validation/main/loss"], rel=rel)),
                               ("main/accuracy", pytest.approx(a["main/accuracy"], abs=acc)),
                               ("validation/main/accuracy", pytest.approx(a["validation/main/accuracy"], abs=acc))):
            assert b[key] == tolerance, (f"{task}: {key} differs: {a[key]!r} ({stacks.stack_of(sys.executable)}) "
                                         f"vs {b[key]!r} ({stacks.stack_of(other_python)})")
    assert here["throughput"] > 0 and there["throughput"] > 0


#: A student's own script: `import chainer` first, nothing of the course; convolutions, batch
#: normalisation, MultiprocessIterator, a multi-node Evaluator, serializers (save, load, resume from a
#: snapshot) and ChainerMN's naive communicator, on 2 ranks.
PLAIN_CHAINER = '''
import chainer
import chainer.functions as F
import chainer.links as L
import chainermn
import numpy as np
import sys
from chainer import training
from chainer.training import extensions

out = sys.argv[1]
comm = chainermn.create_communicator("naive")


class Net(chainer.Chain):
    def __init__(self):
        super().__init__()
        with self.init_scope():
            self.conv = L.Convolution2D(3, 8, ksize=3, pad=1)
            self.bn = chainermn.links.MultiNodeBatchNormalization(8, comm)
            self.fc = L.Linear(None, 10)

    def forward(self, x):
        h = F.relu(self.bn(self.conv(x)))
        return self.fc(F.max_pooling_2d(F.resize_images(h, (8, 8)), 2))


rng = np.random.RandomState(0)
x = rng.rand(256, 3, 16, 16).astype(np.float32)
y = (x.mean(axis=(1, 2, 3)) * 20).astype(np.int32) % 10
data = chainer.datasets.TupleDataset(x, y)
train = chainermn.scatter_dataset(data[:192], comm, shuffle=True, seed=0)
test = chainermn.scatter_dataset(data[192:], comm, shuffle=True, seed=0)
model = L.Classifier(Net())
optimizer = chainermn.create_multi_node_optimizer(chainer.optimizers.MomentumSGD(lr=0.05), comm)
optimizer.setup(model)
train_iter = chainer.iterators.MultiprocessIterator(train, 16, n_processes=2)
test_iter = chainer.iterators.MultiprocessIterator(test, 16, repeat=False, shuffle=False, n_processes=2)
trainer = training.Trainer(training.StandardUpdater(train_iter, optimizer), (2, "epoch"), out=out)
trainer.extend(chainermn.create_multi_node_evaluator(extensions.Evaluator(test_iter, model), comm))
if comm.rank == 0:
    trainer.extend(extensions.LogReport())
    trainer.extend(extensions.snapshot(), trigger=(1, "epoch"))
trainer.run()
# every rank: MultiNodeBatchNormalization's forward is collective
chainer.serializers.save_npz(out + "/model%d.npz" % comm.rank, model)
again = L.Classifier(Net())
again(x[:2], y[:2])
chainer.serializers.load_npz(out + "/model%d.npz" % comm.rank, again)
assert np.array_equal(again.predictor.conv.W.array, model.predictor.conv.W.array)
if comm.rank == 0:
    resumed = training.Trainer(training.StandardUpdater(
        chainer.iterators.SerialIterator(train, 16), optimizer), (2, "epoch"), out=out)
    chainer.serializers.load_npz(out + "/snapshot_iter_12", resumed)
    assert resumed.updater.iteration == 12, resumed.updater.iteration
    print("PLAIN CHAINER OK", chainer.__version__, np.__version__, flush=True)
'''


@pytest.mark.parametrize("stack", ["this", "second"])
def test_a_plain_chainer_script_runs_unchanged(stack, other_python, tmp_path):
    import sys
    from handson_lib import launch
    python = Path(sys.executable if stack == "this" else other_python)
    script = tmp_path / "mine.py"
    script.write_text(PLAIN_CHAINER)
    env = launch.local_mpi_env()
    env["PATH"] = f"{python.parent}{os.pathsep}{env['PATH']}"
    proc = subprocess.run([str(python.parent / "mpiexec"), "-n", "2", "--oversubscribe", str(python), str(script),
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
                          stdin=subprocess.DEVNULL)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "PLAIN CHAINER OK 7.8.1" in output, output[-4000:]
