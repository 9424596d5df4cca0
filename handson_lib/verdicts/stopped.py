"""Why a run did not finish, in the student's words: the words of a failed "runs to the end"
(the watchdog's stop, a crash, a part not written yet), from what the grader saw of the run.
"""

from handson_lib.messages import tr


#: A run whose last training iteration came at most this many seconds before the watchdog stopped
#: it for time was still training: slow, not looping.
STILL_TRAINING = 30.0


def stopped_how(obs, timeout):
    """How the watchdog stopped a run: early once iterations stopped, once its processes had used
    more CPU than the same training takes, or at its time limit (still training: too slow)."""
    progress = obs.progress or {}
    if progress.get("over_cpu"):
        return tr("was stopped by the watchdog after {seconds:.0f} s: its processes had used more CPU than five times "
                  "the same training takes the reference (an infinite loop, or training far more than asked?)",
                  seconds=obs.seconds)
    if not progress.get("stalled") and progress.get("iterations") and \
            (progress.get("since_progress") or 0) <= STILL_TRAINING:
        return tr("was still training when the watchdog stopped it at its limit of {limit:.0f} s ({iterations} "
                  "iterations done): too slow for the grader, not an infinite loop", limit=obs.limit or timeout,
                  iterations=progress["iterations"])
    if progress.get("stalled"):
        if progress.get("first_progress"):
            return tr("waited {stall:.0f} s for another training iteration and was stopped early by the "
                      "watchdog (after {seconds:.0f} s)", stall=progress["stall"], seconds=obs.seconds)
        return tr("waited {stall:.0f} s for its first training iteration and was stopped early by the "
                  "watchdog (after {seconds:.0f} s)", stall=progress["stall"], seconds=obs.seconds)
    return tr("did not finish within {limit:.0f} s and was stopped by the watchdog", limit=obs.limit or timeout)


def not_implemented(error):
    """The message of a NotImplementedError (`require_done`: what is still to do)."""
    return tr("not implemented yet: {what}", what=error.split(": ", 1)[1])


def _slow(obs):
    progress = obs.progress or {}
    return progress.get("over_cpu") or (not progress.get("stalled") and progress.get("iterations")
                                        and (progress.get("since_progress") or 0) <= STILL_TRAINING)


def why_it_stopped(obs, timeout):
    if obs.timed_out and _slow(obs):
        return stopped_how(obs, timeout)
    if obs.timed_out:
        return tr("{how} (an infinite loop, or workers waiting for each other?)", how=stopped_how(obs, timeout))
    error = obs.record.get("error") or ""
    if error.startswith("NotImplementedError"):
        return not_implemented(error)
    if error:
        return tr("stopped with {error}", error=error)
    if not obs.record:
        return tr("crashed before training started (exit code {code})", code=obs.returncode)
    if not obs.record.get("trainers"):
        return tr("finished without creating a chainer.training.Trainer")
    return tr("exit code {code}", code=obs.returncode)


def why_ranks_stopped(obs, timeout):
    if obs.timed_out and _slow(obs):
        return stopped_how(obs, timeout)
    if obs.timed_out:
        waiting = [r for r in range(obs.np) if not obs.ranks.get(r, {}).get("finished")]
        lines = [tr("deadlock: the {np}-rank run {how}; rank(s) {waiting} never finished (one rank waiting "
                    "for another forever?)", np=obs.np, how=stopped_how(obs, timeout), waiting=waiting)]
        for r in range(obs.np):
            lines.append(tr("    rank {rank} last output: {output}", rank=r,
                            output=obs.rank_output(r, 2).replace("\n", " | ") or tr("(none)")))
        return "\n".join(lines)
    errors = {r: rec.get("error") for r, rec in obs.ranks.items() if rec.get("error")}
    for rank, error in sorted(errors.items()):
        if error.startswith("NotImplementedError"):
            return not_implemented(error)
    if errors:
        crashes = "; ".join(tr("rank {rank} crashed with {error}", rank=r, error=e)
                                for r, e in sorted(errors.items()))
        return tr("{crashes} (the other ranks were aborted)", crashes=crashes)
    missing = [r for r in range(obs.np) if r not in obs.ranks]
    if missing:
        return tr("rank(s) {missing} died without a Python error (exit code {code})",
                  missing=missing, code=obs.returncode)
    return tr("exit code {code}", code=obs.returncode)
