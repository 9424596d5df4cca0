"""Fair timing while runs go side by side: the machine's timing slot (a timed run holds it alone,
untimed runs share it) and the watchdog's early stop of a run whose iterations stop."""

import os
import sys
import textwrap
import threading
import re
import time

import pytest

from handson_lib import launch


@pytest.fixture(autouse=True)
def own_lock(tmp_path, monkeypatch):
    """A lock file of this test's own: runs of other tests on the machine do not interfere."""
    monkeypatch.setattr(launch, "TIMING_LOCK", tmp_path / "timing.lock")
    monkeypatch.delenv(launch.SLOT_HELD, raising=False)


class Holder:
    """A thread that takes the slot (timed or not), says when it is in, and leaves when told:
    the tests decide the order by events, not by sleeping (the machine may be busy)."""

    def __init__(self, timed):
        self.inside, self.leave, self.left = threading.Event(), threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._hold, args=(timed,), daemon=True)
        self.thread.start()

    def _hold(self, timed):
        with launch.timing_slot(timed):
            self.inside.set()
            self.leave.wait(30)
        self.left.set()

    def release(self):
        self.leave.set()
        self.thread.join(30)


#: Long enough for a thread that may enter to have entered, on a busy machine.
MAY_ENTER = 1.0


def test_untimed_runs_share_the_slot():
    first = Holder(False)
    assert first.inside.wait(10)
    second = Holder(False)
    assert second.inside.wait(10), "a second untimed run waited for the first"
    first.release(), second.release()


def test_a_timed_run_never_overlaps_another_run():
    untimed = Holder(False)
    assert untimed.inside.wait(10)
    timed = Holder(True)
    assert not timed.inside.wait(MAY_ENTER), "the timed run entered while an untimed run held the slot"
    # Timed runs go first: an untimed run that comes later waits for the timed one.
    late = Holder(False)
    assert not late.inside.wait(MAY_ENTER), "a later untimed run entered while a timed run waited"
    untimed.release()
    assert timed.inside.wait(10), "the timed run did not enter once the slot was free"
    assert not late.inside.wait(MAY_ENTER), "an untimed run entered beside the timed run"
    timed.release()
    assert late.inside.wait(10)
    late.release()


def test_a_run_started_inside_a_held_slot_does_not_wait_for_it(monkeypatch):
    monkeypatch.setenv(launch.SLOT_HELD, "1")
    outer = Holder(True)
    assert outer.inside.wait(10)
    inner = Holder(True)
    assert inner.inside.wait(10), "a run started inside a held slot waited for it"
    outer.release(), inner.release()


def test_run_watched_holds_the_slot_and_tells_its_children(tmp_path):
    res = launch.run_watched([sys.executable, "-c", f"import os; print(os.environ.get('{launch.SLOT_HELD}'))"],
                             30, timed=True)
    assert res.ok and res.output.strip() == "1", res.output


HEARTBEATS = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    beat = Path(sys.argv[1]) / "heartbeat"
    for _ in range(int(sys.argv[2])):
        time.sleep(0.3)
        beat.touch()
    time.sleep(120)  # then it hangs
""")


@pytest.mark.slow
@pytest.mark.parametrize("beats", [0, 4])
def test_a_run_whose_iterations_stop_is_stopped_early(tmp_path, beats):
    script = tmp_path / "hang.py"
    script.write_text(HEARTBEATS)
    watch = launch.ProgressWatch(tmp_path, stall=3)
    started = time.monotonic()
    res = launch.run_watched([sys.executable, str(script), str(tmp_path), str(beats)], 120, progress=watch)
    assert time.monotonic() - started < 20
    assert res.timed_out and res.stalled and not res.ok
    waited = re.search(r"no training iteration for (\d+) s", res.output)
    assert waited and int(waited.group(1)) >= 3, res.output
    if beats:
        assert watch.first is not None and watch.first < 5
        assert watch.longest is not None and watch.longest < 3
    else:
        assert watch.first is None and watch.longest is None


#: A run that waits for a core before its first mark: on CPU 0 at the lowest priority, it computes
#: 0.2 CPU-seconds, then marks ten iterations and ends.
STARVED = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    os.sched_setaffinity(0, {0})
    os.nice(19)
    try:   # its session's group too (the kernel shares a core between sessions' groups first)
        Path("/proc/self/autogroup").write_text("19")
    except OSError:
        pass
    while time.process_time() < 0.2:
        pass
    beat = Path(sys.argv[1]) / "heartbeat"
    for _ in range(10):
        beat.touch()
""")
BURNER = "import os\nos.sched_setaffinity(0, {0})\nwhile True:\n    pass"


