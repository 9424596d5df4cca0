"""Large-batch training (seed 003): linear scaling rule, gradual warmup, and the ChainerMN options
that go with many workers (FP16 allreduce, double buffering, multi-node batch normalization).

With N workers of batch b, every update averages N*b examples: the *total* batch grows with the
number of workers (in Chainer 7 without batch normalization, N workers of batch b update exactly
like one process with batch N*b; the Task #1 tests check that). So the effect of more workers on
accuracy can be studied in one process by growing its batch, which is what :func:`run` does.

The schedules (Goyal et al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour",
arXiv:1706.02677, section 2; the seed's slide 21):

* linear scaling rule: a batch k times larger gets a learning rate k times larger::

      scaled_lr(base_lr, base_batch, batch) = base_lr * batch / base_batch

* gradual warmup: start at ``base_lr`` and add a constant amount after every update so that the
  scaled rate is reached after W updates, then keep it. For the update that follows ``i``
  finished updates (``i = trainer.updater.iteration``; the first update has ``i = 0``)::

      lr(i) = base_lr + (scaled_lr - base_lr) * min(i, W) / W        (W >= 1)
      lr(i) = scaled_lr                                               (W == 0: no warmup)

  :class:`WarmupScaledLR` sets exactly these values: ``initialize`` sets ``lr(0)`` before the first
  update, and the extension, run after every update (``trigger=(1, 'iteration')``), sets
  ``lr(iteration)`` for the next one. Chainer's ``extensions.LinearShift('lr', (base_lr,
  scaled_lr), (0, W))`` gives the same values.

This module imports neither Chainer nor matplotlib at import time (the ``handson`` command line
imports it to build its parser).
"""

import json
import math
import statistics
import sys
import time
from pathlib import Path

SCHEDULES = ("fixed", "scaled", "scaled+warmup")
DEFAULT_BATCHES = (16, 32, 64, 128, 256, 512)
#: The seed's table (slide 36): ResNet-50 on ImageNet-1k, 90 epochs, single-crop top-1 accuracy.
IMAGENET_IN_15_MINUTES = (
    # team, hardware, software, total batch, time, top-1 accuracy (None: not given)
    ("He et al.", "P100 x 8", "Caffe", 256, "29 hr", 75.3),
    ("Goyal et al.", "P100 x 256", "Caffe2", 8192, "1 hr", 76.3),
    ("Codreanu et al.", "KNL 7250 x 720", "Intel Caffe", 11520, "62 min", 75.0),
    ("Cho et al.", "P100 x 256", "Torch", 8192, "50 min", None),
    ("You et al.", "Xeon 8160 x 1600", "Intel Caffe", 16000, "31 min", 75.3),
    ("Akiba et al. (ChainerMN)", "P100 x 1024", "Chainer", 32768, "15 min", 74.9),
)


# ----------------------------------------------------------------------------- the schedules


def _check_positive(**values):
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")


def scaled_lr(base_lr, base_batch, batch):
    """Linear scaling rule: ``base_lr * batch / base_batch``.

    >>> scaled_lr(0.1, 256, 8192)   # Goyal et al.: 0.1 for 256 images -> 3.2 for 8k
    3.2
    """
    _check_positive(base_lr=base_lr, base_batch=base_batch, batch=batch)
    return base_lr * batch / base_batch


def warmup_lr(iteration, base_lr, base_batch, batch, warmup_iterations):
    """The learning rate of the update after ``iteration`` finished updates (module docstring)."""
    if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
        raise ValueError(f"iteration must be an integer >= 0, got {iteration!r}")
    if isinstance(warmup_iterations, bool) or not isinstance(warmup_iterations, int) \
            or warmup_iterations < 0:
        raise ValueError(f"warmup_iterations must be an integer >= 0, got {warmup_iterations!r}")
    peak = scaled_lr(base_lr, base_batch, batch)
    if warmup_iterations == 0 or iteration >= warmup_iterations:
        return peak
    return base_lr + (peak - base_lr) * iteration / warmup_iterations


