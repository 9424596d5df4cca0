"""Throughput: warm-up excluded, the seed's line format, and a real baseline run."""

import json

from handson_lib import throughput


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


def test_baseline_run_prints_the_line_and_writes_figures(run_handson, tmp_path):
    res = run_handson("demo", "--quick", timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = throughput.parse_throughput(res.stdout)
    assert len(lines) == 1, res.stdout
    # 512 images, batch 32: 16 iterations, 2 of them warm-up.
    assert lines[0]["n"] == 14 * 32 and lines[0]["rate"] > 0
    assert res.stdout.rstrip().splitlines()[-2].startswith("Throughput:")
    assert "offline stand-in, NOT CIFAR-10" in res.stdout
    out = res.stdout.rstrip().splitlines()[-1].split("Logs and plots: ")[1].rstrip("/")
    saved = json.loads(open(f"{out}/throughput.json").read())
    assert saved["images"] == lines[0]["n"] and saved["iterations_timed"] == 14
