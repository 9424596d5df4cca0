"""What the grader sees of a run's processes from outside them (/proc through psutil): the CPU
of a process tree, the machine's busy seconds, the bytes ranks sent on their own loopback.
Nothing a run does inside changes what /proc says of it.
"""

import os
import threading
import time
from pathlib import Path


def _descendants(pid):
    import psutil
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


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


def queue_wait_seconds(pid):
    """Seconds process `pid` has spent runnable but waiting for a core (/proc/PID/schedstat's
    second field, the scheduler's own count); None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


class QueueWait:
    """Whether a run's processes were starved of CPU lately: seen from outside, as the scheduler
    counts each process's wait for a core. A run that marks no progress while it waits for a core
    on a busy machine is slow, not stalled (a deadlocked run sleeps: it waits for no core; a loop
    that burns CPU meets the CPU limit)."""

    #: Starved: one of its processes spent at least this share of the window waiting for a core.
    SHARE = 0.5

    def __init__(self, pid):
        self.pid, self.samples = pid, []   # (monotonic time, {pid: seconds waited for a core})

    def sample(self):
        import psutil
        now, waits = time.monotonic(), {}
        try:
            tree = [psutil.Process(self.pid), *_descendants(self.pid)]
        except psutil.Error:
            tree = []
        for proc in tree:
            waited = queue_wait_seconds(proc.pid)
            if waited is not None:
                waits[proc.pid] = waited
        self.samples.append((now, waits))
        return now

    def starved(self, window):
        """True when, over the last `window` seconds of samples (the watchdog takes one a second),
        a process of the run waited for a core for at least SHARE of them."""
        if not self.samples:
            return False
        now = self.samples[-1][0]
        self.samples = [s for s in self.samples if now - s[0] <= window + 1.0]
        first, last = self.samples[0], self.samples[-1]
        span = last[0] - first[0]
        if span <= 0:
            return False
        waited = [last[1][pid] - first[1][pid] for pid in last[1] if pid in first[1]]
        return max(waited, default=0.0) >= self.SHARE * span


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

    def __init__(self, interval=0.2, heartbeat=None):
        self.interval, self.processes, self.loopback = interval, {}, None
        # Where the run marks its iterations (a claim): the bytes sent beside each mark, so that the
        # bytes of each iteration can be told from bytes sent all at once.
        self.heartbeat, self.traffic = heartbeat, []
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
            iteration = _iteration_in(self.heartbeat) if self.heartbeat is not None else None
            if iteration is not None and (not self.traffic or self.traffic[-1][0] != iteration) \
                    and len(self.traffic) < 5000:
                self.traffic.append((iteration, sent))

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
                "loopback_bytes": self.loopback, "traffic": [list(t) for t in self.traffic]}


def _iteration_in(path):
    """The training iteration a run's progress mark says (its own words: read as a claim), or None."""
    try:
        return int(Path(path).read_bytes()[:32])
    except (OSError, ValueError):
        return None


def _iteration_settled(path, tries=10, pause=0.005):
    """_iteration_in, read again a few times where the mark is caught being rewritten (a run that
    marks a hundred steps a second truncates its file as often: one read in many finds it empty)."""
    for _ in range(tries):
        iteration = _iteration_in(path)
        if iteration is not None:
            return iteration
        time.sleep(pause)
    return None


def _is_python(proc):
    try:
        return proc.name().startswith("python")
    except Exception:   # gone already
        return False