class WarmupScaledLR:
    """Trainer extension: gradual warmup from ``base_lr`` to the linearly scaled rate.

    ``trainer.extend(WarmupScaledLR(0.1, 32, 256, warmup_iterations=10))`` sets the optimizer's
    ``lr`` to :func:`warmup_lr` of the updater's iteration: before the first update
    (``initialize``) and after every update (``trigger=(1, 'iteration')``). It reads the count from
    the updater instead of counting calls, so a resumed trainer continues the schedule.
    ``Trainer.extend`` accepts any callable with these attributes; this class does not subclass
    ``chainer.training.Extension`` so that the module loads without Chainer.
    """

    trigger = (1, "iteration")
    priority = 200  # chainer.training.PRIORITY_EDITOR: changes state before readers see it
    name = "warmup_scaled_lr"

    def __init__(self, base_lr, base_batch, batch, warmup_iterations, attr="lr", optimizer=None):
        scaled_lr(base_lr, base_batch, batch)  # validates
        warmup_lr(0, base_lr, base_batch, batch, warmup_iterations)
        self.base_lr, self.base_batch, self.batch = base_lr, base_batch, batch
        self.warmup_iterations = warmup_iterations
        self.attr = attr
        self.optimizer = optimizer

    def lr_at(self, iteration):
        return warmup_lr(iteration, self.base_lr, self.base_batch, self.batch, self.warmup_iterations)

    def _set(self, trainer):
        optimizer = self.optimizer or trainer.updater.get_optimizer("main")
        setattr(optimizer, self.attr, self.lr_at(trainer.updater.iteration))

    def initialize(self, trainer):
        self._set(trainer)

    def __call__(self, trainer):
        self._set(trainer)


def reference_warmup_factory(base_lr, base_batch, batch, warmup_iterations):
    """The factory :func:`run` uses unless given one: ``WarmupScaledLR(...)``."""
    return WarmupScaledLR(base_lr, base_batch, batch, warmup_iterations)


def lr_trace(extension_factory=reference_warmup_factory, base_lr=0.1, base_batch=32, batch=256,
             warmup_iterations=10, iterations=15):
    """The learning rate of each of the first ``iterations`` updates, as a real trainer applies it.

    A tiny linear model trains on random data with the extension from ``extension_factory(
    base_lr=, base_batch=, batch=, warmup_iterations=)``; the optimizer's ``lr`` is read just
    before every update. Returns a list of floats (update 0 first)."""
    import tempfile

    import chainer
    import chainer.links as L
    import numpy as np
    from chainer import training

    rng = np.random.RandomState(0)
    dataset = chainer.datasets.TupleDataset(rng.rand(8, 3).astype(np.float32),
                                            rng.randint(0, 2, 8).astype(np.int32))
    model = L.Classifier(L.Linear(3, 2))
    optimizer = chainer.optimizers.MomentumSGD(lr=-1.0)  # a value no schedule would set
    optimizer.setup(model)
    seen = []
    update = optimizer.update

    def update_and_record(*args, **kwargs):
        seen.append(float(optimizer.lr))
        return update(*args, **kwargs)

    optimizer.update = update_and_record
    iterator = chainer.iterators.SerialIterator(dataset, 4, shuffle=False)
    updater = training.updaters.StandardUpdater(iterator, optimizer)
    with tempfile.TemporaryDirectory() as out:
        trainer = training.Trainer(updater, (iterations, "iteration"), out=out)
        trainer.extend(extension_factory(base_lr=base_lr, base_batch=base_batch, batch=batch,
                                         warmup_iterations=warmup_iterations))
        trainer.run()
    return seen


# ----------------------------------------------------------------------------- the experiment


def _make_model(name, n_class, hidden_units):
    import chainer.links as L

    from handson_lib import models
    if name == "mlp":
        return L.Classifier(models.MLP(n_units=hidden_units, n_class=n_class))
    return models.get_model(name, n_class)


