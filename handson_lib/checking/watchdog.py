"""The watchdog of a student's run (its time limit and stall, from the reference's run in this
session) and the words for why a run stopped.
"""

from handson_lib import settings
from handson_lib.messages import tr


#: Self mode (no reference to measure first): seconds without a training iteration, start-up
#: included, before a run is stopped as stalled (a deadlock costs this, not the whole limit).
SELF_STALL = 90.0


def student_limit(reference, timeout, factor=5.0, floor=60.0):
    """The watchdog for a student's run: `factor` times the reference's own time in this session
    (at least `floor` seconds, at most `timeout`): a deadlock costs a minute, not the whole limit."""
    if reference is None or not reference.finished:
        return timeout
    return min(timeout, max(floor, factor * reference.seconds))


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


def _stopped_how(obs, timeout):
    """How the watchdog stopped a run: after its time limit, or early once iterations stopped."""
    progress = obs.progress or {}
    if progress.get("stalled"):
        if progress.get("first_progress"):
            return tr("waited {stall:.0f} s for another training iteration and was stopped early by the "
                      "watchdog (after {seconds:.0f} s)", stall=progress["stall"], seconds=obs.seconds)
        return tr("waited {stall:.0f} s for its first training iteration and was stopped early by the "
                  "watchdog (after {seconds:.0f} s)", stall=progress["stall"], seconds=obs.seconds)
    return tr("did not finish within {limit:.0f} s and was stopped by the watchdog", limit=obs.limit or timeout)


def _not_implemented(error):
    """The message of a NotImplementedError (`require_done`: what is still to do)."""
    return tr("not implemented yet: {what}", what=error.split(": ", 1)[1])


def _why_it_stopped(obs, timeout):
    if obs.timed_out:
        return tr("{how} (an infinite loop, or workers waiting for each other?)", how=_stopped_how(obs, timeout))
    error = obs.record.get("error") or ""
    if error.startswith("NotImplementedError"):
        return _not_implemented(error)
    if error:
        return tr("stopped with {error}", error=error)
    if not obs.record:
        return tr("crashed before training started (exit code {code})", code=obs.returncode)
    if not obs.record.get("trainers"):
        return tr("finished without creating a chainer.training.Trainer")
    return tr("exit code {code}", code=obs.returncode)


def _why_ranks_stopped(obs, timeout):
    if obs.timed_out:
        waiting = [r for r in range(obs.np) if not obs.ranks.get(r, {}).get("finished")]
        lines = [tr("deadlock: the {np}-rank run {how}; rank(s) {waiting} never finished (one rank waiting "
                    "for another forever?)", np=obs.np, how=_stopped_how(obs, timeout), waiting=waiting)]
        for r in range(obs.np):
            lines.append(tr("    rank {rank} last output: {output}", rank=r,
                            output=obs.rank_output(r, 2).replace("\n", " | ") or tr("(none)")))
        return "\n".join(lines)
    errors = {r: rec.get("error") for r, rec in obs.ranks.items() if rec.get("error")}
    for rank, error in sorted(errors.items()):
        if error.startswith("NotImplementedError"):
            return _not_implemented(error)
    if errors:
        crashes = "; ".join(tr("rank {rank} crashed with {error}", rank=r, error=e)
                                for r, e in sorted(errors.items()))
        return tr("{crashes} (the other ranks were aborted)", crashes=crashes)
    missing = [r for r in range(obs.np) if r not in obs.ranks]
    if missing:
        return tr("rank(s) {missing} died without a Python error (exit code {code})",
                  missing=missing, code=obs.returncode)
    return tr("exit code {code}", code=obs.returncode)
