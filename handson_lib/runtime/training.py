"""Pieces every training script shares: flags, data, seeds, the banner, `require_done`.

Flags follow Chainer's examples (`--batchsize`, `--epoch`, `--dataset`, `--out`, ...).
"""

import argparse
import os
import re

from handson_lib import data
from handson_lib.messages import tr
from handson_lib.runtime import phases

# Plots are written to files; batch jobs and CI have no display.
os.environ.setdefault("MPLBACKEND", "Agg")

DEFAULT_LR = 0.02  # the seed used 0.05 (ResNet on GPU); the small CPU CNN is unstable there


def add_common_arguments(parser: argparse.ArgumentParser, batchsize=32, epoch=4, model="cnn"):
    parser.add_argument("--batchsize", "-b", type=int, default=batchsize,
                        help="minibatch size per worker")
    parser.add_argument("--epoch", "-e", type=int, default=epoch, help="number of epochs")
    parser.add_argument("--dataset", "-d", default="synthetic",
                        help="'synthetic' (offline CIFAR-shaped stand-in), 'digits', a "
                             "cifar-10-python.tar.gz, a cifar10_*px_*p.pickle.gz or an MNIST folder")
    parser.add_argument("--train-size", type=int, default=4000,
                        help="training images of the synthetic set")
    parser.add_argument("--test-size", type=int, default=1000, help="test images of the synthetic set")
    parser.add_argument("--model", "-m", default=model, help="cnn, cnn-bn, resnet18 or mlp")
    parser.add_argument("--lr", type=float, default=DEFAULT_LR, help="learning rate (MomentumSGD)")
    parser.add_argument("--seed", type=int, default=0, help="random seed of data order and weights")
    parser.add_argument("--out", "-o", default="result", help="output folder (logs, plots)")
    parser.add_argument("--warmup-iterations", type=int, default=2,
                        help="iterations left out of the throughput figure")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (batch jobs)")
    return parser


def load_data(args, announce=True, print_fn=print):
    kwargs = {}
    if args.dataset == "synthetic":
        kwargs = dict(n_train=args.train_size, n_test=args.test_size, seed=args.seed)
    return data.get_dataset(args.dataset, announce=announce, print_fn=print_fn, **kwargs)


def seed_everything(seed):
    import random

    import numpy
    random.seed(seed)
    numpy.random.seed(seed)


def print_banner(title, rows, print_fn=print):
    print_fn(title)
    for key, value in rows:
        print_fn(f"# {key}: {value}")
    print_fn("")


def not_complete(task, missing):
    """What a task whose `# PUT YOUR CODE HERE` parts left the names `missing` unset is told."""
    number = re.fullmatch(r"Task #(\d+)", task)
    task = tr("Task #{n}", n=number.group(1)) if number else task
    names = ", ".join("`" + m + "`" for m in missing)
    if len(missing) == 1:
        return tr("{task} is not complete: {names} is still None. Fill in the `# PUT YOUR CODE HERE` "
                  "part that sets it.", task=task, names=names)
    return tr("{task} is not complete: {names} are still None. Fill in the `# PUT YOUR CODE HERE` "
              "part that sets them.", task=task, names=names)


def require_done(task, **values):
    """Stop with a clear message when a `# PUT YOUR CODE HERE` part left its variable unset."""
    missing = [name for name, value in values.items() if value is None]
    if missing:
        raise NotImplementedError(not_complete(task, missing))


def instrument_phases(updater_or_optimizer, out=None, warmup=2, print_fn=print):
    """Time forward / backward / allreduce / update of every iteration, as NVTX ranges too.

    A no-op unless the environment says HANDSON_PHASES=1 (times printed at the end and written to
    `out/phases*.json`, plus NVTX ranges when CuPy imports) or HANDSON_PHASES=nvtx (NVTX ranges
    only). The profiling job scripts (jobscripts/*/run_profile.sh) set it when PROFILE=1.
    """
    return phases.enable_from_environment(updater_or_optimizer, out=out, warmup=warmup, print_fn=print_fn)
