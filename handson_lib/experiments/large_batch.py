"""Large-batch training (seed 003): linear scaling rule, gradual warmup, and the ChainerMN options
that go with many workers (FP16 allreduce, double buffering, multi-node batch normalization).

With N workers of batch b, every update averages N*b examples: the *total* batch grows with the
number of workers (in Chainer 7 without batch normalization, N workers of batch b update exactly
like one process with batch N*b; the Task #1 tests check that). So the effect of more workers on
accuracy can be studied in one process by growing its batch, which is what :func:`run` does.

The learning-rate rules are the student's to write (notebook 06): the linear scaling rule
``scaling_rule(base_lr, base_batch, batch)`` and a warmup extension made by
``lr_schedule_factory(base_lr=, base_batch=, batch=, warmup_iterations=)``. :func:`run`,
:func:`lr_trace` and :func:`imagenet_table` take them as parameters; this module has no rule of
its own (the instructor's are in handson_lib.autograder.answers, which the student edition does not
ship).
"""

import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from handson_lib import data, launch
from handson_lib.messages import tr
from handson_lib.runtime import devices, models
from handson_lib.runtime.mpi import prepare_rank, start_multi_node
from handson_lib.runtime.training import seed_everything
from handson_lib.sites import jobs
from handson_lib.plotting import pyplot

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

IMAGENET_TRAIN_IMAGES = 1_281_167
GOYAL_BASE_LR, GOYAL_BASE_BATCH = 0.1, 256  # ResNet-50 reference: lr 0.1 for a batch of 256


def imagenet_table(epochs=90, scaling_rule=None):
    """The seed's table with derived columns: updates in ``epochs`` epochs of ImageNet-1k, and, given
    a ``scaling_rule(base_lr, base_batch, batch)``, the learning rate it gives from 0.1 at batch 256
    (Goyal et al.'s reference; Akiba et al. went beyond it with RMSprop warmup)."""
    return [{"team": team, "hardware": hardware, "software": software, "batch": batch, "time": time_,
             "top1": top1, "updates": round(epochs * IMAGENET_TRAIN_IMAGES / batch),
             "rule_lr": scaling_rule(GOYAL_BASE_LR, GOYAL_BASE_BATCH, batch) if scaling_rule else None}
            for team, hardware, software, batch, time_, top1 in IMAGENET_IN_15_MINUTES]


def print_imagenet_table(scaling_rule=None, print_fn=print):
    """The table of :func:`imagenet_table`; the "rule lr" column only when a rule is given."""
    rule_head = f" {'rule lr':>8s}" if scaling_rule else ""
    print_fn(f"{'team':25s} {'hardware':17s} {'software':11s} {'batch':>6s} {'time':>7s} "
             f"{'top-1':>6s} {'updates':>8s}{rule_head}")
    for row in imagenet_table(scaling_rule=scaling_rule):
        top1 = f"{row['top1']:.1f}%" if row["top1"] is not None else "-"
        rule_lr = f" {row['rule_lr']:8.2f}" if scaling_rule else ""
        print_fn(f"{row['team']:25s} {row['hardware']:17s} {row['software']:11s} {row['batch']:6d} "
                 f"{row['time']:>7s} {top1:>6s} {row['updates']:8d}{rule_lr}")


# ----------------------------------------------------------------------------- checking a schedule


