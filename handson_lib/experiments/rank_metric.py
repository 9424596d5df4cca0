"""The stretch of 02: a metric of the whole test set, computed on each rank's part and aggregated.

    mpiexec -n 2 python -m handson_lib.experiments.rank_metric STUDENT.py OUT.json
    (a notebook writes STUDENT.py from its answer cell with `save_function(per_class_accuracy, path)`)

Every rank trains the same small digits MLP alone (same seed, same data: the same model, so the
ranks differ only in the test examples they hold), takes its part of the test set from
`chainermn.scatter_dataset(..., force_equal_length=False)` (disjoint parts of unequal length, as
for strict evaluation), and calls the student's `per_class_accuracy(comm, model, part, n_class)`.
Rank 0 also computes the single-process value over the whole test set with the course's own
`counts`, on the same model in the same process, and writes both to OUT.json.
"""

import importlib.util
import inspect
import json
import linecache
import sys
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


def run_on_ranks(function, np=2, timeout=180):
    """Run the student's `function` (the notebook's `per_class_accuracy`) on `np` local ranks, as
    `python -m handson_lib.experiments.rank_metric`; what the ranks returned, as data:
    {"ranks", "shard_sizes", "per_rank", "single"} ("single": rank 0's own value over the whole test
    set, shown in the notebook; a grader computes its own, `whole_test_set`), or None when the run
    wrote nothing (its output says why)."""
    import tempfile
    from handson_lib import launch
    with tempfile.TemporaryDirectory(prefix="stretch-") as folder:
        script, out = Path(folder) / "per_class_accuracy.py", Path(folder) / "per_class.json"
        save_function(function, script)
        run = launch.run_mpi(np, ["-m", "handson_lib.experiments.rank_metric", str(script), str(out)], timeout=timeout)
        print(run.output[-3000:])
        return json.loads(out.read_text()) if out.is_file() else None


def whole_test_set():
    """The per-class accuracy over the whole test set, of the model every rank trains, computed in
    this process with the course's own `counts` (no student code): what `per_class_accuracy` must
    return on every rank."""
    train, test, info = data.get_dataset("digits", announce=False)
    model = train_model(train, info.n_class)
    correct, total = counts(model, test, info.n_class)
    return (correct / numpy.maximum(total, 1)).tolist()


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    student, out = argv[0], argv[1]
    comm = chainermn.create_communicator("naive")
    train, test, info = data.get_dataset("digits", announce=False)
    model = train_model(train, info.n_class)
    part = chainermn.scatter_dataset(test, comm, shuffle=True, seed=SEED, force_equal_length=False)
    result = load_function(student)(comm, model, part, info.n_class)
    result = None if result is None else [float(v) for v in numpy.asarray(result, dtype=float).ravel()]
    results = comm.gather_obj(result)
    sizes = comm.gather_obj(len(part))
    if comm.rank == 0:
        correct, total = counts(model, test, info.n_class)
        single = (correct / numpy.maximum(total, 1)).tolist()
        with open(out, "w") as f:
            json.dump({"ranks": comm.size, "shard_sizes": sizes, "per_rank": results, "single": single}, f)
        print(tr("{ranks} ranks, test parts of {sizes} examples; rank 0 returned {returned}", ranks=comm.size,
                 sizes=sizes, returned=None if results[0] is None else [round(v, 4) for v in results[0]]))
        print(tr("one process over the whole test set: {accuracy}", accuracy=[round(v, 4) for v in single]))


if __name__ == "__main__":
    main()
