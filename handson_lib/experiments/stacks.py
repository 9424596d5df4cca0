"""Task #1 and Task #2 on two stacks (e.g. Python 3.11 + NumPy 1.23.5 and Python 3.12 + NumPy 2):
the same losses for the same seed, and their throughput side by side.

NumPy 2's promotion rules (NEP 50) change float32 arithmetic where a Python float meets an array:
Task #1's epoch loss agrees to float32 rounding (the reporter's mean), at MNIST's batch 100 the
losses drift by about 1 % over 200 steps; Task #2 differs from run to run even on one stack
(README "Supported stacks"). `run_task` runs one short task with a given
interpreter (its venv's mpiexec for Task #2) and returns its LogReport rows and throughput;
`compare` alternates the two stacks, several repeats each, and `main` prints one line per task:

    python -m handson_lib.experiments.stacks --other .venv-py312/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from handson_lib import launch

ROOT = Path(__file__).resolve().parents[2]
TASKS = {
    "task1": ["solutions/train_cifar_multi_gpu.py", "--gpus", "0", "1"],
    "task2": ["solutions/train_cifar_multi_node.py", "--communicator", "naive"],
}
#: a short run: 8 iterations of batch 32 per worker, then the evaluation
SHORT = ["--batchsize", "32", "--epoch", "1", "--dataset", "synthetic", "--train-size", "512",
         "--test-size", "128", "--seed", "0", "--no-progress"]


def stack_of(python) -> str:
    """'Python 3.12.1, NumPy 2.5.5' of an interpreter."""
    code = "import sys, numpy; print('Python %s, NumPy %s' % (sys.version.split()[0], numpy.__version__))"
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip()


def run_task(python, task, out, extra=(), timeout=300) -> dict:
    """{'log': LogReport rows, 'throughput': images/s} of a short run of `task` with `python`."""
    python = Path(python)
    argv = [str(ROOT / TASKS[task][0]), *TASKS[task][1:], *SHORT, "--out", str(out), *extra]
    env = launch.local_mpi_env()
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    if task == "task2":
        cmd = [str(python.parent / "mpiexec"), "-n", "2", "--oversubscribe", str(python), *argv]
    else:
        cmd = [str(python), *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"{task} with {python} exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-3000:]}")
    log = json.loads((Path(out) / "log").read_text())
    throughput = json.loads((Path(out) / "throughput.json").read_text())["images_per_sec"]
    return {"log": log, "throughput": throughput}


def compare(python_a, python_b, task, repeats=3) -> dict:
    """Both stacks, alternating, `repeats` runs each: their logs (first run) and throughputs."""
    runs = {"a": [], "b": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            for key, python in (("a", python_a), ("b", python_b)):
                runs[key].append(run_task(python, task, Path(tmp) / f"{key}{i}"))
    out = {}
    for key, python in (("a", python_a), ("b", python_b)):
        rates = [r["throughput"] for r in runs[key]]
        out[key] = {"stack": stack_of(python), "log": runs[key][0]["log"], "throughputs": rates,
                    "median": statistics.median(rates)}
    out["loss_rel_diff"] = max(abs(ra["main/loss"] - rb["main/loss"]) / abs(ra["main/loss"])
                               for ra, rb in zip(out["a"]["log"], out["b"]["log"]))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m handson_lib.experiments.stacks",
                                     description="Task #1 and #2 on this stack and another: losses and throughput")
    parser.add_argument("--other", required=True, help="the other stack's python (e.g. .venv-py312/bin/python)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", metavar="PATH", help="also write the results here")
    args = parser.parse_args(argv)
    results = {}
    for task in TASKS:
        r = compare(sys.executable, args.other, task, args.repeats)
        results[task] = r
        a, b = r["a"], r["b"]
        spread = lambda rates: f"{min(rates):.0f}-{max(rates):.0f}"  # noqa: E731
        print(f"{task}: {a['stack']}: {a['median']:.1f} images/s ({spread(a['throughputs'])}); "
              f"{b['stack']}: {b['median']:.1f} images/s ({spread(b['throughputs'])}); "
              f"ratio {b['median'] / a['median']:.2f}; epoch-1 loss {a['log'][-1]['main/loss']:.7f} vs "
              f"{b['log'][-1]['main/loss']:.7f} (relative difference {r['loss_rel_diff']:.1e})", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
