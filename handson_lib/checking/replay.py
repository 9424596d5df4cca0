"""The grader's own replay of a task's training (trusted side: it runs in the grader's process,
never in a run), to set beside what a student's run trained.

A run under the grader's launcher splits and orders its data as harness.controls fixes it from
the run's seed, and keeps its parameters at the iterations of the grader's `Plan`. The grader
computes here, in one process, what data parallel training computes on that data: Task #1 as
MultiprocessParallelUpdater does it (each device's gradient on its own minibatch, summed, the
learning rate divided by the devices), Task #2 and the MNIST conversion as ChainerMN's multi-node
optimizer does (the first update only broadcasts rank 0's parameters, later ones average the
ranks' gradients):

  - from the start, up to an early iteration (`Plan.early`): the parameters there. Rounding that
    differs (MPI adds three ranks' gradients in an order of its own) grows step by step in a
    training, so the grader compares the whole path only where it is short;
  - one step, at each iteration j of `Plan.steps`: from the run's own parameters at j - 1 and j
    (MomentumSGD's velocity is their difference), the parameters one update of data parallel
    training on the grader's minibatches of iteration j + 1 gives. A step is compared with the
    run's own, whatever rounding came before;
  - what each evaluator of the ranks reports after the first epoch, with the run's parameters there.

A run that trained otherwise (one process, ranks alone, a shard given twice, a broadcast at the end)
misses them (handson_lib.verdicts.structure compares). The replay uses the course's own pieces
(its models and data, Chainer's iterators and optimizers), not the reference solutions.
"""

import argparse
import contextlib
import functools
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy

from handson_lib.harness import controls

#: How the workers' gradients are combined: MultiprocessParallelUpdater's sum ("devices"), or
#: ChainerMN's mean over the ranks ("ranks").
DEVICES, RANKS = "devices", "ranks"


@dataclass(frozen=True)
class Recipe:
    """How a task's script trains, as far as the replay needs it: how it combines gradients, its
    flags' defaults, and its model."""
    combine: str
    batchsize: int = 32
    epoch: int = 4
    model: str = "cnn"
    dataset: str = "synthetic"
    lr: float = None
    mnist_units: bool = False    # the MNIST script's model: Classifier(MLP(--unit, 10))

    def arguments(self, args):
        """The script's flags as its parser reads `args` (the grader's own)."""
        from handson_lib.runtime import training
        parser = argparse.ArgumentParser(add_help=False)
        training.add_common_arguments(parser, batchsize=self.batchsize, epoch=self.epoch, model=self.model)
        parser.set_defaults(dataset=self.dataset, **({"lr": self.lr} if self.lr is not None else {}))
        parser.add_argument("--unit", "-u", type=int, default=1000)
        known, _ = parser.parse_known_args([str(a) for a in args])
        return known

    def model_of(self, flags, n_class):
        import chainer
        from handson_lib.runtime import models
        if self.mnist_units:
            return chainer.links.Classifier(models.MLP(flags.unit, 10))
        return models.get_model(flags.model, n_class=n_class)


#: Each task's training (handson_lib.tasks), as its reference script trains.
RECIPES = {
    "multi-gpu": Recipe(DEVICES),
    "multi-node": Recipe(RANKS),
    "mnist-multi-node": Recipe(RANKS, batchsize=100, epoch=20, model="mlp", dataset="digits", lr=0.05,
                               mnist_units=True),
}


@dataclass(frozen=True)
class Plan:
    """The iterations at which the grader compares a run with its replay: `early`, on the path from
    the start; each j of `steps`, one update from the run's own parameters at j - 1 and j; `late`,
    on the path from the start again, within the looser bound that rounding grown over that many
    steps needs (a timed launch's last step: every step it took counts)."""
    early: int
    steps: tuple
    late: int = None

    @property
    def iterations(self):
        """Every iteration at which the run keeps its parameters."""
        late = () if self.late is None else (self.late,)
        return tuple(sorted({self.early, *late, *(k for j in self.steps for k in (j - 1, j, j + 1))}))


