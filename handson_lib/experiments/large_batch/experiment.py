"""The experiment of notebook 06: final test accuracy for every (schedule, total batch), one
process growing its batch as more workers would, the mean and spread over seeds."""

import statistics
import time

from handson_lib import data
from handson_lib.experiments.large_batch.schedules import check_positive
from handson_lib.experiments.large_batch.train import blas_threads, train_once, warmup_iterations_for
from handson_lib.messages import tr
from handson_lib.sites import jobs

SCHEDULES = ("fixed", "scaled", "scaled+warmup")

DEFAULT_BATCHES = (16, 32, 64, 128, 256, 512)


#: Which rule each schedule needs from the caller (the student's, or the instructor's answers).
_NEEDS = {"scaled": "scaling_rule", "scaled+warmup": "lr_schedule_factory"}


def _checked_run_arguments(batches, schedules, seeds, epochs, rules):
    """(sorted batches, list of seeds) after checking every argument of :func:`run`."""
    batches = sorted({int(b) for b in batches})
    if not batches or batches[0] < 1:
        raise ValueError(f"batches must be positive integers, got {batches!r}")
    unknown = [s for s in schedules if s not in SCHEDULES]
    if unknown or not schedules:
        raise ValueError(f"unknown schedule(s) {unknown}; choose from {', '.join(SCHEDULES)}")
    for schedule in schedules:
        needed = _NEEDS.get(schedule)
        if needed and rules[needed] is None:
            raise ValueError(f"schedule {schedule!r} needs {needed}= (your function from notebook 06)")
    if isinstance(seeds, int):
        seeds = list(range(seeds))
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: give at least one seed")
    if not (isinstance(epochs, int) and epochs >= 1):
        raise ValueError(f"epochs must be an integer >= 1, got {epochs!r}")
    return batches, seeds


def _learning_rate_plan(schedule, batch, base_lr, base_batch, warmup, rules):
    """(lr at the start, extension or None) of one run."""
    if schedule == "scaled":
        return float(rules["scaling_rule"](base_lr, base_batch, batch)), None
    if schedule == "scaled+warmup":
        return base_lr, rules["lr_schedule_factory"](base_lr=base_lr, base_batch=base_batch,
                                                     batch=batch, warmup_iterations=warmup)
    return base_lr, None


def run(batches=DEFAULT_BATCHES, schedules=SCHEDULES, epochs=10, dataset="digits", model="mlp",
        base_batch=None, base_lr=0.01, warmup_epochs=2.0, seeds=(0,), momentum=0.9,
        hidden_units=100, scaling_rule=None, lr_schedule_factory=None, threads=1, print_fn=None):
    """Final test accuracy for every (schedule, total batch), the mean over ``seeds``.

    One process trains with total batch B as N = B / b workers of batch b would (no batch
    normalization: the same updates). Every run trains ``epochs`` epochs, so a larger batch makes
    fewer updates. Schedules:

    * ``fixed``: ``base_lr`` whatever the batch;
    * ``scaled``: ``scaling_rule(base_lr, base_batch, B)`` from the first update;
    * ``scaled+warmup``: starts at ``base_lr``, the extension from ``lr_schedule_factory(
      base_lr=, base_batch=, batch=, warmup_iterations=)`` sets the rate; W = ``warmup_epochs``
      epochs in updates (:func:`warmup_iterations_for`).

    A schedule that needs a rule the caller did not give is an error. ``base_batch`` defaults to
    the smallest batch. ``seeds``: an int n (seeds 0..n-1) or a list. ``threads``: BLAS threads
    while training (:func:`blas_threads`).
    Returns a JSON-ready dict: ``batches``, ``schedules``, ``accuracy[schedule]`` (mean accuracy,
    aligned with ``batches``), ``spread[schedule]`` ((min, max) over seeds), ``diverged[schedule]``
    (runs whose weights became NaN/inf, counted as 0 % accurate), ``runs`` (every run) and
    ``config``.
    """
    say = print_fn or (lambda *a, **k: None)
    rules = {"scaling_rule": scaling_rule, "lr_schedule_factory": lr_schedule_factory}
    batches, seeds = _checked_run_arguments(batches, schedules, seeds, epochs, rules)
    base_batch = batches[0] if base_batch is None else int(base_batch)
    check_positive(base_lr=base_lr, base_batch=base_batch)

    train, test, info = data.get_dataset(dataset, ndim=1 if model == "mlp" else 3, announce=False)
    say(tr("{dataset}; model {model}; {epochs} epochs; base lr {base_lr} at batch {base_batch}; warmup "
           "{warmup} epoch(s); seeds {seeds}", dataset=info.announcement, model=model, epochs=epochs,
           base_lr=base_lr, base_batch=base_batch, warmup=warmup_epochs, seeds=seeds))
    runs = []
    started = time.perf_counter()

    def train_with(schedule, batch, seed):
        warmup = warmup_iterations_for(warmup_epochs, len(train), batch) \
            if schedule == "scaled+warmup" else 0
        lr, extension = _learning_rate_plan(schedule, batch, base_lr, base_batch, warmup, rules)
        record = train_once(train, test, batch, lr, epochs, seed=seed, model=model,
                            hidden_units=hidden_units, momentum=momentum, extension=extension,
                            n_class=info.n_class)
        return {"schedule": schedule, "batch": batch, "seed": seed, "warmup_iterations": warmup,
                **record}

    with blas_threads(threads):
        for batch in batches:
            for schedule in schedules:
                runs += [train_with(schedule, batch, seed) for seed in seeds]
            say(_progress_line(runs, batch, schedules, started))
    return _summarize(runs, batches, schedules, started, {
        "dataset": info.description, "model": model,
        "hidden_units": hidden_units if model == "mlp" else None, "epochs": epochs,
        "base_batch": base_batch, "base_lr": base_lr, "warmup_epochs": warmup_epochs,
        "momentum": momentum, "seeds": seeds, "n_train": len(train), "n_test": len(test),
        **{name: getattr(rule, "__name__", repr(rule)) if rule else None for name, rule in rules.items()}})


def _progress_line(runs, batch, schedules, started):
    """The mean accuracy of each schedule at `batch` so far, and the seconds since the start."""
    row = {s: statistics.mean(r["accuracy"] for r in runs if r["batch"] == batch and r["schedule"] == s)
           for s in schedules}
    return (f"  batch {batch:5d}: " + "  ".join(f"{s} {a:.3f}" for s, a in row.items())
            + f"   ({time.perf_counter() - started:.0f} s)")


def _summarize(runs, batches, schedules, started, config):
    def of(schedule, batch):
        return [r for r in runs if r["schedule"] == schedule and r["batch"] == batch]

    return {
        "benchmark": "large-batch",
        "link": jobs.job_link(),
        "batches": batches,
        "schedules": list(schedules),
        "accuracy": {s: [statistics.mean(r["accuracy"] for r in of(s, b)) for b in batches]
                     for s in schedules},
        "spread": {s: [[min(r["accuracy"] for r in of(s, b)), max(r["accuracy"] for r in of(s, b))]
                       for b in batches] for s in schedules},
        "diverged": {s: [sum(r["diverged"] for r in of(s, b)) for b in batches] for s in schedules},
        "runs": runs,
        "config": config,
        "seconds": time.perf_counter() - started,
    }