def _finite(model):
    import numpy as np
    return all(np.isfinite(p.array).all() for p in model.params() if p.array is not None)


def _test_accuracy(model, test, chunk=1000):
    import chainer
    import chainer.functions as F
    import numpy as np
    x, y = test._datasets
    correct = 0
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        for start in range(0, len(y), chunk):
            scores = model.predictor(x[start:start + chunk]).array
            # Non-finite scores (a diverged run) count as wrong, not as class 0.
            ok = np.isfinite(scores).all(axis=1)
            correct += int(((F.argmax(scores, axis=1).array == y[start:start + chunk]) & ok).sum())
    return correct / len(y)


def train_once(train, test, batch, lr, epochs, seed=0, model="mlp", hidden_units=100, momentum=0.9,
               extension=None, n_class=10):
    """Train one model with total batch ``batch`` for ``epochs`` epochs; the test accuracy and more.

    ``lr`` is the optimizer's learning rate at the start; ``extension`` (optional) is added to the
    trainer and may change it (a warmup schedule). Weights and data order depend on ``seed`` only,
    so runs that differ in their schedule start from the same model and see the same batches."""
    import tempfile

    import chainer
    from chainer import training

    from handson_lib.training import seed_everything
    if batch > len(train):
        raise ValueError(f"batch {batch} is larger than the training set ({len(train)} examples)")
    seed_everything(seed)
    net = _make_model(model, n_class, hidden_units)
    optimizer = chainer.optimizers.MomentumSGD(lr=lr, momentum=momentum)
    optimizer.setup(net)
    iterator = chainer.iterators.SerialIterator(train, batch, shuffle=True)
    updater = training.updaters.StandardUpdater(iterator, optimizer)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        trainer = training.Trainer(updater, (epochs, "epoch"), out=out)
        if extension is not None:
            trainer.extend(extension)
        trainer.run()
    finite = _finite(net)
    return {"accuracy": _test_accuracy(net, test), "diverged": not finite, "iterations": updater.iteration, "final_lr": float(optimizer.lr),
            "seconds": time.perf_counter() - started}


def warmup_iterations_for(warmup_epochs, n_train, batch):
    """W for a warmup of ``warmup_epochs`` epochs at this batch (at least 1 when warmup_epochs > 0)."""
    if warmup_epochs < 0:
        raise ValueError(f"warmup_epochs must be >= 0, got {warmup_epochs!r}")
    if warmup_epochs == 0:
        return 0
    return max(1, round(warmup_epochs * n_train / batch))


