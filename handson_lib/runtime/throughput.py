"""Throughput measured as seed 002 prints it: `Throughput: X [images/sec.] (N / T)`.

N counts the training images processed by all workers after the warm-up iterations and T is
the time their training steps took (`updater.update()`: data, forward, backward, gradient
exchange, update). The first iterations pay for memory allocation, cuDNN autotune and process
start-up, so they are excluded, as benchmarks do. What the trainer does between steps
(evaluation at the end of an epoch, logs, plots, the progress bar) is left out of T: it is the
same work whatever the number of workers, and under MultiprocessParallelUpdater it runs on the
main device alone, so counting it would measure the evaluation set's size, not data parallelism.
The wall time is kept beside it (`wall_seconds` in throughput.json).
"""

import json
import re
import sys
import time
from pathlib import Path

from handson_lib.messages import tr

#: Terminal control sequences (Chainer's ProgressBar writes `ESC[4A ESC[J` before the next line).
ANSI_ESCAPE_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")

THROUGHPUT_RE = re.compile(
    r"^Throughput: (?P<rate>[-+0-9.eE]+) \[images/sec\.\] \((?P<n>\d+) / (?P<seconds>[-+0-9.eE]+)\)\s*$",
    re.MULTILINE)


def throughput_line(n_images, seconds):
    return f"Throughput: {n_images / seconds:.2f} [images/sec.] ({n_images} / {seconds:.3f})"


def parse_throughput(text):
    """All throughput lines in `text` as dicts with rate, n, seconds (floats / int).

    Terminal control sequences are dropped first: with the progress bar on, the line is preceded by
    the bar's cursor movements."""
    text = ANSI_ESCAPE_RE.sub("", text)
    return [{"rate": float(m["rate"]), "n": int(m["n"]), "seconds": float(m["seconds"])}
            for m in THROUGHPUT_RE.finditer(text)]


class ThroughputMeter:
    """Count images and training-step seconds, ignoring the first `warmup` steps.

    `watch(updater)` times every `updater.update()`; `step(n)` after it counts the step. A meter
    that watches no updater counts the wall time from the end of the warm-up to the last step."""

    def __init__(self, warmup=2, clock=time.perf_counter):
        self.warmup = warmup
        self.clock = clock
        self.steps = 0
        self.images = 0
        self.started = None
        self.last = None
        self.step_seconds = 0.0     # the timed steps' own seconds (when an updater is watched)
        self._pending = None        # the seconds of the update() not counted yet
        self.watching = False
        if warmup == 0:
            self.started = clock()

    def watch(self, updater):
        """Time `updater.update()` from now on (an instance attribute wraps it)."""
        update = updater.update
        clock = self.clock

        def timed_update(*args, **kwargs):
            start = clock()
            try:
                return update(*args, **kwargs)
            finally:
                self._pending = clock() - start

        updater.update = timed_update
        self.watching = True
        return self

    def step(self, n_images, seconds=None):
        """Call after each iteration with the images it processed (all workers together);
        `seconds`: the step's own duration (default: the watched update's)."""
        if seconds is None:
            seconds, self._pending = self._pending, None
        now = self.clock()
        self.steps += 1
        if self.steps <= self.warmup:
            if self.steps == self.warmup:
                self.started = now
            return
        self.images += n_images
        self.last = now
        if seconds is not None:
            self.step_seconds += seconds

    @property
    def wall_seconds(self):
        if self.last is None:
            return 0.0
        return self.last - self.started

    @property
    def seconds(self):
        """T: the timed steps' own seconds when an updater is watched, else the wall time."""
        return self.step_seconds if self.watching else self.wall_seconds

    def result(self):
        """(images/sec, N, T) or None when no step was timed (run shorter than the warm-up)."""
        if self.images == 0 or self.seconds <= 0:
            return None
        return self.images / self.seconds, self.images, self.seconds


def _default_images_per_iteration(trainer):
    updater = trainer.updater
    batch = updater.get_iterator("main").batch_size
    # MultiprocessParallelUpdater (and the course's CPU backend) run one iterator per device.
    workers = len(getattr(updater, "_mpu_iterators", None) or [None])
    # ChainerMN: every rank of the multi-node optimizer's communicator trains its own batch.
    comm = getattr(updater.get_optimizer("main"), "communicator", None)
    return batch * workers * getattr(comm, "size", 1)


def throughput_extension(images_per_iteration=None, warmup=2, out=None, print_fn=print):
    """A Chainer extension that times every iteration and prints the throughput line at the end.

    images_per_iteration: images per iteration over all workers (an int, or a function of the
    trainer); by default the main iterator's batch size times the number of worker iterators
    (times the ranks of a ChainerMN multi-node optimizer's communicator).
    Pass `print_fn=None` on non-zero ranks. The figures also go to `out/throughput.json`.
    """
    from chainer import training

    meter = ThroughputMeter(warmup=warmup)

    def initialize(trainer):
        # Before trainer.run() takes `updater.update`: time the training steps themselves.
        if not meter.watching:
            meter.watch(trainer.updater)

    @training.make_extension(trigger=(1, "iteration"), priority=training.PRIORITY_READER - 1,
                             initializer=initialize)
    def throughput(trainer):
        n = images_per_iteration
        if n is None:
            n = _default_images_per_iteration(trainer)
        elif callable(n):
            n = n(trainer)
        meter.step(n)

    def finalize():
        if sys.exc_info()[0] is not None:  # the run failed: no figure to report
            return
        result = meter.result()
        if result is None:
            if print_fn:
                print_fn(tr("Throughput: not measured (the run had {steps} iterations, {warmup} of "
                            "them warm-up)", steps=meter.steps, warmup=meter.warmup))
            return
        rate, n, seconds = result
        if print_fn:
            print_fn(throughput_line(n, seconds))
        if out is not None:
            Path(out).mkdir(parents=True, exist_ok=True)
            Path(out, "throughput.json").write_text(json.dumps(
                {"images_per_sec": rate, "images": n, "seconds": seconds,
                 "wall_seconds": meter.wall_seconds,
                 "iterations_timed": meter.steps - meter.warmup, "warmup": meter.warmup}))

    throughput.finalize = finalize
    throughput.meter = meter
    return throughput
