"""What the grader fixes inside every observed or stepped run, so that what the run trained can be
set beside the grader's own replay of the same training (handson_lib.checking.replay):

  - which examples each worker or rank gets: `chainer.datasets.split_dataset_n_random` (and
    `split_dataset_random`, a split in two) split by the run's seed, whatever seed the script
    passes; `chainermn.scatter_dataset` shuffles by it, whatever the script asks (`split_order`,
    `scatter_order`);
  - the order in which each training iterator visits its examples: epoch by epoch from the run's
    seed and the iterator's place (the worker's index, the rank), set on the trainer's iterators
    when the trainer is made (`TrainingOrder`);
  - an evaluator's iterator goes through its examples in order, so the grader can compute what
    each evaluator reports;
  - a ShuffleOrderSampler made without a random state of its own draws from one of its own, never
    from numpy's global generator: the model's first weights, drawn from that generator after
    `runtime.seed_everything`, do not depend on how many iterators the script made.

And `keep_parameters`: a copy of the model's parameters at the iterations the grader names
(HANDSON_OBSERVE_SNAPSHOTS), which it compares with its replay. Nothing here decides anything:
what a run keeps is a claim the grader checks.
"""

import os

import numpy

from handson_lib import settings

#: The streams of a run's seed: each fixed choice draws from its own.
SPLIT, SCATTER, ORDER, SAMPLER = 1, 2, 3, 4


def derived(seed, *stream):
    """A 32-bit seed for one stream of the run's seed (numpy's SeedSequence: no two streams meet)."""
    return int(numpy.random.SeedSequence([int(seed) % 2 ** 32, *stream]).generate_state(1)[0])


def split_order(seed, n_examples):
    """The permutation split_dataset_n_random splits by, in a run of `seed`."""
    return numpy.random.RandomState(derived(seed, SPLIT)).permutation(n_examples)


def scatter_order(seed, n_examples):
    """The permutation scatter_dataset scatters by, in a run of `seed` (train and test alike)."""
    return numpy.random.RandomState(derived(seed, SCATTER)).permutation(n_examples)


class TrainingOrder:
    """The order sampler of training iterator `place` in a run of `seed`: the k-th call (epoch k)
    returns a permutation drawn from its own stream."""

    def __init__(self, seed, place):
        self.seed, self.place, self.calls = seed, place, 0

    def __call__(self, current_order, current_position):
        order = numpy.random.RandomState(derived(self.seed, ORDER, self.place, self.calls)).permutation(
            len(current_order))
        self.calls += 1
        return order


def parameters(model):
    """The model's parameters, flat, in name order (float32 on the host)."""
    from chainer import backend
    cpu = backend.CpuDevice()
    return numpy.concatenate([numpy.asarray(cpu.send(p.array), dtype=numpy.float32).ravel()
                              for _, p in sorted(model.namedparams()) if p.array is not None])


def snapshot_iterations():
    """The iterations at which a run keeps its parameters (HANDSON_OBSERVE_SNAPSHOTS)."""
    return set(settings.current().observe_snapshots)


def snapshot_name(iteration, who=""):
    """The file a run keeps its parameters of `iteration` in: `who` is "", "-rankR" or "-workerI"."""
    return f"snapshot{who}-{iteration}.npz"


def keep_parameters(folder, model, iteration, who=""):
    numpy.savez(os.path.join(folder, snapshot_name(iteration, who)), params=parameters(model),
                iteration=iteration)


def _set_order(iterator, sampler):
    """Give `iterator` the order of `sampler` (None: in order) from its start; False where it has none
    to set (an iterator that is none of Chainer's)."""
    if not hasattr(iterator, "order_sampler") or not hasattr(iterator, "reset"):
        return False
    iterator.order_sampler = sampler
    loop = getattr(iterator, "_prefetch_loop", None)   # MultiprocessIterator's keeps its own reference
    if loop is not None and hasattr(loop, "order_sampler"):
        loop.order_sampler = sampler
    iterator.reset()
    return True


