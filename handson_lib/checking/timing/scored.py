"""The scored timing: the speed checks that time a student's training steps in turn with the
reference's (or, in self mode, with their own on one device or rank) through the paired timing
(checking.timing.paired), under its settings (checking.timing.settings.SCORED), and the grader's
replay of as many steps (checking.replay), which shows whether the timed steps trained what they
are credited with. A spread that crosses a band's floor is timed once more; a reference slowed
past its session median is timed again and, slowed every time, flagged. The verdicts are
handson_lib.verdicts.speed's.
"""

import json
from pathlib import Path

from handson_lib import settings
from handson_lib.checking import replay
from handson_lib.checking.runs import argument
from handson_lib.checking.scripts import grader_seed
from handson_lib.checking.timing.observation import Baseline
from handson_lib.checking.timing.paired import run_paired
from handson_lib.checking.timing.settings import SCORED
from handson_lib.checking.watchdog import _ticking
from handson_lib.messages import tr
from handson_lib.verdicts import speed, structure

#: Task #2's timing (handson_lib.checking.timing.paired): the training steps of the reference and of the
#: student in turn; only the data set's size differs from the correctness run (less to set up).
TIMING_ARGS = ["--train-size", "640", "--test-size", "64", "--batchsize", "32", "--no-progress"]


def _trained(task, args, width, timed, unit):
    """[(width, the parameters the student's launch kept through its timed steps against the grader's
    replay of as many steps)] of one paired timing (none where it did not finish)."""
    if not timed.finished:
        return []
    plan = replay.timing_plan(SCORED.warmup_steps + len(timed.steps["student"]))
    seed = int(argument(args, "--seed"))
    who = ["main"] if unit == "devices" else [f"rank{r}" for r in range(width)]
    return [(width, structure.compare(timed.kept, replay.replay(task, args, width, seed, plan, timed.kept), who))]


def _self_speed_check(report, name, script, n, run_args, limit, stall, rules, say, task, devices):
    """Self mode: the student's training step on `n` devices (or ranks) timed in turn with their
    own on 1, on the same clock (the grader's way: a load weighs on both alike), judged by
    verdicts.speed.self_speed_verdict."""
    bands = rules.speedup_bands
    timed_args = [*run_args, "--seed", str(grader_seed())]
    if devices:
        say(tr("Timing your training step on {n} devices and on 1 device, in turn ...", n=n))
        args, ranks = ["--gpus", *map(str, range(n)), *timed_args], None
        base = Baseline(None, 1, ["--gpus", "0", *timed_args], tr("your launch on 1 device"))
    else:
        say(tr("Timing your training step on {np} ranks and on 1 rank, in turn ...", np=n))
        args, ranks = timed_args, n
        base = Baseline(1, 1, timed_args, tr("your launch on 1 rank"))
    unit = "devices" if devices else "ranks"

    def timing():
        timed = run_paired(script, script, args, ranks=ranks, devices=n, steps=SCORED.steps, timeout=limit,
                           stall=stall, part=f"{task}: your steps on {n} and on 1, in turn", own_baseline=base,
                           say=_ticking(say))
        timed.trained = _trained(task, timed_args, n, timed, unit)
        return timed

    timed = timing()
    if timed.finished and speed.undecided(timed.block_ratios(), bands):
        say(tr("The spread of the ratio crosses a band's floor: timing once more ..."))
        again = timing()
        if again.finished:
            timed = again.pooled(timed)
    if not timed.finished:
        report.add(name, False, tr("could not be timed: {why}",
                                   why=tr("the timing did not finish: {error}", error=timed.error)))
        return
    if speed.trained_as_timed(report, [name], timed.trained, rules, unit):
        return
    speed.self_speed_verdict(report, name, timed, n, devices, rules)


def _time_in_turn(reference_script, script, np, limit, stall, task, say, earlier=None, devices=False,
                  run_args=None):
    """A paired timing (handson_lib.checking.timing.paired) on `np` ranks, or in one process on `np`
    devices (Task #1), pooled with an `earlier` one. Both launches get the correctness run's
    arguments (`run_args`) and a seed of the grader's, as that run did: a script cannot tell the
    timed steps from the graded training by its arguments."""
    timed_args = [*(TIMING_ARGS if run_args is None else run_args), "--seed", str(grader_seed())]
    if devices:
        say(tr("Timing your training step against the reference's, in turn, on {n} devices ...", n=np))
        args, ranks, unit = ["--gpus", *map(str, range(np)), *timed_args], None, "devices"
    else:
        say(tr("Timing your training step against the reference's, in turn, on {np} rank(s) ...", np=np))
        args, ranks, unit = timed_args, np, "rank(s)"
    obs = run_paired(reference_script, script, args, ranks=ranks, devices=np, steps=SCORED.steps, timeout=limit,
                     stall=stall, part=f"{task}: timing on {np} {unit}, the reference's steps and yours in turn")
    obs.trained = _trained(task, timed_args, np, obs, "devices" if devices else "ranks")
    if earlier is not None and obs.finished:
        obs.pooled(earlier)
    return obs