class DependenceProbe:
    """Whether the process that marks a run's progress needs the others (seen from outside): once it
    has marked iteration `at`, every other process of the run is stopped (SIGSTOP) for a window of
    several of its steps, and the iterations it marked meanwhile are read; then they go on (SIGCONT).
    A main process whose workers compute its gradients, or a rank whose gradients are averaged with
    the others', waits for them (at most the step in hand ends); one that trains alone goes on.

    `at`: an iteration, or several (a window at each, in turn). `rank`: the MPI rank whose mark is
    `heartbeat` (the others are the ranks' processes), or None: a single process whose mark it is
    (the others are its descendants). The run never learns `at`."""

    def __init__(self, heartbeat, at, rank=None, shortest=2.0, longest=10.0, steps=6):
        self.heartbeat, self.rank = Path(heartbeat), rank
        self._due = sorted({int(at)} if isinstance(at, int) else {int(a) for a in at})
        self.at = self._due[0]
        self.shortest, self.longest, self.steps = shortest, longest, steps
        self.results, self._stopped, self._marks, self._until = [], [], [], None

    @property
    def result(self):
        """The window in which the watched process went furthest without the others (the one that
        tells), else the first window's result; None before any window ended."""
        measured = [r for r in self.results if r.get("advanced") is not None]
        if measured:
            return max(measured, key=lambda r: r["advanced"])
        return self.results[0] if self.results else None

    @property
    def active(self):
        return self._until is not None

    def tick(self, root_pid):
        """One look, from the watchdog's loop: start a window when it is due, end it when it is over."""
        now = time.monotonic()
        if self._until is not None:
            if now >= self._until:
                self._finish()
            return
        if not self._due:
            return
        iteration = _iteration_in(self.heartbeat)
        if iteration is not None and (not self._marks or self._marks[-1][1] != iteration):
            self._marks.append((now, iteration))
        if iteration is not None and iteration >= self._due[0]:
            self._due.pop(0)
            self._start(root_pid, iteration)

    def _who(self, root_pid):
        """(the process whose mark is watched, the others to stop) among the run's python processes."""
        import psutil
        try:
            tree = [psutil.Process(root_pid), *_descendants(root_pid)]
        except psutil.Error:
            return None, []
        pythons = [p for p in tree if _is_python(p)]
        if self.rank is None:
            top = [p for p in pythons if not any(_is_python(a) for a in _ancestors(p, tree))]
            watched = top[0] if top else None
            return watched, [p for p in pythons if watched is not None and p.pid != watched.pid]
        ranks = {}
        for p in pythons:
            try:
                ranks[p.pid] = p.environ().get("OMPI_COMM_WORLD_RANK")
            except psutil.Error:
                ranks[p.pid] = None
        own = [p for p in pythons if ranks[p.pid] == str(self.rank)]
        watched = next((p for p in own if not any(ranks.get(a.pid) == str(self.rank) for a in _ancestors(p, tree))),
                       None)
        return watched, [p for p in pythons if ranks[p.pid] not in (None, str(self.rank))]

    def _start(self, root_pid, iteration):
        watched, others = self._who(root_pid)
        if watched is None or not others:
            self.results.append({"skipped": "no other process to stop" if watched is not None else "no process marks"})
            return
        self._stopped = []
        self._window = self.window()
        for proc in others:
            try:
                proc.suspend()
                self._stopped.append(proc)
            except Exception:   # ended meanwhile
                pass
        # Counted from the mark once every other process is stopped: the iterations a fast run made
        # while the grader found its processes (a busy machine: a tenth of a second or more) are not
        # made without them.
        stopped_at = _iteration_settled(self.heartbeat)
        self._from = iteration if stopped_at is None else max(iteration, stopped_at)
        self._until = time.monotonic() + self._window

    def window(self):
        """Seconds of `steps` of the watched process's iterations, at the rate its marks came so far
        (between shortest and longest). The watchdog's looks may each see several iterations at once
        (a fast run): the gaps between looks are not steps."""
        (first_seen, first), (last_seen, last) = (self._marks[0], self._marks[-1]) if self._marks else ((0, 0), (0, 0))
        if last <= first:   # past `at` by the first look: a run too fast for its rate to be seen
            return self.shortest
        return min(self.longest, max(self.shortest, self.steps * (last_seen - first_seen) / (last - first)))

    def _finish(self):
        iteration = _iteration_settled(self.heartbeat)
        self.release()
        self.results.append({"stopped": len(self._stopped), "window": round(self._window, 1), "at": self._from,
                             "advanced": None if iteration is None else iteration - self._from})
        self._until = None

    def release(self):
        """Let every process it stopped go on (also when the run ends meanwhile)."""
        for proc in self._stopped:
            try:
                proc.resume()
            except Exception:
                pass


def _ancestors(proc, tree):
    """The processes of `tree` above `proc`."""
    by_pid = {p.pid: p for p in tree}
    found, seen = [], set()
    try:
        parent = proc.ppid()
    except Exception:
        return found
    while parent in by_pid and parent not in seen:
        seen.add(parent)
        found.append(by_pid[parent])
        try:
            parent = by_pid[parent].ppid()
        except Exception:
            break
    return found
