"""The scored timing: the speed checks that time a student's training steps in turn with the
reference's (or, in self mode, with their own on one device or rank) through the paired timing
(checking.timing.paired), under its settings (checking.timing.settings.SCORED). A spread that
crosses a band's floor is timed once more; a reference slowed past its session median is timed
again and, slowed every time, flagged.
"""

import json
from pathlib import Path

from handson_lib import launch, settings
from handson_lib.checking.credit import band_share, credit_bands, grading_site
from handson_lib.checking.scripts import grader_seed
from handson_lib.checking.timing.observation import Baseline
from handson_lib.checking.timing.paired import run_paired
from handson_lib.checking.timing.settings import SCORED
from handson_lib.checking.watchdog import _ticking
from handson_lib.messages import tr


#: Task #2's timing (handson_lib.checking.timing.paired): the training steps of the reference and of the
#: student in turn; only the data set's size differs from the correctness run (less to set up).
TIMING_ARGS = ["--train-size", "640", "--test-size", "64", "--batchsize", "32", "--no-progress"]


#: The rest of the machine keeping this many cores busy during a self-mode timing is a load worth
#: naming beside a failed speed-up.
BUSY_CORES = 0.5


#: Self mode: steps on n devices (or ranks) that got less than this share of n times the CPU of the
#: steps on 1 were held back by the machine's load, not by the script: their speed-up is judged
#: per core they got (a busy 2-core machine gave a correct script 0.9-1.0x on 2 devices, and its
#: 2-device steps 1.05 times the CPU of its 1-device steps).
LOAD_LIMITED_SHARE = 0.85


def _contention(*observations):
    """A note for a speed check whose runs went without the machine's timing slot (another
    process held it past launch.SLOT_PATIENCE): their times shared the machine."""
    if any((getattr(obs, "progress", None) or {}).get("contended") for obs in observations if obs is not None):
        return tr(" (timed without the machine to itself: another process held its timing slot longer than "
                  "{seconds:.0f} s)", seconds=launch.SLOT_PATIENCE)
    return ""


def speed_names(against, np, scaling):
    if against == "reference":
        return ["throughput vs the reference"] + ([f"scaling 1 -> {np} ranks vs the reference"] if scaling else [])
    return [f"scaling: {np} ranks vs your 1-rank run"] if scaling else []


