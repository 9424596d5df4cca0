"""The stretch of 02: a metric of the whole test set, computed on each rank's part and aggregated.

    mpiexec -n 2 python -m handson_lib.experiments.rank_metric STUDENT.py OUT.json [PARTS]
    (a notebook writes STUDENT.py from its answer cell with `save_function(per_class_accuracy, path)`)

Every rank trains the same small digits MLP alone (same seed, same data: the same model, so the
ranks differ only in the test examples they hold), takes its part of the test set from
`chainermn.scatter_dataset(..., force_equal_length=False)` (disjoint parts of unequal length, as
for strict evaluation), and calls the student's `per_class_accuracy(comm, model, part, n_class)`.
Rank 0 also computes the single-process value over the whole test set with the course's own
`counts`, on the same model in the same process, and writes both to OUT.json.

The grader runs it on a test set of its own (`graders_test_set`: digits it draws at random, in
unequal numbers per class), each rank given its part alone (PARTS: a folder of one file per rank,
each read and removed by its rank before any student code runs), and computes the whole set's
value in its own process (`whole_test_set(test)`): a function that does not add the ranks' sums
cannot know it.
"""

import importlib.util
import inspect
import json
import linecache
import sys
import time
from pathlib import Path

import chainer
import chainermn
import numpy

from handson_lib import data
from handson_lib.messages import tr
from handson_lib.runtime import MLP, seed_everything

SEED = 0
UNITS = 100
EPOCHS = 2
BATCH = 100


def counts(model, dataset, n_class):
    """(correct, total) per class of `model` on `dataset`: two numpy arrays of n_class ints."""
    x, t = chainer.dataset.concat_examples(dataset)
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        predicted = model.predictor(x).array.argmax(axis=1)
    correct = numpy.bincount(t[predicted == t], minlength=n_class)
    total = numpy.bincount(t, minlength=n_class)
    return correct, total


def train_model(train, n_class):
    """A small MLP trained alone on this process: identical on every rank (same seed and data)."""
    seed_everything(SEED)
    model = chainer.links.Classifier(MLP(UNITS, n_class))
    optimizer = chainer.optimizers.MomentumSGD(lr=0.05)
    optimizer.setup(model)
    it = chainer.iterators.SerialIterator(train, BATCH, shuffle=False)
    while it.epoch < EPOCHS:
        x, t = chainer.dataset.concat_examples(it.next())
        optimizer.update(model, x, t)
    return model


def save_function(function, path):
    """Write the source that defined `function` (its whole notebook cell, with the cell's imports)
    to `path`, for the ranks that mpiexec starts: they cannot see the notebook's kernel."""
    lines = linecache.getlines(function.__code__.co_filename)
    source = "".join(lines) if lines else inspect.getsource(function)
    Path(path).write_text(source)
    return path


