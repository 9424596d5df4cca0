"""The instrumenting launcher: run a student's training script and record what really happened.

    python -m handson_lib.harness.observe OUTDIR SCRIPT [ARGS...]

The grader does not trust the script's printout. Before the script runs, hooks are put on the
course's data loader and on `chainer.training.Trainer`; after `trainer.run()` the launcher
writes `OUTDIR/observed.json` with:
  - the updater class and backend, the number of worker iterators;
  - a fingerprint of every training example and of every worker's shard (disjoint? complete?);
  - its own throughput measurement (warm-up excluded), independent of the script's line;
  - the accuracy of the trained model on the test set, computed here;
and the CPU backend's worker processes write their pid and final parameters next to it.
"""

import hashlib
import json
import os
import runpy
import sys
import time
import traceback
from pathlib import Path

import numpy

from handson_lib import data, settings
from handson_lib.harness import controls
from handson_lib.runtime import multigpu
from handson_lib.messages import tr
from handson_lib.runtime import phases
from handson_lib.runtime.throughput import ThroughputMeter

#: Set to 1 by the benchmarks: every rank records its phases for the breakdown table.
PHASES_ENV = settings.variable("observe_phases")


def fingerprint(example):
    """A short digest of one (x, t) example, equal for equal data."""
    h = hashlib.blake2b(digest_size=8)
    for part in (example if isinstance(example, tuple) else (example,)):
        array = numpy.ascontiguousarray(numpy.asarray(part))
        h.update(str(array.dtype).encode())
        h.update(array.tobytes())
    return h.hexdigest()


def fingerprints(dataset):
    return [fingerprint(dataset[i]) for i in range(len(dataset))]


def mpi_rank():
    """This process's rank under mpiexec (None outside MPI), read without initialising MPI."""
    for name in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        if name in os.environ:
            return int(os.environ[name])
    return None


def mpi_size():
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        if name in os.environ:
            return int(os.environ[name])
    return 1


def _plain(value):
    try:
        return float(numpy.asarray(getattr(value, "array", value)))
    except (TypeError, ValueError):
        return None