def _self_speed_check(report, name, script, n, run_args, limit, stall, site, say, task, devices):
    """Self mode: the student's training step on `n` devices (or ranks) timed in turn with their
    own on 1, on the same clock (the grader's way: a load weighs on both alike), against the first
    of the site's speed-up bands; the rest of the machine's load said beside it."""
    bands = credit_bands("self", site)
    needed = bands[0][0]
    timed_args = [*run_args, "--seed", str(grader_seed())]
    if devices:
        say(tr("Timing your training step on {n} devices and on 1 device, in turn ...", n=n))
        args, ranks = ["--gpus", *map(str, range(n)), *timed_args], None
        base = Baseline(None, 1, ["--gpus", "0", *timed_args], tr("your launch on 1 device"))
        what, baseline_name = tr("{n} workers", n=n), tr("1-device run")
    else:
        say(tr("Timing your training step on {np} ranks and on 1 rank, in turn ...", np=n))
        args, ranks = timed_args, n
        base = Baseline(1, 1, timed_args, tr("your launch on 1 rank"))
        what, baseline_name = tr("{np} ranks", np=n), tr("1-rank run")

    def timing():
        return run_paired(script, script, args, ranks=ranks, devices=n, steps=SCORED.steps, timeout=limit, stall=stall,
                          part=f"{task}: your steps on {n} and on 1, in turn", own_baseline=base, say=_ticking(say))

    timed = timing()
    if timed.finished and _undecided(timed.block_ratios(), bands):
        say(tr("The spread of the ratio crosses a band's floor: timing once more ..."))
        again = timing()
        if again.finished:
            timed = again.pooled(timed)
    if not timed.finished:
        report.add(name, False, tr("could not be timed: {why}",
                                   why=tr("the timing did not finish: {error}", error=timed.error)))
        return
    speedup, blocks = timed.ratio, timed.block_ratios()
    line = tr("{what}: {speedup:.2f}x your own {baseline} (the median over pairs of training steps timed in turn, "
              "spread {low:.2f}-{high:.2f}; their median steps: {fast:.1f} vs {slow:.1f} images/s; needed >= "
              "{needed:.2f} on site {site})", what=what,
              speedup=speedup, baseline=baseline_name, fast=timed.rate("student"), slow=timed.rate("reference"),
              low=min(blocks), high=max(blocks), needed=needed, site=grading_site(site))
    others, cores = timed.progress.get("others_cores"), timed.progress.get("cores")
    got = timed.cores("student") / timed.cores("reference") if timed.cores("reference") else None
    judged = speedup
    if others is not None:
        line += tr("; meanwhile the rest of the machine kept {others:.1f} of its {cores} cores busy",
                   others=others, cores=cores)
        if got is not None and got < LOAD_LIMITED_SHARE * n and others >= BUSY_CORES:
            judged = min(float(n), speedup * n / max(1.0, got))   # never past n workers' worth
            line += tr(", and gave your steps on {n} only {got:.2f} times the CPU of your steps on 1: per core they "
                       "got, {judged:.2f}x (judged so: the load, not your script, held them back)", n=n, got=got,
                       judged=judged)
        if judged < needed and others >= BUSY_CORES:
            line += tr(": a busy machine slows the run on more workers most. Check again when it is quieter "
                       "(`uptime` shows the load); the grader times your steps in turn with the reference's, so "
                       "there a load weighs on both alike")
    report.add(name, judged >= needed, line + _contention(timed), value=judged)


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
    if earlier is not None and obs.finished:
        obs.pooled(earlier)
    return obs


def _undecided(values, bands):
    """True when the spread of `values` crosses a band's floor (two bands would score it)."""
    return band_share(min(values), bands) != band_share(max(values), bands)


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


def _spreads(timed, np, scaling):
    """(the ratio's block ratios on `np`, the scaling's: on `np` over on 1, or None)."""
    blocks = {n: timed[n].block_ratios() for n in timed}
    if scaling:
        return blocks[np], [a / b for a, b in zip(blocks[np], blocks[1])]
    return blocks[np], None


def _timed_until_believed(time_on, counts, np, scaling, bands, keys, say):
    """{n: the paired timing on n}: timed once more (pooled) where a spread crosses a band's floor,
    and timed afresh (SCORED.retimings_when_slowed times at most) where the reference ran slower
    than in the session's other timings. `time_on(n, earlier)` times on n."""
    timed = {n: time_on(n, None) for n in counts}
    if all(t.finished for t in timed.values()):
        ratio_blocks, scaling_blocks = _spreads(timed, np, scaling)
        if _undecided(ratio_blocks, bands) or (scaling and _undecided(scaling_blocks, bands)):
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


def _not_credited(report, names, timed, keys):
    """Fail every speed check where the timings cannot be credited (the reference still slowed, a
    timing that did not finish, what the grader saw of the student's launch); whether it did."""
    still = {n: _slowed(keys[n], t) for n, t in timed.items()}
    if any(still.values()):
        for name in names:
            report.add(name, False, tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                       + tr("the reference's steps ran {slowdown:.1f} times slower than in this session's other "
                            "timings, three times: something beside them slowed them down, and a ratio to them is "
                            "not credited", slowdown=max(v for v in still.values() if v)))
        return True
    for n, t in timed.items():
        if t.finished:
            _keep_rate(keys[n], t.rate("reference"))
    broken = [n for n, t in timed.items() if not t.finished]
    if broken:
        # The timing's own words and the student's launch's output: never the reference's under
        # the autograder (handson_lib.checking.timing.paired).
        why = tr("the timing did not finish: {error}", error=timed[broken[0]].error)
        for name in names:
            report.add(name, False, tr("could not be timed: {why}", why=why))
        return True
    suspected = [s for t in timed.values() for s in t.suspicions]
    if suspected:
        for name in names:
            report.add(name, False, tr("tampering suspected, for the instructor to review: ")  # TAMPERING
                       + "; ".join(dict.fromkeys(suspected)))
        return True
    return False