@dataclass
class Replayed:
    """What the grader computed: the parameters at `plan.early` from the start ({iteration:
    array}); for each j of `plan.steps`, the parameters one update after the run's own at j
    ({j + 1: array}); the iteration that ended the first epoch, and the evaluators' reports there
    ({"ranks": [{key: mean}], "mean", "mean_strict", "whole"}; None for "devices" or where the run
    kept no parameters there)."""
    plan: Plan
    parameters: dict
    stepped: dict
    first_epoch: int
    evaluation: dict = None


def _shards(recipe, train, width, seed):
    from chainer.datasets import SubDataset
    if recipe.combine == DEVICES:
        order = controls.split_order(seed, len(train))
        size = len(train) // width
        return [SubDataset(train, size * i, size * (i + 1), order) for i in range(width)]
    return _scattered(train, width, seed)


def _scattered(dataset, width, seed, equal_length=True):
    """ChainerMN's scatter_dataset of `dataset` over `width` ranks, in the order harness.controls
    fixes (`equal_length`: its force_equal_length)."""
    from chainer.datasets import SubDataset
    from chainermn.datasets.scatter import _scatter_index
    order = controls.scatter_order(seed, len(dataset))
    return [SubDataset(dataset, b, e, order) for _, b, e in _scatter_index(len(dataset), width, equal_length)]


def _gradients(model, batch):
    """This minibatch's gradient of the model's loss (the model keeps it in its parameters' grad)."""
    from chainer.dataset import convert
    in_arrays = convert.concat_examples(batch)
    model.cleargrads()
    loss = model(*in_arrays)
    loss.backward()


def _flat_gradients(model):
    return numpy.concatenate([p.grad.ravel() for _, p in sorted(model.namedparams())])


def _add_flat(model, flat):
    """Each parameter's grad += its part of `flat`."""
    offset = 0
    for _, param in sorted(model.namedparams()):
        part = flat[offset:offset + param.size].reshape(param.shape)
        offset += param.size
        param.grad += part
    return model


def _devices_step(model, optimizer, batches):
    """MultiprocessParallelUpdater's step (the course's stand-in computes it so): the main device's
    gradient plus the sum of the others', one update."""
    others = []
    for batch in batches[1:]:
        _gradients(model, batch)
        others.append(_flat_gradients(model).copy())
    _gradients(model, batches[0])
    if others:
        _add_flat(model, numpy.stack(others).sum(axis=0))
    optimizer.update()


def _ranks_step(model, optimizer, batches, first):
    """ChainerMN's multi-node optimizer: the first update broadcasts rank 0's parameters (none
    change); each later one averages the ranks' gradients (their sum, times 1 / ranks)."""
    if first:
        _gradients(model, batches[0])   # each rank's first forward sets the lazy parameters alike
        return
    flats = []
    for batch in batches:
        _gradients(model, batch)
        flats.append(_flat_gradients(model).copy())
    total = flats[0]
    for flat in flats[1:]:
        total = total + flat
    total *= 1.0 / len(flats)
    model.cleargrads()
    offset = 0
    for _, param in sorted(model.namedparams()):
        param.grad = total[offset:offset + param.size].reshape(param.shape).copy()
        offset += param.size
    optimizer.update()


def _initialise_lazy(model, example):
    """The stand-in's first forward before its workers start (lazy parameters get their shape)."""
    import chainer
    from chainer.dataset import convert
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        model(*convert.concat_examples([example]))


def _evaluate(model, dataset, batchsize):
    """{key: mean over its minibatches} of an Evaluator on `dataset` in order (Chainer's Evaluator
    reports the mean of the minibatches' values)."""
    import chainer
    from chainer import reporter as reporter_module
    from chainer.dataset import convert
    from chainer.iterators import SerialIterator
    summary = reporter_module.DictSummary()
    reporter = reporter_module.Reporter()
    reporter.add_observer("main", model)
    for batch in SerialIterator(dataset, batchsize, repeat=False, shuffle=False):
        observation = {}
        with reporter.scope(observation), chainer.using_config("train", False), chainer.no_backprop_mode():
            model(*convert.concat_examples(batch))
        summary.add(observation)
    return {f"validation/{k}": float(v) for k, v in summary.compute_mean().items()}