class Recorder:
    def __init__(self, outdir, seed=0):
        self.seed = seed   # the run's seed: the data's split and order follow it (harness.controls)
        self.snapshots = controls.snapshot_iterations()
        self.outdir = Path(outdir)
        self.outdir.mkdir(parents=True, exist_ok=True)
        self.rank = mpi_rank()
        self.record = {"pid": os.getpid(), "trainers": 0, "finished": False, "rank": self.rank,
                       "size": mpi_size(), "evaluations": []}
        self.datasets = []
        self.trainer = None
        self.meter = None
        self.started = None

    # ---- hooks
    def on_dataset(self, train, test, info, name_or_path=None, ndim=None, seed=0):
        self.datasets.append((train, test, info))
        self.record["dataset"] = {"name": info.name, "n_train": len(train), "n_test": len(test),
                                  "n_class": info.n_class, "shape": list(info.shape), "seed": seed,
                                  "source": info.source}

    def on_trainer(self, trainer):
        self.record["trainers"] += 1
        self.trainer = trainer
        updater = trainer.updater
        iterators = getattr(updater, "_mpu_iterators", None) or [updater.get_iterator("main")]
        self.record["updater"] = type(updater).__name__
        self.record["updater_module"] = type(updater).__module__
        optimizer = updater.get_optimizer("main")
        # ChainerMN's multi-node optimizer holds a communicator (identical parameters prove
        # nothing when every rank trained the same data from the same seed on its own).
        self.record["optimizer"] = type(optimizer).__name__
        self.record["optimizer_communicator"] = getattr(optimizer, "communicator", None) is not None
        self.record["backend"] = multigpu.BACKEND["name"]
        self.record["n_iterators"] = len(iterators)
        self.record["batch_sizes"] = [getattr(it, "batch_size", None) for it in iterators]
        self.record["shards"] = [fingerprints(it.dataset) for it in iterators]
        if self.datasets:
            self.record["train_fingerprints"] = fingerprints(self.datasets[-1][0])
        # The split and order the grader replays (controls): a record of the shards above is the script's.
        self.record["order_fixed"] = controls.fix_training_order(updater, self.seed, self.rank)
        self.meter = ThroughputMeter(warmup=2).watch(updater)
        self.phases = None
        if settings.current().observe_phases and not hasattr(updater, "phase_summary"):
            # The benchmarks' breakdown: this rank's phases (the script's own recorder if it has one).
            self.phases = vars(updater).get(phases._MARK) or phases.instrument(updater, nvtx=False)
        # Images per iteration over all workers (ranks under MPI each run this same hook).
        batch = sum(b or 0 for b in self.record["batch_sizes"]) * mpi_size()
        from chainer import training

        heartbeat = self.outdir / f"heartbeat{self.suffix}"
        model = optimizer.target

        @training.make_extension(trigger=(1, "iteration"), priority=training.PRIORITY_READER - 1)
        def observe_throughput(trainer):
            self.meter.step(batch)
            if trainer.updater.iteration in self.snapshots:
                controls.keep_parameters(self.outdir, model, trainer.updater.iteration, self.suffix)
            # The watchdog stops a run whose iterations stop, and the check shows how far it got
            # (launch.ProgressWatch).
            heartbeat.write_bytes(b"%d" % trainer.updater.iteration)

        trainer.extend(observe_throughput, name="handson_observer")

    def on_evaluation(self, local, result, wrapped=False):
        self.record["evaluations"].append({
            "local": {k: _plain(v) for k, v in (local or {}).items()},
            "reported": {k: _plain(v) for k, v in (result or {}).items()},
            "wrapped": wrapped})

    def before_run(self, trainer):
        self.record["extensions"] = sorted(trainer._extensions)
        controls.fix_evaluation_order(entry.extension for entry in trainer._extensions.values())

    def save_params(self, trainer):
        model = trainer.updater.get_optimizer("main").target
        flat = numpy.concatenate([numpy.asarray(chainer_to_numpy(p.array)).ravel()
                                  for _, p in sorted(model.namedparams())])
        numpy.savez(self.outdir / f"params{self.suffix}.npz", params=flat)

    def save_model(self, trainer):
        """The trained predictor's parameters and persistent values, for the grader to evaluate
        itself (checking/evidence.py)."""
        from chainer import serializers
        model = trainer.updater.get_optimizer("main").target
        predictor = getattr(model, "predictor", model)
        made = vars(predictor).get(MADE_WITH)
        if made is None:
            return   # not one of the course's models: the grader says so
        self.record["model"] = {"class": type(predictor).__name__, "args": list(made[0]), "kwargs": made[1]}
        target = {}
        serializers.DictionarySerializer(target).save(predictor)
        numpy.savez(self.outdir / f"model{self.suffix}.npz",
                    **{k: chainer_to_numpy(v) for k, v in target.items() if v is not None})

    @property
    def suffix(self):
        return "" if self.rank is None else f"-rank{self.rank}"

    def after_run(self, trainer, seconds):
        result = self.meter.result() if self.meter else None
        self.record["run_seconds"] = seconds
        self.record["iterations"] = trainer.updater.iteration
        self.record["throughput"] = None if result is None else {
            "images_per_sec": result[0], "images": result[1], "seconds": result[2],
            "wall_seconds": self.meter.wall_seconds}
        if result is not None:
            timed = self.meter.steps - self.meter.warmup
            self.record["throughput"]["between_steps_s"] = (self.meter.wall_seconds - result[2]) / timed
        self.record["phases"] = self.phase_record(trainer)
        self.record["accuracy"] = self.test_accuracy(trainer)
        if self.rank is not None:
            self.save_params(trainer)
        if not self.rank:
            self.save_model(trainer)
        self.record["finished"] = True

    def phase_record(self, trainer):
        """The stand-in's own phase medians per process, or this rank's phases (PHASES_ENV)."""
        summary = getattr(trainer.updater, "phase_summary", None)
        if summary is not None:
            return {"standin": summary(self.meter.warmup)}
        if self.phases is None:
            return None
        timed = self.phases.timed(self.meter.warmup)
        return {"rank": self.rank, "summary": phases.summarize(timed, self.meter.warmup),
                "iterations": timed}

    def test_accuracy(self, trainer):
        import chainer
        import chainer.functions as F
        if not self.datasets:
            return None
        test = self.datasets[-1][1]
        model = trainer.updater.get_optimizer("main").target
        predictor = getattr(model, "predictor", model)
        correct = 0
        with chainer.using_config("train", False), chainer.no_backprop_mode():
            for start in range(0, len(test), 256):
                x, t = chainer.dataset.concat_examples(test[start:start + 256])
                device = chainer.backend.get_device_from_array(next(model.params()).array)
                y = predictor(device.send(x))
                correct += int((F.argmax(y, axis=1).array == device.send(t)).sum())
        return correct / len(test)

    def save(self, error=None):
        self.record["error"] = error
        (self.outdir / f"observed{self.suffix}.json").write_text(json.dumps(self.record))


