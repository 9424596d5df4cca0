"""The GPU tier (`make test-gpu`): one script for a machine with an NVIDIA GPU, at most 8 minutes.

    .venv/bin/python tests/gpu_tier.py [--out results/gpu-tier]

Steps, each with its own time limit: `handson doctor`; the `gpu`-marked tests; Task #1 on the
GPUs (two, or the one there is); Task #2 on GPU ranks with pure_nccl (one rank per GPU, at most
two: NCCL refuses two ranks on one device, so a one-GPU machine runs one GPU rank); where Nsight
Systems is installed, a profile of that Task #2 run exported to SQLite in OUT and summarised by
`handson profile summarize`. Prints a line per step and exits 1 when one failed.

On a machine without a GPU (or without CuPy able to see one) it says so and exits 0: nothing here
pretends a GPU ran.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SOLUTIONS = ROOT / "solutions"
#: Seconds for each step; together at most 8 minutes.
LIMITS = {"doctor": 60, "gpu tests": 200, "task 1": 60, "task 2": 60, "profile": 100}
QUICK = ["--epoch", "1", "--train-size", "2000", "--test-size", "500", "--no-progress"]


def gpus_here():
    """(the GPUs CuPy sees, why there are none)."""
    from handson_lib.runtime import devices
    return devices.gpu_count()


def step(name, cmd, results, env=None, cwd=ROOT, expect=()):
    """Run one step within its limit; it passes on exit 0 with every `expect` text in its output."""
    started = time.monotonic()
    print(f"--- {name}: {' '.join(map(str, cmd))}", flush=True)
    try:
        res = subprocess.run([str(c) for c in cmd], cwd=cwd, env={**os.environ, **(env or {})},
                             capture_output=True, text=True, timeout=LIMITS[name])
        output, ok = res.stdout + res.stderr, res.returncode == 0
        why = "" if ok else f"exit {res.returncode}"
    except subprocess.TimeoutExpired as stopped:
        output = (stopped.stdout or b"").decode(errors="replace") if isinstance(stopped.stdout, bytes) \
            else (stopped.stdout or "")
        ok, why = False, f"past its limit of {LIMITS[name]} s"
    missing = [text for text in expect if text not in output]
    if ok and missing:
        ok, why = False, f"its output lacks {missing}"
    print("\n".join(output.rstrip().splitlines()[-15:]))
    results.append((name, ok, why, time.monotonic() - started))
    return ok, output


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "results" / "gpu-tier"))
    args = parser.parse_args(argv)
    if shutil.which("nvidia-smi") is None or subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode:
        print("No NVIDIA GPU here (nvidia-smi finds none): the GPU tier did not run. "
              "Run `make test-gpu` on a machine with a GPU.")
        return 0
    n, why = gpus_here()
    if n == 0:
        print(f"nvidia-smi sees a GPU, but CuPy sees none ({why}): install CuPy and NCCL "
              "into .venv first, e.g. .venv/bin/pip install 'cupy-cuda12x>=13.5,<14' nvidia-nccl-cu12 "
              "(README: 'GPUs and clusters'). The GPU tier did not run.", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from handson_lib import launch
    results = []
    ranks = min(2, n)
    print(f"{n} GPU(s) here: Task #1 on {ranks} device(s), Task #2 on {ranks} GPU rank(s)"
          + ("" if ranks == 2 else " (NCCL refuses two ranks on one device)"), flush=True)
    step("doctor", [BIN / "handson", "doctor"], results, expect=["GPUs"])
    step("gpu tests", [sys.executable, "-m", "pytest", "--tier", "gpu", "-q", "-p", "no:cacheprovider"], results)
    step("task 1", [sys.executable, SOLUTIONS / "train_cifar_multi_gpu.py", "--gpus", *map(str, range(ranks)),
                    *QUICK, "--out", out / "task1"], results, expect=["Throughput:"])
    task2 = launch.mpiexec_command(ranks, [SOLUTIONS / "train_cifar_multi_node.py", "--gpu", *QUICK,
                                           "--out", out / "task2"])
    mpi_env = launch.local_mpi_env()
    step("task 2", task2, results, env=mpi_env, expect=["Using pure_nccl communicator", "Throughput:"])
    nsys = shutil.which("nsys")
    if nsys:
        report = out / "task2_profile"
        ok, _ = step("profile", [nsys, "profile", "--trace=cuda,nvtx,mpi", "--sample=none", "--force-overwrite=true",
                                 "--export=sqlite", "-o", report, *task2], results,
                     env={**mpi_env, "HANDSON_PHASES": "nvtx"})
        if ok:
            LIMITS["profile summary"] = 60
            step("profile summary", [BIN / "handson", "profile", "summarize", report.with_suffix(".sqlite"),
                                     "--plot", out / "task2_timeline.png"], results, expect=["kernels"])
    else:
        print("--- profile: Nsight Systems (nsys) is not on PATH here: no profile taken")
    print("\nGPU tier:")
    for name, ok, why, seconds in results:
        print(f"  [{'PASS' if ok else 'FAIL'}] {name} ({seconds:.0f} s){': ' + why if why else ''}")
    print(f"results in {out}")
    return 0 if all(ok for _, ok, _, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
