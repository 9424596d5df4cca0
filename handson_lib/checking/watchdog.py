"""The watchdog of a student's run (its time limit and stall, from the reference's run in this
session) and the words for why a run stopped.
"""

from handson_lib import settings


#: Self mode (no reference to measure first): seconds without a training iteration, start-up
#: included, before a run is stopped as stalled (a deadlock costs this, not the whole limit).
SELF_STALL = 90.0


def student_limit(reference, timeout):
    """The seconds a student's run may take: `timeout` (capped by HANDSON_RUN_TIMEOUT). A machine's
    load stretches a correct run's time, so the time is no measure of a loop: the watchdog stops a
    deadlock once its iterations stop (`student_stall`) and a loop once it has used more CPU than the
    same training takes (`student_cpu_limit`), whatever the load."""
    return timeout


#: A student's run may use this many times the CPU of the reference's run of the same training
#: (a correct script that does its work twice over uses twice).
CPU_FACTOR = 5.0


def student_cpu_limit(reference, factor=CPU_FACTOR, floor=30.0):
    """The CPU-seconds a student's run may use: `factor` times what the reference's run used in this
    session, seen from outside (at least `floor`); None (no such limit) without a finished reference."""
    cpu = (getattr(reference, "outside", None) or {}).get("cpu")
    if reference is None or not reference.finished or not cpu:
        return None
    return max(floor, factor * cpu)


def student_stall(reference, factor=4.0, floor=15.0):
    """Seconds without a training iteration after which a student's run is stopped early:
    `factor` times the reference's longest wait in this session (start-up included, at least
    `floor`); None (only the time limit) without a finished reference."""
    progress = getattr(reference, "progress", None) or {}
    waits = [w for w in (progress.get("first_progress"), progress.get("longest_gap")) if w]
    if reference is None or not reference.finished or not waits:
        return None
    return max(floor, factor * max(waits))


def _ticking(say):
    """Progress lines every 10 s for a user who waits (nothing under the autograder: its report
    cells' output is the student's feedback)."""
    return None if settings.current().grader.autograding or say is None else say


def _tail(output, lines=15):
    """The last lines of a run's output, without terminal control sequences (Chainer's
    PrintReport and ProgressBar write ESC[J: a report showed `[J` before each line)."""
    from handson_lib.runtime.throughput import ANSI_ESCAPE_RE
    return "\n".join(ANSI_ESCAPE_RE.sub("", output).rstrip().splitlines()[-lines:])