def check_positive(**values):
    """ValueError naming the first of `values` that is not a positive number."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")


def rate_at(extension_factory, base_lr, base_batch, batch, warmup_iterations, iteration):
    """The rate an extension built by ``extension_factory`` gives the update after ``iteration``
    finished ones (its ``lr_at``), as a float."""
    return float(extension_factory(base_lr, base_batch, batch, warmup_iterations).lr_at(iteration))


def lr_trace(extension_factory, base_lr=0.1, base_batch=32, batch=256, warmup_iterations=10,
             iterations=15):
    """The learning rate of each of the first ``iterations`` updates, as a real trainer applies it.

    A tiny linear model trains on random data with the extension from ``extension_factory(
    base_lr=, base_batch=, batch=, warmup_iterations=)``; the optimizer's ``lr`` is read just
    before every update. Returns a list of floats (update 0 first)."""
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
               extension=None, n_class=10, optimizer_hook=None):
    """Train one model with total batch ``batch`` for ``epochs`` epochs; the test accuracy and more.

    ``lr`` is the optimizer's learning rate at the start; ``extension`` (optional) is added to the
    trainer and may change it (a warmup schedule); ``optimizer_hook`` (optional) may change the
    gradients before each update. Weights and data order depend on ``seed`` only,
    so runs that differ in their schedule start from the same model and see the same batches."""
    import chainer
    from chainer import training
    if batch > len(train):
        raise ValueError(f"batch {batch} is larger than the training set ({len(train)} examples)")
    seed_everything(seed)
    net = _make_model(model, n_class, hidden_units)
    optimizer = chainer.optimizers.MomentumSGD(lr=lr, momentum=momentum)
    optimizer.setup(net)
    if optimizer_hook is not None:
        optimizer.add_hook(optimizer_hook)
    iterator = chainer.iterators.SerialIterator(train, batch, shuffle=True)
    updater = training.updaters.StandardUpdater(iterator, optimizer)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        trainer = training.Trainer(updater, (epochs, "epoch"), out=out)
        if extension is not None:
            trainer.extend(extension)
        trainer.run()
    finite = _finite(net)
    return {"accuracy": _test_accuracy(net, test), "diverged": not finite,
            "iterations": updater.iteration, "final_lr": float(optimizer.lr),
            "seconds": time.perf_counter() - started}


def _blas_threads(threads):
    """Limit NumPy's BLAS threads while training (None: leave as is). The matrices here are small:
    one thread is several times faster than two fighting over a busy machine, and it leaves the
    other cores to the other processes. threadpoolctl comes with scikit-learn."""
    if threads is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=threads, user_api="blas")


def warmup_iterations_for(warmup_epochs, n_train, batch):
    """W for a warmup of ``warmup_epochs`` epochs at this batch (at least 1 when warmup_epochs > 0)."""
    if warmup_epochs < 0:
        raise ValueError(f"warmup_epochs must be >= 0, got {warmup_epochs!r}")
    if warmup_epochs == 0:
        return 0
    return max(1, round(warmup_epochs * n_train / batch))


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
    while training (:func:`_blas_threads`).
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

    with _blas_threads(threads):
        for batch in batches:
            for schedule in schedules:
                runs += [train_with(schedule, batch, seed) for seed in seeds]
            row = {s: statistics.mean(r["accuracy"] for r in runs
                                      if r["batch"] == batch and r["schedule"] == s)
                   for s in schedules}
            say(f"  batch {batch:5d}: " + "  ".join(f"{s} {a:.3f}" for s, a in row.items())
                + f"   ({time.perf_counter() - started:.0f} s)")
    return _summarize(runs, batches, schedules, started, {
        "dataset": info.description, "model": model,
        "hidden_units": hidden_units if model == "mlp" else None, "epochs": epochs,
        "base_batch": base_batch, "base_lr": base_lr, "warmup_epochs": warmup_epochs,
        "momentum": momentum, "seeds": seeds, "n_train": len(train), "n_test": len(test),
        **{name: getattr(rule, "__name__", repr(rule)) if rule else None for name, rule in rules.items()}})


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


def format_table(result):
    """Mean test accuracy (%) per batch and schedule, the spread over seeds, as text."""
    schedules = result["schedules"]
    lines = [f"{'total batch':>11s} " + " ".join(f"{s:>22s}" for s in schedules)]
    for i, batch in enumerate(result["batches"]):
        cells = []
        for s in schedules:
            low, high = result["spread"][s][i]
            note = f" ({low * 100:.1f}-{high * 100:.1f})" if high > low else ""
            diverged = "!" if result["diverged"][s][i] else ""
            cells.append(f"{result['accuracy'][s][i] * 100:.1f}{diverged}{note}")
        lines.append(f"{batch:11d} " + " ".join(f"{c:>22s}" for c in cells))
    seeds = result["config"]["seeds"]
    lines.append((tr("test accuracy in %, mean over {n} seed(s) (min-max)", n=len(seeds)) if len(seeds) > 1
                  else tr("test accuracy in %, mean over {n} seed(s)", n=len(seeds)))
                 + (tr("; ! = some runs diverged (NaN weights count as 0 %)")
                    if any(any(v) for v in result["diverged"].values()) else ""))
    return "\n".join(lines)


def accuracy_figure(result, title=None):
    """Test accuracy vs total batch (log2 axis), one line per schedule, the seed spread shaded."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    styles = {"fixed": ("#C44E52", "o"), "scaled": ("#4C72B0", "s"), "scaled+warmup": ("#55A868", "^")}
    batches = result["batches"]
    for schedule in result["schedules"]:
        color, marker = styles.get(schedule, (None, "o"))
        acc = [a * 100 for a in result["accuracy"][schedule]]
        label = {"fixed": "fixed lr", "scaled": "linear scaling rule",
                 "scaled+warmup": "scaling + gradual warmup"}.get(schedule, schedule)
        ax.plot(batches, acc, marker=marker, color=color, label=label)
        low = [s[0] * 100 for s in result["spread"][schedule]]
        high = [s[1] * 100 for s in result["spread"][schedule]]
        if low != high:
            ax.fill_between(batches, low, high, color=color, alpha=0.15)
    ax.set_xscale("log", base=2)
    ax.set_xticks(batches)
    ax.set_xticklabels([str(b) for b in batches])
    ax.set_xlabel("total batch size (workers x batch per worker)")
    ax.set_ylabel("test accuracy [%]")
    cfg = result["config"]
    ax.set_title(title or f"{cfg['model']}, {cfg['epochs']} epochs, "
                          f"base lr {cfg['base_lr']} at batch {cfg['base_batch']}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- FP16 allreduce and
# double buffering: the arithmetic, simulated on CPU


class _RoundGradsToFP16:
    """Optimizer hook: every gradient is rounded to float16 and back, as FP16 allreduce sends it."""

    name = "round_grads_to_fp16"
    call_for_each_param = False
    timing = "pre"

    def __call__(self, optimizer):
        import numpy as np
        for param in optimizer.target.params():
            if param.grad is not None:
                param.grad[...] = param.grad.astype(np.float16).astype(param.grad.dtype)


class _OneStepStaleGrads:
    """Optimizer hook: each update applies the previous iteration's gradients (double buffering);
    the first update gets zero gradients, which leaves MomentumSGD's weights unchanged."""

    name = "one_step_stale_grads"
    call_for_each_param = False
    timing = "pre"

    def __init__(self):
        self.previous = None

    def __call__(self, optimizer):
        params = [p for p in optimizer.target.params() if p.grad is not None]
        current = [p.grad.copy() for p in params]
        for i, param in enumerate(params):
            param.grad[...] = 0 if self.previous is None else self.previous[i]
        self.previous = current


def simulate_gpu_options(lr, batch=128, epochs=10, seeds=(0,), dataset="digits", hidden_units=100,
                         threads=1, print_fn=None):
    """Test accuracy with plain FP32 gradients, gradients rounded to FP16 (what FP16 allreduce
    sends) and 1-step stale gradients (double buffering's update rule), on CPU.

    A simulation of the arithmetic only: one process, no communication, nothing overlaps, so it
    says nothing about speed. ``lr``: the learning rate of every run (the notebook passes the
    linearly scaled rate for ``batch``). Returns ``{variant: mean accuracy}`` and the runs."""
    check_positive(lr=lr)
    say = print_fn or (lambda *a, **k: None)
    say(tr("CPU stand-in: the arithmetic of FP16 allreduce and double buffering simulated in one "
           "process (not the pure_nccl code path; no communication, no speed)"))
    train, test, info = data.get_dataset(dataset, ndim=1, announce=False)
    variants = {"FP32 gradients": None, "FP16-rounded gradients": _RoundGradsToFP16,
                "1-step stale gradients": _OneStepStaleGrads}
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    runs, accuracy = [], {}
    for name, hook in variants.items():
        with _blas_threads(threads):
            mine = [{"variant": name, "seed": seed,
                     **train_once(train, test, batch, lr, epochs, seed=seed, hidden_units=hidden_units,
                                  optimizer_hook=hook() if hook else None)} for seed in seeds]
        runs += mine
        accuracy[name] = statistics.mean(r["accuracy"] for r in mine)
        say(f"  {name:24s} {accuracy[name] * 100:5.1f} %")
    return {"accuracy": accuracy,
            "runs": runs, "config": {"batch": batch, "epochs": epochs, "lr": lr, "seeds": seeds,
                                     "dataset": info.description}}


# ----------------------------------------------------------------------------- ChainerMN: the options
# that need pure_nccl, and multi-node batch normalization (workers started with mpiexec)

#: What each option needs (Chainer 7.8.1 source: create_communicator, create_multi_node_optimizer).
GPU_OPTIONS = (
    ("create_communicator('pure_nccl', allreduce_grad_dtype='float16')",
     ("FP16 allreduce: gradients are cast to FP16, averaged with NCCL, cast back: half the bytes "
      "on the wire. Needs the pure_nccl communicator, so CuPy, NCCL 2 and one GPU per rank.")),
    ("create_communicator('naive', allreduce_grad_dtype='float16')",
     ("The same option on the CPU communicator: every communicator but pure_nccl refuses it "
      "(MPI has no FP16 sum).")),
    ("create_multi_node_optimizer(optimizer, naive_comm, double_buffering=True)",
     ("Double buffering: the allreduce of iteration t overlaps the forward/backward of t+1, and "
      "each update uses the gradients of the previous iteration (1-step stale). Needs pure_nccl "
      "and a separate CUDA stream.")),
)

_RESULT_TAG = "LARGE-BATCH-RESULT "


def _emit(comm, payload):
    if comm is None or comm.rank == 0:
        print(_RESULT_TAG + json.dumps(payload), flush=True)


def _parse(mpi_result, what):
    for line in mpi_result.output.splitlines():
        if _RESULT_TAG in line:
            return json.loads(line.split(_RESULT_TAG, 1)[1])
    raise RuntimeError(f"{what} gave no result (exit code {mpi_result.returncode}):\n"
                       f"{mpi_result.tail(30)}")


def _error_text(exc):
    return f"{type(exc).__name__}: {exc}"


def _probe_worker():
    """Try the pure_nccl-only options here and report what Chainer answers (one rank)."""
    prepare_rank("naive", gpu=False, forkserver=False)
    import chainer
    import chainermn
    import numpy as np

    comm = chainermn.create_communicator("naive")
    attempts = []

    def attempt(call, action):
        try:
            made = action()
        except Exception as exc:  # noqa: BLE001 - the point is to show Chainer's own message
            attempts.append({"call": call, "ok": False, "error": _error_text(exc)})
            return None
        attempts.append({"call": call, "ok": True, "error": None})
        return made

    nccl_comm = attempt(GPU_OPTIONS[0][0], lambda: chainermn.create_communicator(
        "pure_nccl", allreduce_grad_dtype=np.float16))
    attempt(GPU_OPTIONS[1][0], lambda: chainermn.create_communicator(
        "naive", allreduce_grad_dtype=np.float16))
    model = chainer.links.Linear(3, 2)
    attempt(GPU_OPTIONS[2][0], lambda: chainermn.create_multi_node_optimizer(
        chainer.optimizers.MomentumSGD().setup(model), comm, double_buffering=True))
    if nccl_comm is not None:
        attempt("create_multi_node_optimizer(optimizer, pure_nccl_comm, double_buffering=True)",
                lambda: chainermn.create_multi_node_optimizer(
                    chainer.optimizers.MomentumSGD().setup(chainer.links.Linear(3, 2)), nccl_comm,
                    double_buffering=True))
    gpus, no_gpu_reason = devices.gpu_count()
    _emit(comm, {"attempts": attempts, "gpus": gpus, "no_gpu_reason": no_gpu_reason})


def try_gpu_options(timeout=120):
    """Try FP16 allreduce and double buffering on this host (one MPI rank); Chainer's answers.

    Returns ``{"attempts": [{"call", "ok", "error"}], "gpus", "no_gpu_reason"}``: on a CPU host the
    pure_nccl calls fail with Chainer's own error, which is the demonstration."""
    result = launch.run_mpi(1, ["-m", "handson_lib.experiments.large_batch", "--probe-gpu-options"], timeout=timeout)
    return _parse(result, "the pure_nccl option probe")


def print_gpu_options(probe, print_fn=print):
    for attempt in probe["attempts"]:
        print_fn(f"{attempt['call']}\n    -> {'works here' if attempt['ok'] else attempt['error']}")
    if not probe["gpus"]:
        print_fn(f"(no GPU on this host: {probe['no_gpu_reason']})")


def _gpu_train_worker(iterations=30, batch=64):
    """FP16 allreduce + double buffering for real: pure_nccl, one GPU per rank (GPU hosts only)."""
    prepare_rank("pure_nccl", gpu=True, forkserver=False)
    import chainer
    import chainermn
    import numpy as np

    comm = chainermn.create_communicator("pure_nccl", allreduce_grad_dtype=np.float16)
    device = comm.intra_rank
    chainer.cuda.get_device_from_id(device).use()
    train, _, _ = data.get_dataset("digits", announce=False)
    train = chainermn.scatter_dataset(train if comm.rank == 0 else None, comm, shuffle=True, seed=0)
    model = _make_model("mlp", 10, 100)
    model.to_gpu(device)
    optimizer = chainermn.create_multi_node_optimizer(
        chainer.optimizers.MomentumSGD(lr=0.05), comm, double_buffering=True)
    optimizer.setup(model)
    iterator = chainer.iterators.SerialIterator(train, batch, shuffle=True)
    losses = []
    for _ in range(iterations):
        x, t = chainer.dataset.concat_examples(iterator.next(), device)
        optimizer.update(model, x, t)
        losses.append(float(model.loss.array))
    first = np.asarray(chainer.cuda.to_cpu(model.predictor.l1.W.array))
    digest = comm.gather_obj(float(first.sum()))
    dtype = comm.get_config("allreduce_grad_dtype")
    _emit(comm, {"communicator": type(comm).__name__,
                 "allreduce_grad_dtype": None if dtype is None else np.dtype(dtype).name,
                 "optimizer": type(optimizer).__name__, "losses": losses,
                 "ranks": comm.size, "weight_sums": digest})


def run_gpu_options(ranks=1, iterations=30, timeout=600):
    """Train a few iterations with pure_nccl, FP16 allreduce and double buffering (GPU hosts)."""
    result = launch.run_mpi(ranks, ["-m", "handson_lib.experiments.large_batch", "--gpu-train",
                                 "--iterations", str(iterations)], timeout=timeout)
    return _parse(result, "the pure_nccl FP16 / double-buffering run")


def _used_statistics(x, y, eps):
    """Mean and variance a batch normalization used, read back from its input and output.

    With gamma = 1 and beta = 0, ``y = (x - mean) / sqrt(var + eps)`` per channel, so
    ``x = mean + sqrt(var + eps) * y``: a straight-line fit of x on y gives both exactly."""
    import numpy as np
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    means, variances = [], []
    for c in range(x.shape[1]):
        slope, intercept = np.polyfit(y[:, c], x[:, c], 1)
        means.append(float(intercept))
        variances.append(float(slope ** 2 - eps))
    return means, variances


def _bn_worker(local_batch=4, channels=3, seed=0):
    """Each rank normalizes its own rows of one global batch with local BN and MultiNodeBN."""
    comm = start_multi_node("naive", forkserver=False)
    import chainer
    import chainer.links as L
    import chainermn
    import numpy as np
    chainer.disable_experimental_feature_warning = True

    # Every rank draws the same global batch and keeps its own rows; the rows of rank r are
    # shifted by 4r so that the ranks' own statistics clearly differ.
    rng = np.random.RandomState(seed)
    whole = rng.randn(comm.size * local_batch, channels).astype(np.float32)
    whole += np.repeat(4.0 * np.arange(comm.size, dtype=np.float32), local_batch)[:, None]
    mine = whole[comm.rank * local_batch:(comm.rank + 1) * local_batch]
    local_bn = L.BatchNormalization(channels)
    multi_bn = chainermn.links.MultiNodeBatchNormalization(channels, comm)
    with chainer.using_config("train", True):
        y_local = local_bn(mine).array
        y_multi = multi_bn(mine).array
    local_mean, local_var = _used_statistics(mine, y_local, local_bn.eps)
    multi_mean, multi_var = _used_statistics(mine, y_multi, multi_bn.eps)
    rows = comm.gather_obj({"rank": comm.rank, "local_bn": {"mean": local_mean, "var": local_var},
                            "multi_node_bn": {"mean": multi_mean, "var": multi_var},
                            "own_rows": {"mean": mine.mean(axis=0).tolist(),
                                         "var": mine.var(axis=0).tolist()}})
    if comm.rank == 0:
        single = L.BatchNormalization(channels)
        with chainer.using_config("train", True):
            y_single = single(whole).array
        single_mean, single_var = _used_statistics(whole, y_single, single.eps)
        _emit(comm, {"ranks": rows, "local_batch": local_batch, "channels": channels,
                     "single_process": {"mean": single_mean, "var": single_var},
                     "whole_batch": {"mean": whole.mean(axis=0).tolist(),
                                     "var": whole.var(axis=0).tolist()}})


def bn_compare(ranks=2, local_batch=4, channels=3, seed=0, timeout=120):
    """MultiNodeBatchNormalization vs local BatchNormalization on ``ranks`` local MPI ranks.

    Returns the statistics each rank's layers normalized with (``ranks[i]["local_bn"]``,
    ``["multi_node_bn"]``, each ``{"mean": [...], "var": [...]}`` per channel), the plain NumPy
    statistics of its own rows (``own_rows``) and of the whole batch (``whole_batch``), and those of
    one process running ``L.BatchNormalization`` on the concatenated batch (``single_process``)."""
    if ranks < 2:
        raise ValueError("the comparison needs at least 2 ranks")
    result = launch.run_mpi(ranks, ["-m", "handson_lib.experiments.large_batch", "--bn-compare",
                                 "--local-batch", str(local_batch), "--channels", str(channels),
                                 "--seed", str(seed)], timeout=timeout)
    return _parse(result, "the batch-normalization comparison")


def print_bn_compare(result, channel=0, print_fn=print):
    """One table row per rank: the mean / variance each BN used for one channel."""
    print_fn(f"channel {channel}; {len(result['ranks'])} ranks x {result['local_batch']} rows")
    print_fn(f"{'':34s} {'mean':>9s} {'var':>9s}")
    for row in result["ranks"]:
        for key, label in (("local_bn", "BatchNormalization"),
                           ("multi_node_bn", "MultiNodeBatchNormalization")):
            stats = row[key]
            print_fn(f"rank {row['rank']} {label:27s} {stats['mean'][channel]:9.4f} "
                     f"{stats['var'][channel]:9.4f}")
    stats = result["single_process"]
    print_fn(f"{'1 process, the whole batch':34s} {stats['mean'][channel]:9.4f} {stats['var'][channel]:9.4f}")


# ----------------------------------------------------------------------------- command line


def add_arguments(parser):
    parser.add_argument("--epochs", type=int, default=10, help="epochs of every run (default 10)")
    parser.add_argument("--batches", default=",".join(map(str, DEFAULT_BATCHES)),
                        help="total batch sizes, comma-separated (default %(default)s)")
    parser.add_argument("--base-batch", type=int, default=16,
                        help="the batch that --base-lr is tuned for (default 16)")
    parser.add_argument("--base-lr", type=float, default=0.01, help="learning rate at --base-batch")
    parser.add_argument("--warmup-epochs", type=float, default=2.0,
                        help="gradual warmup length in epochs (default 2)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per configuration (mean reported)")
    parser.add_argument("--model", default="mlp", help="mlp (hidden units: --hidden-units) or cnn")
    parser.add_argument("--hidden-units", type=int, default=100)
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--out", default="results/bench", help="folder for large_batch.json")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--plot", default=None, metavar="PNG", help="write the accuracy-vs-batch plot")