def _evaluations(model, test, width, batchsize, seed):
    """What the ranks' evaluators report: each rank's own part, their mean (the multi-node
    evaluator's; "mean_strict" where the test set was scattered without equal lengths), and the
    whole test set on one rank."""
    def mean_of(reports):
        return {k: float(numpy.mean([r[k] for r in reports])) for k in reports[0]}

    ranks = [_evaluate(model, shard, batchsize) for shard in _scattered(test, width, seed)]
    strict = [_evaluate(model, shard, batchsize) for shard in _scattered(test, width, seed, equal_length=False)]
    return {"ranks": ranks, "mean": mean_of(ranks), "mean_strict": mean_of(strict),
            "whole": _evaluate(model, test, batchsize)}


class _Training:
    """The task's training as the run's arguments ask it, on the grader's split and order of the data:
    its model, optimizer, shards and iterators (one per worker or rank), at iteration 0."""

    def __init__(self, task, args, width, seed):
        import chainer
        from chainer.iterators import SerialIterator

        from handson_lib import data
        from handson_lib.runtime import training
        self.recipe, self.width, self.seed = RECIPES[task], width, seed
        flags = self.recipe.arguments(args)
        self.batchsize = flags.batchsize
        training.seed_everything(seed)
        kwargs = dict(n_train=flags.train_size, n_test=flags.test_size, seed=seed) if flags.dataset == "synthetic" else {}
        train, self.test, info = data.get_dataset(flags.dataset, announce=False, **kwargs)
        self.model = self.recipe.model_of(flags, info.n_class)
        self.optimizer = chainer.optimizers.MomentumSGD(lr=flags.lr)
        self.optimizer.setup(self.model)
        shards = _shards(self.recipe, train, width, seed)
        self.iterators = [SerialIterator(shard, flags.batchsize, order_sampler=controls.TrainingOrder(seed, place))
                          for place, shard in enumerate(shards)]
        if self.devices:
            self.optimizer.lr /= width
        _initialise_lazy(self.model, shards[0][0])   # lazy parameters get their shape (and, first, their values)
        self.iteration = 0

    @property
    def devices(self):
        return self.recipe.combine == DEVICES

    def batches(self):
        self.iteration += 1
        return [next(it) for it in self.iterators]

    def step(self, batches):
        if self.devices:
            _devices_step(self.model, self.optimizer, batches)
        else:
            _ranks_step(self.model, self.optimizer, batches, self.iteration == 1)

    @contextlib.contextmanager
    def path_kept(self):
        """Within it the model may take other parameters (a run's); after it, its own parameters and
        optimizer state are back."""
        flat = controls.parameters(self.model)
        states = {name: None if param.update_rule.state is None else
                  {k: numpy.array(v, copy=True) for k, v in param.update_rule.state.items()}
                  for name, param in self.model.namedparams()}
        try:
            yield
        finally:
            self.load(flat)
            for name, param in self.model.namedparams():
                rule = param.update_rule
                if states[name] is None:
                    rule._state = None
                else:
                    for k, v in states[name].items():
                        rule.state[k][...] = v

    def load(self, flat):
        """Set the model's parameters to `flat` (the order of harness.controls.parameters)."""
        offset = 0
        for _, param in sorted(self.model.namedparams()):
            param.array[...] = numpy.asarray(flat[offset:offset + param.size], dtype=param.dtype).reshape(param.shape)
            offset += param.size

    def one_step(self, before, now, batches):
        """The parameters one update after `now` on `batches`, MomentumSGD's velocity being
        `now - before` (its rule: v = momentum * v - lr * g; p = p + v)."""
        self.load(now)
        velocity = numpy.asarray(now, numpy.float32) - numpy.asarray(before, numpy.float32)
        offset = 0
        for _, param in sorted(self.model.namedparams()):
            rule = param.update_rule
            if rule.state is None:   # no update yet: the rule's state is made at its first
                rule._state = {}
                rule.init_state(param)
            rule.state["v"][...] = velocity[offset:offset + param.size].reshape(param.shape)
            offset += param.size
        self.step(batches)
        return controls.parameters(self.model)