def run(batches=DEFAULT_BATCHES, schedules=SCHEDULES, epochs=10, dataset="digits", model="mlp",
        base_batch=None, base_lr=0.05, warmup_epochs=2.0, seeds=(0,), momentum=0.9,
        hidden_units=100, scaling_rule=None, lr_schedule_factory=None, print_fn=None):
    """Final test accuracy for every (schedule, total batch), the mean over ``seeds``.

    One process trains with total batch B as N = B / b workers of batch b would (no batch
    normalization: the same updates). Every run trains ``epochs`` epochs, so a larger batch makes
    fewer updates. Schedules:

    * ``fixed``: ``base_lr`` whatever the batch;
    * ``scaled``: ``scaling_rule(base_lr, base_batch, B)`` from the first update (default
      :func:`scaled_lr`);
    * ``scaled+warmup``: starts at ``base_lr``, the extension from ``lr_schedule_factory(
      base_lr=, base_batch=, batch=, warmup_iterations=)`` (default :class:`WarmupScaledLR`) sets
      the rate; W = ``warmup_epochs`` epochs in updates (:func:`warmup_iterations_for`).

    ``base_batch`` defaults to the smallest batch. ``seeds``: an int n (seeds 0..n-1) or a list.
    Returns a JSON-ready dict: ``batches``, ``schedules``, ``accuracy[schedule]`` (mean accuracy,
    aligned with ``batches``), ``spread[schedule]`` ((min, max) over seeds), ``diverged[schedule]``
    (runs whose weights became NaN/inf, counted as 0 % accurate), ``runs`` (every run) and
    ``config``.
    """
    from handson_lib import data
    say = print_fn or (lambda *a, **k: None)
    batches = sorted({int(b) for b in batches})
    if not batches or batches[0] < 1:
        raise ValueError(f"batches must be positive integers, got {batches!r}")
    unknown = [s for s in schedules if s not in SCHEDULES]
    if unknown or not schedules:
        raise ValueError(f"unknown schedule(s) {unknown}; choose from {', '.join(SCHEDULES)}")
    if isinstance(seeds, int):
        seeds = list(range(seeds))
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: give at least one seed")
    if not (isinstance(epochs, int) and epochs >= 1):
        raise ValueError(f"epochs must be an integer >= 1, got {epochs!r}")
    base_batch = batches[0] if base_batch is None else int(base_batch)
    _check_positive(base_lr=base_lr, base_batch=base_batch)
    rule = scaling_rule or scaled_lr
    factory = lr_schedule_factory or reference_warmup_factory

    train, test, info = data.get_dataset(dataset, ndim=1 if model == "mlp" else 3, announce=False)
    n_class = info.n_class
    say(f"{info.description}; model {model}; {epochs} epochs; base lr {base_lr} at batch "
        f"{base_batch}; warmup {warmup_epochs} epoch(s); seeds {seeds}")
    runs = []
    started = time.perf_counter()
    for batch in batches:
        for schedule in schedules:
            for seed in seeds:
                warmup = warmup_iterations_for(warmup_epochs, len(train), batch) \
                    if schedule == "scaled+warmup" else 0
                extension = None
                if schedule == "fixed":
                    lr = base_lr
                elif schedule == "scaled":
                    lr = float(rule(base_lr, base_batch, batch))
                else:
                    lr = base_lr
                    extension = factory(base_lr=base_lr, base_batch=base_batch, batch=batch,
                                        warmup_iterations=warmup)
                record = train_once(train, test, batch, lr, epochs, seed=seed, model=model,
                                    hidden_units=hidden_units, momentum=momentum,
                                    extension=extension, n_class=n_class)
                runs.append({"schedule": schedule, "batch": batch, "seed": seed,
                             "warmup_iterations": warmup, **record})
        row = {s: statistics.mean(r["accuracy"] for r in runs if r["batch"] == batch
                                  and r["schedule"] == s) for s in schedules}
        say(f"  batch {batch:5d}: " + "  ".join(f"{s} {a:.3f}" for s, a in row.items())
            + f"   ({time.perf_counter() - started:.0f} s)")

    def of(schedule, batch):
        return [r for r in runs if r["schedule"] == schedule and r["batch"] == batch]

    return {
        "benchmark": "large-batch",
        "batches": batches,
        "schedules": list(schedules),
        "accuracy": {s: [statistics.mean(r["accuracy"] for r in of(s, b)) for b in batches]
                     for s in schedules},
        "spread": {s: [[min(r["accuracy"] for r in of(s, b)), max(r["accuracy"] for r in of(s, b))]
                       for b in batches] for s in schedules},
        "diverged": {s: [sum(r["diverged"] for r in of(s, b)) for b in batches] for s in schedules},
        "runs": runs,
        "config": {"dataset": info.description, "model": model, "hidden_units": hidden_units
                   if model == "mlp" else None, "epochs": epochs, "base_batch": base_batch,
                   "base_lr": base_lr, "warmup_epochs": warmup_epochs, "momentum": momentum,
                   "seeds": seeds, "n_train": len(train), "n_test": len(test),
                   "scaling_rule": getattr(rule, "__name__", repr(rule)),
                   "lr_schedule_factory": getattr(factory, "__name__", repr(factory))},
        "seconds": time.perf_counter() - started,
    }
