"""A run's progress seen from outside: the marks its training iterations touch (ProgressWatch:
when a run has stalled), and a line said every few seconds while something long runs (Ticker).
"""

import os
import stat
import time
from pathlib import Path

from handson_lib.messages import tr


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



def cpu_count() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cpu_share():
    """The share of a core a busy process gets now (1 on an idle machine, cores/load above):
    a loaded machine stretches a correct run's start-up and steps by about its inverse."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    cores = cpu_count()
    return 1.0 if load <= cores else cores / load


class ProgressWatch:
    """Progress marks of a run (files touched on every training iteration, see
    handson_lib.harness.observe): when the first came, the longest gap, and whether the run
    has made no progress for `stall` seconds of a whole core (then it is stopped early): on a
    machine loaded past its cores a second counts for the share of a core a process gets, so a
    correct run slowed by the load is not taken for a deadlock."""

    def __init__(self, folder, stall=None, pattern="heartbeat*", say=None, every=10.0, clock=time.time):
        self.folder, self.stall, self.pattern, self.clock = Path(folder), stall, pattern, clock
        self.ticker = Ticker(say, every)   # `say` told how far the run got every `every` seconds
        self.start()

    def start(self):
        """The run starts now (the watch is made before the wait for the timing slot)."""
        self.started = self.last = self._polled = self.clock()
        self._idle = 0.0      # seconds of a whole core since the last progress mark
        self.stalled_after = None   # wall seconds without progress when the stall was declared
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
        now = self.clock()
        self.ticker.tick(lambda seconds: self._said(seconds))
        marks = [p.lstat().st_mtime for p in self.folder.glob(self.pattern)] if self.folder.exists() else []
        newest = max(marks, default=None)
        if newest is not None and newest > self.last:
            if self.first is None:
                self.first = newest - self.started
            self._longest = max(self._longest, newest - self.last)
            self.last = newest
            self._idle = max(0.0, now - newest) * cpu_share()
        else:
            self._idle += max(0.0, now - self._polled) * cpu_share()
        self._polled = now
        if bool(self.stall) and self._idle > self.stall:
            self.stalled_after = now - self.last
            return True
        return False

    def _said(self, seconds):
        iterations = self.iterations()
        if iterations is None:
            return tr("  ... {seconds:.0f} s: starting up (importing Chainer, loading the data)", seconds=seconds)
        return tr("  ... {seconds:.0f} s: {iterations} training iterations", seconds=seconds, iterations=iterations)

    def since_last(self):
        """Seconds since the last progress mark (since the start, before any)."""
        return self.clock() - self.last

    @property
    def longest(self):
        """The longest wait between progress marks, start-up included (None before the first)."""
        return None if self.first is None else self._longest