def training_iterators(updater):
    """The iterators a trainer's updater trains on: one per device under the stand-in (and
    Chainer's MultiprocessParallelUpdater), else its main one."""
    return list(getattr(updater, "_mpu_iterators", None) or [updater.get_iterator("main")])


def fix_training_order(updater, seed, rank=None):
    """Set the order of the updater's training iterators: the place of each is its worker index
    (one process), or the rank (MPI)."""
    iterators = training_iterators(updater)
    return [_set_order(it, TrainingOrder(seed, rank if rank is not None else place))
            for place, it in enumerate(iterators)]


def fix_evaluation_order(extensions):
    """Every evaluator's iterators go through their examples in order."""
    from chainer.training.extensions import Evaluator
    for extension in extensions:
        if isinstance(extension, Evaluator):
            for iterator in extension._iterators.values():
                _set_order(iterator, None)


def install(seed):
    """Fix the data's split and order in this process, for a run of `seed` (before the script runs).
    Returns what undoes it (for a test that installs it in its own process)."""
    import chainer
    from chainer.datasets import sub_dataset
    from chainer.iterators import order_samplers

    undo = [(sub_dataset, "split_dataset_n_random"), (chainer.datasets, "split_dataset_n_random"),
            (sub_dataset, "split_dataset_random"), (chainer.datasets, "split_dataset_random"),
            (order_samplers.ShuffleOrderSampler, "__init__")]
    undo = [(owner, name, getattr(owner, name)) for owner, name in undo]
    original_n, original_two = sub_dataset.split_dataset_n_random, sub_dataset.split_dataset_random

    def split_dataset_n_random(dataset, n, seed=None):
        return original_n(dataset, n, seed=derived(run_seed, SPLIT))

    def split_dataset_random(dataset, first_size, seed=None):
        return original_two(dataset, first_size, seed=derived(run_seed, SPLIT))

    run_seed = seed
    for fixed, original in ((split_dataset_n_random, original_n), (split_dataset_random, original_two)):
        fixed.__doc__ = original.__doc__
        setattr(sub_dataset, fixed.__name__, fixed)
        setattr(chainer.datasets, fixed.__name__, fixed)

    original_init = order_samplers.ShuffleOrderSampler.__init__
    made = [0]

    def sampler_init(self, random_state=None):
        if random_state is None:
            made[0] += 1
            random_state = numpy.random.RandomState(derived(run_seed, SAMPLER, made[0]))
        original_init(self, random_state)

    order_samplers.ShuffleOrderSampler.__init__ = sampler_init
    undo += _fix_scatter(run_seed)

    def undone():
        for owner, name, value in undo:
            setattr(owner, name, value)
    return undone


def _fix_scatter(run_seed):
    """chainermn.scatter_dataset shuffles by the run's seed, whatever the script asks (where
    ChainerMN is installed)."""
    try:
        import chainermn
        from chainermn.datasets import scatter
    except ImportError:
        return []
    original = scatter.scatter_dataset
    undo = [(scatter, "scatter_dataset", original), (chainermn, "scatter_dataset", chainermn.scatter_dataset),
            (chainermn.datasets, "scatter_dataset", chainermn.datasets.scatter_dataset)]

    def scatter_dataset(dataset, comm, root=0, shuffle=False, seed=None, max_buf_len=256 * 1024 * 1024, *,
                        force_equal_length=True):
        return original(dataset, comm, root=root, shuffle=True, seed=derived(run_seed, SCATTER),
                        max_buf_len=max_buf_len, force_equal_length=force_equal_length)

    scatter_dataset.__doc__ = original.__doc__
    scatter.scatter_dataset = scatter_dataset
    chainermn.scatter_dataset = scatter_dataset
    chainermn.datasets.scatter_dataset = scatter_dataset
    return undo
