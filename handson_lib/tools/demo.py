"""`make demo`: the main job on embedded defaults (offline data, CPU or GPU as present).

Runs the Task #1 reference solution on one device and on two, live, then prints the
throughput table; the last line is the two-device run's `Throughput:` line.
"""

import sys
import tempfile
from pathlib import Path

from handson_lib import COURSE_ROOT
from handson_lib import launch
from handson_lib.checking import reference
from handson_lib.runtime import throughput

TASK1 = reference.reference_script("train_cifar_multi_gpu.py")


def _run(label, args, out, timeout=1800):
    print("=" * 72)
    print(f"handson demo: {label}")
    print("=" * 72, flush=True)
    cmd = [sys.executable, str(TASK1), *args, "--out", str(out)]
    res = launch.run_watched(cmd, timeout, env=launch.local_mpi_env(omp_threads=None), echo=True)
    lines = throughput.parse_throughput(res.output)
    if not res.ok or not lines:
        raise SystemExit(f"demo run '{label}' failed (exit code {res.returncode})")
    return lines[-1]


def add_arguments(parser):
    parser.add_argument("--quick", action="store_true", help="a few iterations only (tests)")


def main(args):
    size = ["--epoch", "1", "--train-size", "512", "--test-size", "256"] if args.quick else \
        ["--epoch", "2", "--train-size", "4000", "--test-size", "1000"]
    if args.quick:
        size.append("--no-progress")
    out = Path(tempfile.mkdtemp(prefix="handson-demo-")) if args.quick else COURSE_ROOT / "result" / "demo"
    single = _run("Task #1 baseline, one device", ["--gpus", "0", *size], out / "single")
    multi = _run("Task #1 MultiprocessParallelUpdater, two devices", ["--gpus", "0", "1", *size],
                 out / "multi")
    print()
    print(f"{'run':40s} {'images/s':>10s} {'ratio':>7s}")
    print(f"{'Task #1, one device':40s} {single['rate']:10.1f} {1.0:6.2f}x")
    print(f"{'Task #1, two devices':40s} {multi['rate']:10.1f} {multi['rate'] / single['rate']:6.2f}x")
    print(f"Logs and plots: {out}/")
    print(f"Throughput: {multi['rate']:.2f} [images/sec.] ({multi['n']} / {multi['seconds']:.3f})")
    return 0
