"""`handson doctor`: check the environment and say what each missing part disables.

`run_checks()` returns one `Component` (a row: status, what was found, what its absence
disables) per part of the environment; `verdict(checks)` says whether the CPU course and the GPU
course can run here; `main()` prints both (as a table or as JSON) and returns the exit status (0
when the CPU course can run). GPU facts come from handson_lib.runtime.devices.

The rows are made by doctor_packages (Python and its packages), doctor_mpi (MPI, the host, the
schedulers) and doctor_gpu (CuPy, the GPUs, the profilers), on doctor_rows' `Component`.

Every check is defensive: a failing import, a missing command or a hanging subprocess becomes a
'missing' or 'error' row, never a traceback. Anything that could hang runs in a subprocess with a
timeout. CuPy / CUDA are probed in a subprocess by default, so that calling `run_checks()` from a
notebook kernel does not initialise CUDA in that process (MultiprocessParallelUpdater forks).

What a student reads is in the student's language (handson_lib.messages.tr: HANDSON_LANG or the
locale); the --json output stays in English, and so do component names such as CuPy, commands,
paths and versions.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import unicodedata
from concurrent.futures import ThreadPoolExecutor

from handson_lib import messages
from handson_lib.messages import tr
from handson_lib.runtime import devices
from handson_lib.tools import doctor_gpu, doctor_mpi, doctor_packages
from handson_lib.tools.doctor_rows import (  # noqa: F401 (STATUSES: part of the doctor's API)
    ERROR, MISSING, OK, STATUSES, SYMBOLS, WARN, Component, Verdict, shorten, venv_bin, version_of)


def _display_name(name):
    """The name of a row as the table shows it: the prose ones translated (GPUs too: plural is
    English's), component names (CuPy, nvidia-smi ...) kept."""
    shown = {"platform": tr("platform"), "MPI library": tr("MPI library"), "user": tr("user"),
             "CPU cores": tr("CPU cores"), "PBS commands": tr("PBS commands"),
             "Slurm commands": tr("Slurm commands"), "digits dataset": tr("digits dataset"), "GPUs": tr("GPUs"),
             "Japanese font": tr("Japanese font")}
    return shown.get(name, name)


def _columns(text) -> int:
    """Terminal columns of `text`: wide (East Asian) characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in str(text))


# --------------------------------------------------------------------------- running the checks

def _safe(fn, *args, name="?"):
    """fn's rows (a list), or one 'error' row named `name` when it raises."""
    try:
        out = fn(*args)
        return out if isinstance(out, list) else [out]
    except Exception as e:  # noqa: BLE001 - a doctor never crashes
        return [Component(name, ERROR, tr("doctor check crashed: {error}",
                                          error=devices.describe_error(e)))]


def _result(fut, default):
    try:
        return fut.result()
    except Exception as e:  # noqa: BLE001
        return default(e)


def _start_probes(pool, isolate_cuda):
    """The probes that may take seconds, started in `pool` at once: {what: future}."""
    venv_mpiexec = venv_bin() / "mpiexec"
    on_path = shutil.which("mpiexec")
    mpiexecs = list(dict.fromkeys(p for p in (str(venv_mpiexec) if venv_mpiexec.exists() else None,
                                               on_path) if p))
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    return {"mpi": pool.submit(doctor_mpi.probe_mpi4py),
            "cuda": pool.submit(doctor_gpu.probe_cuda_subprocess) if isolate_cuda else None,
            "mpiexec": {p: pool.submit(version_of, p) for p in mpiexecs},
            "smi": pool.submit(doctor_gpu.nvidia_smi),
            "sched": pool.submit(doctor_mpi.scheduler_flavour),
            "chromium": pool.submit(version_of, chromium) if chromium else None}


def run_checks(isolate_cuda: bool = True) -> list[Component]:
    """All checks, in display order. Never raises.

    isolate_cuda: probe CuPy / GPUs in a subprocess (default) so that this process does not
    initialise CUDA; False probes in-process (tests use it with fake modules).
    """
    with ThreadPoolExecutor(max_workers=8) as pool:
        probes = _start_probes(pool, isolate_cuda)
        checks = []
        checks += _safe(doctor_packages.check_python, name="Python")
        checks += _safe(doctor_packages.check_platform, name="platform")
        checks += _safe(doctor_packages.check_setuptools, name="setuptools")
        checks += _safe(doctor_packages.check_numpy, name="NumPy")
        checks += _safe(doctor_packages.check_chainer, name="Chainer")
        checks += _safe(doctor_packages.check_chainer_patches, name="Chainer patches")
        checks += _safe(doctor_packages.check_chainermn, name="ChainerMN")
        cuda = None if isolate_cuda else doctor_gpu.cuda_probe()
        jupyter = _safe(doctor_packages.check_jupyter, name="JupyterLab")
        digits = _safe(doctor_packages.check_digits, name="digits dataset")

        mpi = _result(probes["mpi"], lambda e: {"probe_error": devices.describe_error(e)})
        versions = {p: _result(f, lambda e: (None, devices.describe_error(e)))
                    for p, f in probes["mpiexec"].items()}
        checks += _safe(doctor_mpi.check_mpi, mpi, versions, name="mpi4py")
        checks += _safe(doctor_mpi.check_root, name="user")
        checks += _safe(doctor_mpi.check_cpus, name="CPU cores")
        if cuda is None:
            cuda = _result(probes["cuda"], lambda e: {"probe_error": devices.describe_error(e)})
        smi = _result(probes["smi"], lambda e: None)
        cuda_rows = _safe(doctor_gpu.check_cuda, cuda, smi, name="CuPy")
        checks += cuda_rows
        sched = _result(probes["sched"], lambda e: {})
        checks += _safe(doctor_mpi.check_commands, "PBS commands", doctor_mpi.PBS_COMMANDS, sched.get("pbs", ""),
                        name="PBS commands")
        checks += _safe(doctor_mpi.check_commands, "Slurm commands", doctor_mpi.SLURM_COMMANDS,
                        sched.get("slurm", ""), name="Slurm commands")
        checks += _safe(doctor_gpu.check_profilers, cuda_rows, name="profilers")
        checks += jupyter
        checks += digits
        if messages.language() == "ja":    # the Japanese edition's figures draw Japanese labels
            checks += _safe(doctor_packages.check_japanese_font, name="Japanese font")
        chromium = probes["chromium"]
        chromium_version = _result(chromium, lambda e: (None, "")) if chromium else None
        if doctor_packages.instructors_copy():
            checks += _safe(doctor_packages.check_chromium, chromium_version, name="Chromium")
    return checks


# --------------------------------------------------------------------------- the verdict and the report

def verdict(checks) -> Verdict:
    blocking = [c for c in checks if c.blocking]
    if blocking:
        why = "; ".join(f"{_display_name(c.name)}: {shorten(c.found, 70)}" for c in blocking)
        cpu = tr("CPU course: NOT ready ({why})", why=why)
    else:
        cpu = tr("CPU course: ready")
    by_name = {c.name: c for c in checks}
    cupy, gpus, nccl = by_name.get("CuPy"), by_name.get("GPUs"), by_name.get("NCCL")
    have_cupy = cupy is not None and cupy.status in (OK, WARN)
    have_gpus = gpus is not None and gpus.status == OK
    if not have_cupy or not have_gpus:
        missing = [w for w, ok in (("CuPy", have_cupy), ("GPU", have_gpus)) if not ok]
        return Verdict(not blocking, cpu, False,
                       tr("GPU course: not on this host (no {missing})", missing="/".join(missing)))
    gpu_blocking = list(blocking)
    if nccl is None or nccl.status != OK:
        gpu_blocking.append(nccl or Component("NCCL", MISSING, tr("not checked")))
    if gpu_blocking:
        why = "; ".join(f"{_display_name(c.name)}: {shorten(c.found, 70)}" for c in gpu_blocking)
        return Verdict(not blocking, cpu, False, tr("GPU course: NOT ready ({why})", why=why))
    return Verdict(not blocking, cpu, True, tr("GPU course: ready"))


def format_table(checks, width=100) -> str:
    names = {c.name: _display_name(c.name) for c in checks}
    name_w = max(_columns(shown) for shown in names.values())
    indent = " " * (2 + 6 + 1 + 2 + name_w + 2)
    lines = []
    for c in checks:
        star = "*" if c.required_for_cpu_course else " "
        shown = names[c.name]
        lines.append(f"  {SYMBOLS[c.status]} {star} {shown}{' ' * (name_w - _columns(shown))}  {c.found}")
        if c.status != OK and c.disables:
            lines.append(indent + tr("-> disables: {what}", what=c.disables))
        if c.note:
            lines.append(indent + tr("-> note: {what}", what=c.note))
    return "\n".join(lines)


def add_arguments(parser):
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def main(args) -> int:
    return run(as_json=args.json)


def run(as_json: bool = False) -> int:
    """Print the table and the verdicts; 0 when the CPU course can run. The table is in the
    student's language; the JSON (as_json) in English, whatever the language."""
    if as_json:
        with messages.in_english():
            checks = run_checks()
            v = verdict(checks)
        rc = 0 if v.cpu_ready else 1
        print(json.dumps({"checks": [dataclasses.asdict(c) for c in checks],
                          "verdict": dataclasses.asdict(v), "exit_code": rc}, indent=2))
        return rc
    checks = run_checks()
    v = verdict(checks)
    rc = 0 if v.cpu_ready else 1
    print(tr("handson doctor: environment of the distributed deep-learning course "
             "(* = needed for the CPU course)"))
    print(format_table(checks))
    print()
    print(v.cpu)
    print(v.gpu)
    return rc


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(prog="python -m handson_lib.tools.doctor")
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
