"""Notebook 05's exercise: a student's `make_iterator(dataset, batchsize)`, its facts for the
tests, and its runs against `SerialIterator` (the result carries the measurements, not the
speed-up: computing that is the notebook's question)."""

from handson_lib.experiments.tuning.images import encoded_dataset
from handson_lib.experiments.tuning.measure import assemble
from handson_lib.experiments.tuning.worker import train_and_measure

def iterator_facts(make_iterator, batchsize, n_images=16):
    """What a test checks of a `make_iterator(dataset, batchsize)`, as data: the iterator's class
    name, whether it is a MultiprocessIterator, its batch size, repeat and worker processes, and
    the length and example shape of its first batch (a small encoded synthetic set)."""
    import chainer
    sample, _ = encoded_dataset("synthetic", n_images=n_images, source_size=40)
    iterator = make_iterator(sample, batchsize)
    try:
        facts = {"class": type(iterator).__name__,
                 "multiprocess": isinstance(iterator, chainer.iterators.MultiprocessIterator),
                 "batch_size": getattr(iterator, "batch_size", None), "repeat": bool(getattr(iterator, "repeat", False)),
                 "n_processes": getattr(iterator, "n_processes", None)}
        try:
            batch = iterator.next()
            facts.update(batch_length=len(batch), example_shape=list(batch[0][0].shape))
        except Exception as error:   # not an iterator of the dataset: the test's asserts say what is expected
            facts.update(batch_length=None, example_shape=None, error=f"{type(error).__name__}: {error}"[:300])
    finally:
        if hasattr(iterator, "finalize"):
            iterator.finalize()
    return facts


def compare_iterators(make_iterator, repeats=3, iterations=10, warmup=2, batchsize=32, width=None,
                      source_size=64, max_seconds=None, threads=1, label=None, print_fn=print):
    """SerialIterator vs `make_iterator(dataset, batchsize)` in this process, alternating runs.

    Same model, data and float32 settings; BLAS limited to `threads` threads as in `run_levers`.
    Returns a result dict with the steps "baseline" and `label` (default "+ your iterator").
    """
    from threadpoolctl import threadpool_limits
    label = label or "+ your iterator"
    steps = [{"label": "baseline", "lever": None, "levers": [], "runnable": True,
              "note": "SerialIterator"},
             {"label": label, "lever": "yours", "levers": ["yours"], "runnable": True, "note": ""}]
    runs = {0: [], 1: []}
    common = {"iterations": iterations, "warmup": warmup, "batchsize": batchsize, "model": "cnn",
              "width": width, "source_size": source_size, "max_seconds": max_seconds, "print_fn": None}
    with threadpool_limits(threads):
        for repeat in range(repeats):
            for i, maker in ((0, None), (1, make_iterator)):
                report = train_and_measure((), make_iterator=maker, **common)
                runs[i].append(report)
                if print_fn:
                    print_fn(f"  run {repeat + 1}/{repeats} {steps[i]['label']:24s} "
                             f"{report['iterations_per_sec']:8.2f} it/s ({report['iterator']})")
    steps[1]["note"] = runs[1][-1]["iterator"]
    # No speed-up in this result: notebook 05 asks the student to compute it from the runs.
    return assemble(steps, runs, with_speedups=False, meta={
        "benchmark": "tuning-iterator", "source": "measured here", "repeats": repeats,
        "iterations": iterations, "warmup": warmup, "batchsize": batchsize,
        "device": runs[0][-1]["device"], "model": runs[0][-1]["model"], "threads": threads})
