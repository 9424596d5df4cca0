"""Throughput: warm-up excluded, the seed's line format, and a real baseline run."""

import json
import os
import subprocess

from conftest import ROOT

from handson_lib.runtime import throughput


class FakeClock:
    def __init__(self, times):
        self.times = list(times)

    def __call__(self):
        return self.times.pop(0)


def test_warmup_steps_are_left_out():
    # Two slow warm-up steps (10 s each), then three 1-second steps of 32 images.
    meter = throughput.ThroughputMeter(warmup=2, clock=FakeClock([10, 20, 21, 22, 23]))
    for _ in range(5):
        meter.step(32)
    rate, n, seconds = meter.result()
    assert (n, seconds) == (96, 3)
    assert rate == 32.0


class FakeUpdater:
    def __init__(self, clock, seconds):
        self.clock, self.seconds = clock, seconds

    def update(self):
        self.clock.now += self.seconds


class SteppedClock:
    now = 0.0

    def __call__(self):
        return self.now


def test_a_watched_updater_counts_its_steps_not_the_time_between_them():
    """T is the training steps' own time: an evaluation between steps is left out of it."""
    clock = SteppedClock()
    updater = FakeUpdater(clock, 0.5)
    meter = throughput.ThroughputMeter(warmup=2, clock=clock).watch(updater)
    for i in range(6):
        updater.update()
        meter.step(10)
        clock.now += 3.0 if i == 3 else 0.0  # an evaluation after step 4
    rate, n, seconds = meter.result()
    assert (n, seconds) == (40, 2.0) and rate == 20.0
    assert meter.wall_seconds == 5.0  # from the end of step 2 to the end of step 6


def test_the_extension_leaves_evaluation_out_of_T(tmp_path):
    """A real trainer: an extension that sleeps after every step does not lower the figure."""
    import time

    import chainer
    import numpy
    from chainer import training

    from handson_lib.runtime import models
    model = models.MLP(n_units=8, n_class=2)
    data = chainer.datasets.TupleDataset(numpy.random.rand(64, 4).astype("f"),
                                         numpy.random.randint(0, 2, 64).astype("i"))
    optimizer = chainer.optimizers.SGD()
    optimizer.setup(chainer.links.Classifier(model))
    updater = training.StandardUpdater(chainer.iterators.SerialIterator(data, 8), optimizer)
    trainer = training.Trainer(updater, (12, "iteration"), out=str(tmp_path))
    trainer.extend(lambda _: time.sleep(0.05), trigger=(1, "iteration"))
    printed = []
    trainer.extend(throughput.throughput_extension(warmup=2, out=str(tmp_path), print_fn=printed.append))
    trainer.run()
    saved = json.loads((tmp_path / "throughput.json").read_text())
    assert saved["images"] == 10 * 8 and saved["iterations_timed"] == 10
    assert saved["wall_seconds"] >= 10 * 0.05 > 5 * saved["seconds"], saved
    assert throughput.parse_throughput(printed[-1])[0]["seconds"] == round(saved["seconds"], 3)


def test_no_timed_step_gives_no_figure():
    meter = throughput.ThroughputMeter(warmup=3, clock=FakeClock([1, 2, 3]))
    for _ in range(3):
        meter.step(8)
    assert meter.result() is None


def test_line_format_matches_the_seed_and_parses_back():
    line = throughput.throughput_line(10000, 114.11609242390841)
    assert line == "Throughput: 87.63 [images/sec.] (10000 / 114.116)"
    seed_line = "Throughput: 87.6300597715253 [images/sec.] (10000 / 114.11609242390841)"
    parsed = throughput.parse_throughput(f"noise\n{line}\n{seed_line}\n")
    assert [p["n"] for p in parsed] == [10000, 10000]
    assert abs(parsed[1]["rate"] - 87.6300597715253) < 1e-9
    assert throughput.parse_throughput("Throughput: fast") == []


def test_line_after_the_progress_bar_parses():
    """Chainer's ProgressBar moves the cursor up and clears before the next line is printed."""
    text = "\x1b[4A\x1b[J2  0.79  0.66\n\x1b[JThroughput: 619.30 [images/sec.] (7872 / 12.711)\n"
    assert throughput.parse_throughput(text) == [{"rate": 619.30, "n": 7872, "seconds": 12.711}]


def test_make_demo_as_the_readme_writes_it():
    """The README's first command, default path: full size, progress bar on."""
    # As a user types it: not as a sub-make of `make test` (which would add "Leaving directory").
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    res = subprocess.run(["make", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "\x1b[J" in res.stdout, "the progress bar was not on"
    lines = throughput.parse_throughput(res.stdout)
    assert len(lines) == 3 and all(l["rate"] > 0 for l in lines), res.stdout[-3000:]
    last = res.stdout.rstrip().splitlines()[-1]
    assert throughput.THROUGHPUT_RE.fullmatch(last) and throughput.parse_throughput(last) == [lines[1]]
    assert "Task #1, two devices" in res.stdout


def test_demo_runs_task1_and_ends_with_the_throughput_line(run_handson):
    res = run_handson("demo", "--quick", timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = throughput.parse_throughput(res.stdout)
    # one device: 512 images, batch 32: 16 iterations, 2 of them warm-up;
    # two devices: 8 iterations of 2 x 32 images, 2 of them warm-up.
    assert [l["n"] for l in lines] == [14 * 32, 6 * 64, 6 * 64], res.stdout
    last = res.stdout.rstrip().splitlines()[-1]
    assert throughput.parse_throughput(last) == [lines[1]]
    assert "offline stand-in, NOT CIFAR-10" in res.stdout
    assert "CPU stand-in (worker processes, NOT GPUs), 2 worker processes" in res.stdout
    out = next(l for l in res.stdout.splitlines() if l.startswith("Logs and plots: ")).split(": ")[1]
    saved = json.loads(open(f"{out.rstrip('/')}/multi/throughput.json").read())
    assert saved["images"] == lines[1]["n"] and saved["iterations_timed"] == 6