#: The session's reference rates of the paired timings, in the grader's reference cache.
REFERENCE_RATES = "paired-reference-rates.jsonl"


def _session_rates(key):
    """The reference's rates in this session's earlier paired timings of `key` ([] outside a
    grading session: the student's self-check, a test)."""
    cache = settings.current().grader.reference_cache
    if not cache:
        return []
    try:
        lines = (Path(cache) / REFERENCE_RATES).read_text().splitlines()
    except OSError:
        return []
    rates = []
    for line in lines:
        try:
            kept = json.loads(line)
        except ValueError:
            continue
        if kept.get("key") == key and isinstance(kept.get("rate"), (int, float)):
            rates.append(float(kept["rate"]))
    return rates


def _keep_rate(key, rate):
    cache = settings.current().grader.reference_cache
    if cache:
        import fcntl
        with open(Path(cache) / REFERENCE_RATES, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.write(json.dumps({"key": key, "rate": rate}) + "\n")


def _slowed(key, timing, settings=SCORED):
    """How many times slower than its session median the reference ran in `timing` (None when it
    did not, or there is no median yet)."""
    rates = sorted(_session_rates(key))
    if len(rates) < settings.rates_before_a_median or not timing.finished:
        return None
    median = rates[len(rates) // 2]
    slowdown = median / timing.rate("reference")
    return slowdown if slowdown > settings.reference_slowdown else None


def _timed_until_believed(time_on, counts, np, scaling, bands, keys, say):
    """{n: the paired timing on n}: timed once more (pooled) where a spread crosses a band's floor,
    and timed afresh (SCORED.retimings_when_slowed times at most) where the reference ran slower
    than in the session's other timings. `time_on(n, earlier)` times on n."""
    timed = {n: time_on(n, None) for n in counts}
    if all(t.finished for t in timed.values()):
        ratio_blocks, scaling_blocks = speed.spreads(timed, np, scaling)
        if speed.undecided(ratio_blocks, bands) or (scaling and speed.undecided(scaling_blocks, bands)):
            say(tr("The spread of the ratio crosses a band's floor: timing once more ..."))
            timed = {n: time_on(n, timed[n]) for n in counts}
    for _ in range(SCORED.retimings_when_slowed):
        slowed = [n for n in counts if _slowed(keys[n], timed[n])]
        if not slowed:
            break
        say(tr("The reference ran slower than in this session's other timings: timing once more ..."))
        for n in slowed:
            timed[n] = time_on(n, None)
    return timed


def _paired_speed_checks(report, script, reference_script, np, scaling, limit, stall, rules, task, say,
                         devices=False, run_args=None):
    """Reference mode: the student's training step timed in turn with the reference's, on `np`
    ranks (the throughput check) and on 1 (the scaling check: the ratio on `np` ranks over the
    ratio on 1), or on `np` devices of one process (`devices`: Task #1, no scaling check). A
    spread that crosses a band's floor is measured once more, pooled, and said."""
    counts = [np, 1] if scaling else [np]
    keys = {n: f"{task}:{n}:{'devices' if devices else 'ranks'}" for n in counts}

    def time_on(n, earlier):
        return _time_in_turn(reference_script, script, n, limit, stall, task, say, earlier, devices, run_args)

    timed = _timed_until_believed(time_on, counts, np, scaling, rules.throughput_bands, keys, say)
    names = speed.speed_names("reference", np, scaling)
    slowed = {n: _slowed(keys[n], t) for n, t in timed.items()}
    if speed.not_credited(report, names, timed, slowed):
        return
    for n, t in timed.items():
        _keep_rate(keys[n], t.rate("reference"))
    trained = [pair for t in timed.values() for pair in t.trained]
    if speed.trained_as_timed(report, names, trained, rules, "devices" if devices else "ranks"):
        return
    speed.paired_verdicts(report, names, timed, np, scaling, rules)
