"""Paired timing: the reference's and a student's training step timed in turn, step by step.

    mpiexec -n N python -m handson_lib.harness.paired OUTDIR STEPS REFERENCE STUDENT [ARGS...]

Each rank runs REFERENCE with ARGS until it calls `trainer.run()`, then STUDENT likewise (one
after the other, so that the ranks create their communicators in the same order); neither
trainer runs on its own. This launcher then calls the two updaters in turn, A B B A A B ...,
timing each `updater.update()` (forward, backward, allreduce, update): the machine's drift and a
neighbour's burst weigh on both alike, which two runs minutes apart cannot promise on a shared
machine. Start-up, evaluation and reports are not timed: correctness, reports only on rank 0
included, is judged before (handson_lib.checking.checks); this launcher only times.

Rank 0 writes OUTDIR/paired-rank0.json: {"steps": {"reference": [s, ...], "student": [...]},
"images_per_step": {...}, "error": ...}; every rank touches OUTDIR/heartbeat-rankR on each step
(the grader's watchdog stops a launch whose steps stop).
"""

import json
import runpy
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from handson_lib.harness.observe import mpi_rank, mpi_size

WHO = ("reference", "student")

#: Steps of each trainer run before timing starts (allocation, first calls).
WARMUP_STEPS = 2


def step_order(step):
    """Who goes first at `step`: A B, B A, A B, ... (a drift within a pair cancels out)."""
    return WHO if step % 2 == 0 else WHO[::-1]


class Capture:
    """One script run in its own thread until its `trainer.run()`, which waits here instead of
    training; the trainer is handed to the timing loop."""

    def __init__(self, script, args, outdir):
        self.script, self.args, self.outdir = str(script), list(args), str(outdir)
        self.trainer, self.error = None, None
        self.ready, self.release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.capture = self

    def _main(self):
        sys.argv = [self.script, *self.args, "--out", self.outdir]
        try:
            runpy.run_path(self.script, run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (None, 0):
                self.error = f"SystemExit: {exc.code}"
        except BaseException as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
        finally:
            self.ready.set()

    def start(self):
        """Run the script up to its trainer; the trainer, or None (see `error`)."""
        self.thread.start()
        self.ready.wait()
        if self.trainer is None and self.error is None:
            self.error = "the script ended without calling trainer.run()"
        return self.trainer

    def finish(self):
        self.release.set()
        self.thread.join(timeout=60)


def install_hook():
    """Trainer.run hands the trainer to the capture of the calling thread and waits."""
    from chainer import training

    def run(trainer, *args, **kwargs):
        capture = getattr(threading.current_thread(), "capture", None)
        if capture is None:
            raise RuntimeError("trainer.run() outside a captured script")
        capture.trainer = trainer
        capture.ready.set()
        capture.release.wait()

    training.Trainer.run = run


def images_per_step(trainer):
    updater = trainer.updater
    comm = getattr(updater.get_optimizer("main"), "communicator", None)
    return updater.get_iterator("main").batch_size * getattr(comm, "size", mpi_size())


def time_steps(trainers, steps, heartbeat):
    """{who: [seconds of each timed step]} with the updaters called in turn."""
    times = {who: [] for who in trainers}
    for step in range(WARMUP_STEPS + steps):
        for who in step_order(step):
            updater = trainers[who].updater
            device = getattr(updater, "device", None)
            if device is not None:
                device.use()  # a GPU is current per thread: the script chose it in its own thread
            started = time.perf_counter()
            updater.update()
            if step >= WARMUP_STEPS:
                times[who].append(time.perf_counter() - started)
            heartbeat.touch()
    return times


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    outdir, steps, scripts, args = Path(argv[0]), int(argv[1]), dict(zip(WHO, argv[2:4])), argv[4:]
    outdir.mkdir(parents=True, exist_ok=True)
    rank = mpi_rank() or 0
    record = {"rank": rank, "size": mpi_size(), "steps": {}, "images_per_step": {}, "error": None}
    for path in set(scripts.values()):
        sys.path.insert(0, str(Path(path).resolve().parent))
    install_hook()
    captures = {}
    with tempfile.TemporaryDirectory(prefix="handson-paired-") as tmp:
        try:
            trainers = {}
            for who in WHO:
                captures[who] = Capture(scripts[who], args, Path(tmp) / who)
                trainers[who] = captures[who].start()
                if trainers[who] is None:
                    raise RuntimeError(f"the {who}'s script: {captures[who].error}")
            record["images_per_step"] = {who: images_per_step(t) for who, t in trainers.items()}
            record["steps"] = time_steps(trainers, steps, outdir / f"heartbeat-rank{rank}")
        except BaseException as exc:
            record["error"] = record["error"] or f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
        finally:
            for capture in captures.values():
                capture.finish()
    (outdir / f"paired-rank{rank}.json").write_text(json.dumps(record))
    if record["error"] and mpi_size() > 1:
        sys.stderr.flush()
        from mpi4py import MPI
        MPI.COMM_WORLD.Abort(1)  # the other ranks would wait for this one forever
    return 1 if record["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