def _parse_batches(text):
    try:
        batches = [int(b) for b in str(text).split(",") if b.strip()]
    except ValueError:
        raise ValueError(f"--batches takes integers separated by commas, got {text!r}") from None
    if not batches or min(batches) < 1:
        raise ValueError(f"--batches needs positive integers, got {text!r}")
    return batches


def run_command(args, scaling_rule, lr_schedule_factory):
    """`handson bench large-batch` with the given rules (the instructor's command passes its own):
    the result, or None after printing why the arguments are wrong."""
    try:
        batches = _parse_batches(args.batches)
        result = run(batches=batches, epochs=args.epochs, dataset=args.dataset, model=args.model,
                     base_batch=args.base_batch, base_lr=args.base_lr,
                     warmup_epochs=args.warmup_epochs, seeds=args.seeds,
                     hidden_units=args.hidden_units, scaling_rule=scaling_rule,
                     lr_schedule_factory=lr_schedule_factory,
                     print_fn=None if args.json else (lambda *a: print(*a, flush=True)))
    except (ValueError, data.DatasetError) as exc:
        print(f"handson bench large-batch: {exc}", file=sys.stderr)
        return None
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_table(result))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        path = Path(args.out, "large_batch.json")
        path.write_text(json.dumps(result, indent=2))
        if not args.json:
            print(f"wrote {path}")
    if args.plot:
        accuracy_figure(result).savefig(args.plot, dpi=120)
        if not args.json:
            print(f"wrote {args.plot}")
    return result


def _worker_main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(description="MPI workers of handson_lib.experiments.large_batch")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--bn-compare", action="store_true")
    mode.add_argument("--probe-gpu-options", action="store_true")
    mode.add_argument("--gpu-train", action="store_true")
    parser.add_argument("--local-batch", type=int, default=4)
    parser.add_argument("--channels", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=30)
    args = parser.parse_args(argv)
    if args.bn_compare:
        _bn_worker(args.local_batch, args.channels, args.seed)
    elif args.probe_gpu_options:
        _probe_worker()
    else:
        _gpu_train_worker(args.iterations)


if __name__ == "__main__":
    _worker_main()