def load_function(path, name="per_class_accuracy"):
    spec = importlib.util.spec_from_file_location("student_metric", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _parts(test, np):
    """`test` ((x, t) arrays) in `np` parts of unequal length, in order."""
    x, t = (numpy.asarray(a) for a in test)
    bounds = [round(len(t) * (r / np) ** 0.9) for r in range(np + 1)]
    return [(x[a:b], t[a:b]) for a, b in zip(bounds, bounds[1:])]


def run_on_ranks(function, np=2, timeout=180, test=None):
    """Run the student's `function` (the notebook's `per_class_accuracy`, or the source that defines
    it: checking.notebook.answer_source) on `np` local ranks, as `python -m
    handson_lib.experiments.rank_metric`; what the ranks returned, as data: {"ranks", "shard_sizes",
    "per_rank", "single"} ("single": rank 0's own value over the whole test set, shown in the
    notebook; a grader computes its own, `whole_test_set`), or None when the run wrote nothing (its
    output says why). `test`: (x, t) of a test set of the grader's, each rank given its part alone;
    else the digits' own test set, scattered by the ranks. Only the ranks run the student's code."""
    from handson_lib import launch
    from handson_lib.checking import notebook, runs
    with runs.run_folder("stretch-", dir=notebook.runs_folder()) as folder:
        script, out = Path(folder) / "per_class_accuracy.py", Path(folder) / "per_class.json"
        if isinstance(function, str):
            script.write_text(function)
        else:
            save_function(function, script)
        argv = ["-m", "handson_lib.experiments.rank_metric", str(script), str(out)]
        if test is not None:
            parts = Path(folder) / "parts"
            parts.mkdir()
            if launch.wrapped():   # the ranks, as the grading account, remove their parts
                parts.chmod(0o777)
            for rank, (x, t) in enumerate(_parts(test, np)):
                numpy.savez(parts / f"part-{rank}.npz", x=x.astype(numpy.float32), t=t.astype(numpy.int32))
            argv.append(str(parts))
        started = time.monotonic()
        run = launch.run_mpi(np, argv, timeout=timeout)
        runs.log_part(f"the stretch's answer cells on {np} ranks", time.monotonic() - started)
        print(run.output[-3000:])
        return json.loads(out.read_text()) if out.is_file() else None


def graders_test_set(size=None):
    """(x, t): digits of the test split drawn at random now (150-300 of them, the classes in unequal
    numbers): the grader's own test set for the stretch, which no student code has seen."""
    import secrets
    pick = numpy.random.default_rng(secrets.randbits(64))
    _, test, _ = data.get_dataset("digits", announce=False)
    x, t = chainer.dataset.concat_examples(test)
    weights = pick.uniform(0.3, 1.0, 10)[t]
    size = size or int(pick.integers(150, 301))
    chosen = pick.choice(len(t), size=min(size, len(t)), replace=False, p=weights / weights.sum())
    return x[chosen], t[chosen]


def whole_test_set(test=None):
    """The per-class accuracy over the whole test set (`test`: (x, t); default the digits' own), of
    the model every rank trains, computed in this process with the course's own `counts` (no
    student code): what `per_class_accuracy` must return on every rank."""
    train, default_test, info = data.get_dataset("digits", announce=False)
    model = train_model(train, info.n_class)
    test = default_test if test is None else chainer.datasets.TupleDataset(*(numpy.asarray(a) for a in test))
    correct, total = counts(model, test, info.n_class)
    return (correct / numpy.maximum(total, 1)).tolist()


def _own_part(comm, test, parts):
    """This rank's part of the test set: scattered from the digits' own, or (`parts`, the grader's)
    read from its own file, which it removes; no rank goes on before every file is gone."""
    if parts is None:
        return chainermn.scatter_dataset(test, comm, shuffle=True, seed=SEED, force_equal_length=False)
    path = Path(parts) / f"part-{comm.rank}.npz"
    with numpy.load(path, allow_pickle=False) as arrays:
        part = chainer.datasets.TupleDataset(arrays["x"], arrays["t"])
    path.unlink()
    comm.mpi_comm.Barrier()
    return part


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    student, out = argv[0], argv[1]
    parts = argv[2] if len(argv) > 2 else None
    comm = chainermn.create_communicator("naive")
    train, test, info = data.get_dataset("digits", announce=False)
    model = train_model(train, info.n_class)
    part = _own_part(comm, test, parts)
    result = load_function(student)(comm, model, part, info.n_class)
    result = None if result is None else [float(v) for v in numpy.asarray(result, dtype=float).ravel()]
    results = comm.gather_obj(result)
    sizes = comm.gather_obj(len(part))
    if comm.rank == 0:
        single = None
        if parts is None:
            correct, total = counts(model, test, info.n_class)
            single = (correct / numpy.maximum(total, 1)).tolist()
        with open(out, "w") as f:
            json.dump({"ranks": comm.size, "shard_sizes": sizes, "per_rank": results, "single": single}, f)
        print(tr("{ranks} ranks, test parts of {sizes} examples; rank 0 returned {returned}", ranks=comm.size,
                 sizes=sizes, returned=None if results[0] is None else [round(v, 4) for v in results[0]]))
        if single is not None:
            print(tr("one process over the whole test set: {accuracy}", accuracy=[round(v, 4) for v in single]))


if __name__ == "__main__":
    main()