def _paired_speed_checks(report, script, reference_script, np, scaling, limit, stall, bands, min_ratio,
                         min_scaling, task, say, devices=False, run_args=None):
    """Reference mode: the student's training step timed in turn with the reference's, on `np`
    ranks (the throughput check) and on 1 (the scaling check: the ratio on `np` ranks over the
    ratio on 1), or on `np` devices of one process (`devices`: Task #1, no scaling check). A
    spread that crosses a band's floor is measured once more, pooled, and said."""
    counts = [np, 1] if scaling else [np]
    keys = {n: f"{task}:{n}:{'devices' if devices else 'ranks'}" for n in counts}

    def time_on(n, earlier):
        return _time_in_turn(reference_script, script, n, limit, stall, task, say, earlier, devices, run_args)

    timed = _timed_until_believed(time_on, counts, np, scaling, bands, keys, say)
    names = speed_names("reference", np, scaling)
    if _not_credited(report, names, timed, keys):
        return
    _paired_verdicts(report, names, timed, np, scaling, bands, min_ratio, min_scaling)


def _paired_verdicts(report, names, timed, np, scaling, bands, min_ratio, min_scaling):
    """The throughput check (and the scaling check) of paired timings that can be credited."""
    ratio_blocks, scaling_blocks = _spreads(timed, np, scaling)
    t = timed[np]
    undecided = tr(" (the spread crosses a band's floor even after a second timing: scored by the median)")
    ratio = t.ratio
    report.add(names[0], ratio >= min_ratio,
               tr("{rate:.1f} images/s = {ratio:.2f} x the reference's {reference:.1f}, training steps timed in "
                  "turn (spread {low:.2f}-{high:.2f} over {blocks} blocks of steps; needed >= {needed:.2f})",
                  rate=t.rate("student"), ratio=ratio, reference=t.rate("reference"), low=min(ratio_blocks),
                  high=max(ratio_blocks), blocks=len(ratio_blocks), needed=min_ratio)
               + (undecided if _undecided(ratio_blocks, bands) else "") + _contention(*timed.values()), value=ratio)
    if scaling:
        share = ratio / timed[1].ratio
        mine = t.rate("student") / timed[1].rate("student")
        theirs = t.rate("reference") / timed[1].rate("reference")
        report.add(names[1], share >= min_scaling,
                   tr("{mine:.2f}x from 1 to {np} ranks, the reference {theirs:.2f}x beside it; your step is "
                      "{ratio:.2f}x the reference's on {np} ranks and {ratio_one:.2f}x on 1: {share:.2f} of its "
                      "scaling (spread {low:.2f}-{high:.2f}; needed >= {needed:.2f})", mine=mine, np=np,
                      theirs=theirs, ratio=ratio, ratio_one=timed[1].ratio, share=share,
                      low=min(scaling_blocks), high=max(scaling_blocks), needed=min_scaling)
                   + (undecided if _undecided(scaling_blocks, bands) else "") + _over_tcp(), value=share)


def _over_tcp():
    """Why 2 ranks may step slower than 1 in the grading sandbox (said beside the scaling)."""
    from handson_lib.checking.runs import transport
    if not transport():
        return ""
    return tr(" (in the grading sandbox the ranks talk over TCP, as between nodes: on one machine 2 ranks may step "
              "slower than 1; the share of the reference's scaling beside yours is what counts)")