@pytest.mark.slow
def test_a_run_starved_of_cpu_by_a_busy_machine_is_slow_not_stalled(tmp_path):
    """Two processes at normal priority keep CPU 0 busy: the run's first mark comes long after the
    stall (it gets under 1 % of the core), but it waited for a core all along, as the scheduler
    counts (launch.QueueWait); a run that sleeps is still stopped (the test above)."""
    import subprocess
    import psutil
    burners = [subprocess.Popen([sys.executable, "-c", BURNER]) for _ in range(2)]
    try:
        while min(sum(psutil.Process(b.pid).cpu_times()[:2]) for b in burners) < 0.3:   # both burning
            time.sleep(0.05)
        script = tmp_path / "starved.py"
        script.write_text(STARVED)
        watch = launch.ProgressWatch(tmp_path, stall=2)
        res = launch.run_watched([sys.executable, str(script), str(tmp_path)], 120, progress=watch)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert res.ok and not res.stalled, res.output
    assert watch.first is not None and watch.first > 2, watch.first   # it did wait longer than the stall


def test_a_steady_run_is_not_stopped_and_its_waits_are_measured(tmp_path):
    script = tmp_path / "steady.py"
    script.write_text(HEARTBEATS.replace("time.sleep(120)", "pass"))
    watch = launch.ProgressWatch(tmp_path, stall=2)
    res = launch.run_watched([sys.executable, str(script), str(tmp_path), "10"], 60, progress=watch)
    assert res.ok and not res.stalled, res.output
    assert 0 < watch.first < 2 and 0.2 < watch.longest < 2


WAITER = textwrap.dedent("""
    import time
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    if comm.rank == 0:
        cpu = time.process_time()
        comm.recv(source=1)  # rank 1 sends after 4 s
        print("waiting used", time.process_time() - cpu, "s of CPU", flush=True)
    else:
        time.sleep(4)
        comm.send(b"late", dest=0)
""")


@pytest.mark.slow
def test_graded_ranks_yield_the_core_while_they_wait(tmp_path):
    """A rank blocked in MPI under the grader's settings leaves the core to others (Open MPI
    would otherwise poll at 100 %: a deadlocked student slows everyone graded beside it)."""
    from handson_lib.checking import runs
    script = tmp_path / "waiter.py"
    script.write_text(WAITER)

    def cpu_of_the_wait(settings):
        env = {k: v for k, v in os.environ.items() if k not in runs.YIELD_WHEN_IDLE}
        res = launch.run_mpi(2, [script], timeout=120, env={**env, **settings})
        assert res.ok, res.output
        return float(res.output.split("waiting used")[1].split()[0])
    # Beside Open MPI's default (polling) in the same conditions: how much CPU a poll gets
    # depends on what else the machine runs, the ratio does not.
    polling, yielding = cpu_of_the_wait({}), cpu_of_the_wait(runs.YIELD_WHEN_IDLE)
    assert yielding < 0.6 * polling and yielding < 2.0, \
        f"rank 0 used {yielding:.2f} s of CPU in a 4 s wait, {polling:.2f} s when polling"


IDLER = textwrap.dedent("""
    import sys, time
    deadline = time.monotonic() + float(sys.argv[1])
    if sys.argv[2] == "spin":
        while time.monotonic() < deadline:  # computes (a run starting up), no progress mark
            pass
    else:
        time.sleep(float(sys.argv[1]))      # waits and computes nothing (a deadlocked run)
""")