def _reference_kept(kept, devices, size):
    """{iteration: parameters} the one-step replay starts from, as the main process or rank 0 kept
    them (a claim: only flat arrays of numbers of the model's size are taken)."""
    own = (kept or {}).get("main" if devices else "rank0") or {}
    return {k: a for k, a in own.items() if isinstance(a, numpy.ndarray) and a.shape == (size,)
            and numpy.issubdtype(a.dtype, numpy.floating) and numpy.all(numpy.isfinite(a))}


def replay(task, args, width, seed, plan, kept=None):
    """Replay `task` (RECIPES) with the script's arguments `args` on `width` devices or ranks and
    the run's `seed`: the path from the start to `plan.early`, and one step from the run's own kept
    parameters (`kept`, {who: {iteration: array}}) at each j of `plan.steps` (Replayed)."""
    import time
    import chainer
    from threadpoolctl import threadpool_limits
    from handson_lib.checking.runs import log_part

    started = time.monotonic()
    with threadpool_limits(limits=1), chainer.using_config("train", True):
        training = _Training(task, args, width, seed)
        size = controls.parameters(training.model).size
        # Only the iterations the plan asked for: a run cannot hand in parameters elsewhere.
        own = {k: a for k, a in _reference_kept(kept, training.devices, size).items() if k in plan.iterations}
        stepped, first_epoch, evaluation = {}, None, None
        path_to = max(plan.early, plan.late or 0)   # one-step checks load the run's parameters: only after it
        # The path from the start is the same for every student of a session (its seed, arguments
        # and plan): computed by the first, kept where only the grader reads.
        kept_path = SessionPaths.current()
        parameters = kept_path.get(task, args, width, seed, plan, size) if kept_path else None
        computed = parameters is None
        parameters = {} if computed else parameters
        for iteration in range(1, max(plan.iterations) + 1):
            batches = training.batches()
            if iteration <= path_to and computed:
                training.step(batches)
                if iteration in (plan.early, plan.late):
                    parameters[iteration] = controls.parameters(training.model)
            # What the run kept is loaded for a step or an evaluation, never into the path: the path
            # goes on from its own parameters (a student's must not reach the next students').
            j = iteration - 1
            if j in plan.steps and j in own and j - 1 in own:
                with training.path_kept():
                    stepped[iteration] = training.one_step(own[j - 1], own[j], batches)
            if first_epoch is None and training.iterators[0].is_new_epoch:
                first_epoch = iteration
                if not training.devices and iteration in own:
                    with training.path_kept():
                        training.load(own[iteration])
                        evaluation = _evaluations(training.model, training.test, width, training.batchsize, seed)
    if computed and kept_path:
        kept_path.put(task, args, width, seed, plan, parameters)
    log_part(f"{task}: the grader's replay on {width}", time.monotonic() - started)   # where grading time goes
    return Replayed(plan, parameters, stepped, first_epoch, evaluation)


class SessionPaths:
    """The replays' paths from the start ({iteration: parameters} at a plan's `early` and `late`)
    kept in a grading session's reference cache: the grader's alone (the sandbox does not see it),
    the same for every student of the session, so computed once (the timed launches' 18 steps
    on 2 and 1 ranks: about 4 CPU-seconds a correct student)."""

    def __init__(self, folder):
        self.folder = Path(folder)

    @classmethod
    def current(cls):
        """The session's (HANDSON_REFERENCE_CACHE, where this process may write it), or None."""
        from handson_lib import settings
        cache = settings.current().grader.reference_cache
        return cls(cache) if cache and os.access(cache, os.W_OK) else None

    def _path(self, task, args, width, seed, plan):
        key = repr((PATH_FORMAT, _code_digest(), task, [str(a) for a in args], int(width), int(seed), plan.early,
                    plan.late))
        return self.folder / f"replay-path-{hashlib.sha256(key.encode()).hexdigest()[:16]}.npz"

    def get(self, task, args, width, seed, plan, size):
        """The kept path of this replay, or None (none kept, or not the model's parameters)."""
        wanted = {plan.early, *(() if plan.late is None else (plan.late,))}
        try:
            with numpy.load(self._path(task, args, width, seed, plan), allow_pickle=False) as arrays:
                kept = {int(name[1:]): numpy.array(arrays[name]) for name in arrays.files}
        except Exception:   # none kept, or not a whole file of ours: computed again
            return None
        if set(kept) != wanted or any(a.shape != (size,) or not numpy.all(numpy.isfinite(a)) for a in kept.values()):
            return None
        return kept

    def put(self, task, args, width, seed, plan, parameters):
        """Keep a path computed from the start alone (no run's parameters ever reach it); best
        effort: a full disk costs the next students the replay, never this one its grade."""
        path = self._path(task, args, width, seed, plan)
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".npz")
            with os.fdopen(fd, "wb") as f:
                numpy.savez(f, **{f"p{iteration}": array for iteration, array in parameters.items()})
            os.replace(tmp, path)   # whole or not at all: students graded beside it may read it now
        except OSError:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


