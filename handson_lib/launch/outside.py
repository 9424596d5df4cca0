"""What the grader sees of a run's processes from outside them (/proc through psutil): the CPU
of a process tree, the machine's busy seconds, the bytes ranks sent on their own loopback.
Nothing a run does inside changes what /proc says of it.
"""

import os
import threading
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