# Runs alone (-m timed): an idle run steps aside only while cores stand free, which the other
# tests running beside it would take away.
@pytest.mark.timed
@pytest.mark.parametrize("behaviour", ["sleep", "spin"])
def test_an_idle_untimed_run_steps_aside_for_a_timed_run(tmp_path, behaviour):
    """A deadlocked run (no progress, no CPU) gives its shared slot back, so that a timed run does
    not wait for its watchdog; a run that computes keeps the slot until it ends."""
    script = tmp_path / "idler.py"
    script.write_text(IDLER)
    results = {}

    def idler():
        watch = launch.ProgressWatch(tmp_path / "marks", stall=None)
        results["idler"] = launch.run_watched([sys.executable, str(script), "9", behaviour], 60,
                                              progress=watch, timed=False)

    thread = threading.Thread(target=idler)
    thread.start()
    time.sleep(1.0)  # the idler holds its shared slot by now
    started = time.monotonic()
    with launch.timing_slot(True):
        waited = time.monotonic() - started
    thread.join()
    res = results["idler"]
    assert res.ok, res.output
    if behaviour == "sleep":
        assert res.stepped_aside and waited < 6.5, (waited, res)
    else:
        assert not res.stepped_aside and waited > 7, (waited, res)


class FakeClock:
    """Drives IdleWatch's samples: the run's CPU seconds and the machine's idle CPU seconds."""

    def __init__(self, monkeypatch, run_cores, free_cores):
        self.now, self.run_cores, self.free_cores = 1000.0, run_cores, free_cores
        monkeypatch.setattr(launch.time, "monotonic", lambda: self.now)
        monkeypatch.setattr(launch, "tree_cpu", lambda pid: self.now * self.run_cores)
        monkeypatch.setattr(launch.IdleWatch, "_machine_idle", staticmethod(lambda: self.now * self.free_cores))

    def idle_after(self, watch, seconds):
        """Sample every 0.5 s for `seconds`; whether the watch said idle at the end."""
        said = False
        for _ in range(int(seconds / 0.5)):
            self.now += 0.5
            said = watch.idle()
        return said


@pytest.mark.parametrize("run_cores, free_cores, progress_age, idle", [
    (0.0, 1.8, 60, True),     # deadlocked on a free machine: steps aside
    (0.0, 0.1, 60, False),    # waits for a core on a full machine: keeps its hold
    (1.0, 0.9, 60, False),    # computes without progress marks (start-up): keeps its hold
    (0.0, 1.8, 0, False),     # made progress within the window: keeps its hold
])
def test_idle_watch_tells_a_deadlock_from_a_busy_machine(monkeypatch, run_cores, free_cores,
                                                         progress_age, idle):
    clock = FakeClock(monkeypatch, run_cores, free_cores)

    class Marks:
        last = time.time() - progress_age
    watch = launch.IdleWatch(pid=0, progress=Marks(), window=3.0, cores=0.5)
    assert watch.idle() is False  # one sample spans no time
    assert clock.idle_after(watch, 4.0) is idle


def test_a_machine_loaded_past_its_cores_stretches_the_stall_by_the_share_of_a_core(tmp_path, monkeypatch):
    """At a load of 3 times the cores a run gets a third of a core: a 3 s stall is declared after
    9 s without an iteration, not 3 (a correct run slowed by the load is no deadlock)."""
    from handson_lib.launch import progress
    cores = len(os.sched_getaffinity(0))
    clock = [1000.0]
    watch = launch.ProgressWatch(tmp_path, stall=3, clock=lambda: clock[0])
    monkeypatch.setattr(os, "getloadavg", lambda: (3.0 * cores, 0.0, 0.0))
    assert progress.cpu_share() == pytest.approx(1 / 3)
    stalled_at = None
    for second in range(1, 20):
        clock[0] = 1000.0 + second
        if watch.poll():
            stalled_at = second
            break
    assert stalled_at == 10 and watch.stalled_after == 10   # 9 s of a third of a core, the first poll past them
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5 * cores, 0.0, 0.0))
    assert progress.cpu_share() == 1.0
    idle = launch.ProgressWatch(tmp_path, stall=3, clock=lambda: clock[0])
    start = clock[0]
    for second in range(1, 10):
        clock[0] = start + second
        if idle.poll():
            break
    assert idle.stalled_after == 4
