"""FP16 allreduce and double buffering: their arithmetic simulated on CPU in one process (gradients
rounded to FP16, or one step stale), to see what they do to accuracy, not to speed."""

import statistics
import unicodedata

from handson_lib import data
from handson_lib.experiments.large_batch.schedules import check_positive
from handson_lib.experiments.large_batch.train import blas_threads, train_once
from handson_lib.messages import tr

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


#: The variants as the reader reads them (the results keep the English names).
_SHOWN = {"FP32 gradients": lambda: tr("FP32 gradients"),
          "FP16-rounded gradients": lambda: tr("FP16-rounded gradients"),
          "1-step stale gradients": lambda: tr("1-step stale gradients")}


def _columns(text):
    """Terminal columns of `text`: a Japanese character takes two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


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
        with blas_threads(threads):
            mine = [{"variant": name, "seed": seed,
                     **train_once(train, test, batch, lr, epochs, seed=seed, hidden_units=hidden_units,
                                  optimizer_hook=hook() if hook else None)} for seed in seeds]
        runs += mine
        accuracy[name] = statistics.mean(r["accuracy"] for r in mine)
        shown = _SHOWN[name]()
        say(f"  {shown}{' ' * max(24 - _columns(shown), 0)} {accuracy[name] * 100:5.1f} %")
    return {"accuracy": accuracy,
            "runs": runs, "config": {"batch": batch, "epochs": epochs, "lr": lr, "seeds": seeds,
                                     "dataset": info.description}}