@functools.lru_cache(maxsize=1)
def _code_digest():
    """A digest of the code a replay runs (this module, the launcher's controls, the models, the
    data, the training's flags): a kept path is never one an earlier version of the course computed
    (a grading service keeps its references from one session to the next)."""
    root = Path(__file__).resolve().parent.parent
    files = [Path(__file__).resolve(), root / "harness" / "controls.py", *sorted((root / "runtime").glob("*.py")),
             *sorted((root / "data").glob("*.py"))]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        with contextlib.suppress(OSError):
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


#: Bumped when what a kept path holds changes.
PATH_FORMAT = 1


def _epoch(task, args, width):
    """(iterations of one epoch, iterations of the whole run) of a run of `task` with `args` on
    `width` devices or ranks: each one's shard in minibatches."""
    from handson_lib import data
    recipe = RECIPES[task]
    flags = recipe.arguments(args)
    if flags.dataset == "synthetic":
        n_train = flags.train_size
    else:
        n_train = len(data.get_dataset(flags.dataset, announce=False)[0])
    shard = n_train // width if recipe.combine == DEVICES else -(-n_train // width)
    return -(-shard // flags.batchsize), -(-flags.epoch * shard // flags.batchsize)


def snapshot_plan(task, args, width, seed):
    """The grader's Plan for a run, drawn from its seed: the path compared up to an early iteration
    (3 to 5: rounding has not grown yet); one step checked after it within the first epoch, and one
    at its end or just after it (its evaluation included); none past the run's end."""
    first, total = _epoch(task, args, width)
    pick = numpy.random.default_rng([int(seed) % 2 ** 32, 99])
    late = max(2, min(total, first + int(pick.integers(0, 3))) - 1)
    early = max(1, min(late, int(pick.integers(3, 6))))
    steps = {late}
    if late - 1 > early:
        steps.add(int(pick.integers(early, late - 1)))
    return Plan(early, tuple(sorted(steps)))


def probe_iteration(task, args, width, plan):
    """The iterations at which the grader stops a run's other processes for a moment (launch.
    DependenceProbe): drawn now, never told to the run; after the first steps and before the run's
    end, away from the iterations of the grader's `plan` (a run that averaged only where it is asked
    for its parameters would wait for the others there). One anywhere in that span, and one after
    the plan's last iteration where the run is long enough: a run that trains together up to the
    iterations the grader compares and alone after them meets that one, however short the run."""
    import secrets
    _, total = _epoch(task, args, width)
    span = range(plan.early + 2, max(plan.early + 3, total - 3))   # the end has collectives of its own
    away = [k for k in span if all(abs(k - kept) > 3 for kept in plan.iterations)]
    choices = away or list(span)
    drawn = [choices[secrets.randbelow(len(choices))]]
    after = [k for k in choices if k > max(plan.iterations) + 3 and k != drawn[0]]
    if after:
        drawn.append(after[secrets.randbelow(len(after))])
    return tuple(sorted(drawn))


def timing_plan(steps):
    """The Plan of a timed launch that took `steps` training steps: the path from the start compared
    at step 3 and at its last step (harness.stepper keeps its parameters there): a step that trained
    less than its minibatches, anywhere among them, shows at the end."""
    return Plan(min(3, steps), (), late=steps)