#: The attribute where a course model keeps the arguments it was made with (copies keep it).
MADE_WITH = "_handson_made_with"


def _remember_arguments(model_class):
    original = model_class.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        object.__setattr__(self, MADE_WITH, (args, kwargs))

    model_class.__init__ = init


def chainer_to_numpy(array):
    from chainer import backend
    return backend.CpuDevice().send(array)


def install_hooks(recorder):
    import chainer
    from chainer import training
    from chainer.training import extensions

    original_get = data.get_dataset

    def get_dataset(name_or_path=None, **kwargs):
        train, test, info = original_get(name_or_path, **kwargs)
        recorder.on_dataset(train, test, info, name_or_path, kwargs.get("ndim"), kwargs.get("seed", 0))
        return train, test, info

    data.get_dataset = get_dataset

    from handson_lib.runtime import models
    for model_class in models.CLASSES.values():
        _remember_arguments(model_class)

    original_init = training.Trainer.__init__
    original_run = training.Trainer.run

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        recorder.on_trainer(self)

    original_evaluate = extensions.Evaluator.evaluate
    original_call = extensions.Evaluator.__call__
    last_local = {}

    def evaluate(self):
        result = original_evaluate(self)
        last_local["value"] = dict(result)
        return result

    def call(self, trainer=None):
        last_local.clear()
        result = original_call(self, trainer)
        # create_multi_node_evaluator replaces the instance's `evaluate` by one that aggregates.
        recorder.on_evaluation(last_local.get("value"), result, wrapped="evaluate" in vars(self))
        return result

    extensions.Evaluator.evaluate = evaluate
    extensions.Evaluator.__call__ = call
    if not settings.current().grader.plot_reports:
        # Registered as the script asks (the rank-0 check reads them), drawn never: nobody looks
        # at an autograded run's PNGs, and drawing two every epoch cost rank 0 about 1.7 s of CPU
        # in a 4-epoch run of Task #2 while the other ranks waited for it.
        extensions.PlotReport.__call__ = lambda self, trainer: None

    def run(self, *args, **kwargs):
        recorder.before_run(self)
        started = time.perf_counter()
        original_run(self, *args, **kwargs)
        recorder.after_run(self, time.perf_counter() - started)

    training.Trainer.__init__ = init
    training.Trainer.run = run
    chainer.training.Trainer = training.Trainer


def script_seed(args):
    """The --seed the script is run with (its default, 0, when none): the grader gives every run its own."""
    args = list(args)
    for i, arg in enumerate(args[:-1]):
        if arg == "--seed":
            try:
                return int(args[i + 1])
            except ValueError:
                return 0
    return 0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    outdir, script, script_args = argv[0], argv[1], argv[2:]
    settings.hand_down(observe_dir=str(Path(outdir).resolve()))
    seed = script_seed(script_args)
    controls.install(seed)
    recorder = Recorder(outdir, seed)
    install_hooks(recorder)
    sys.argv = [script, *script_args]
    sys.path.insert(0, str(Path(script).resolve().parent))
    error = None
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            error = f"SystemExit: {exc.code}"
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    finally:
        recorder.save(error)
    if error and recorder.rank is not None and mpi_size() > 1:
        # The other ranks would wait forever for this one in their next collective.
        sys.stderr.write(tr("[rank {rank}] {error}; aborting all ranks", rank=recorder.rank, error=error) + "\n")
        sys.stderr.flush()
        from mpi4py import MPI
        MPI.COMM_WORLD.Abort(1)
    return 1 if error else 0


if __name__ == "__main__":
    sys.exit(main())
