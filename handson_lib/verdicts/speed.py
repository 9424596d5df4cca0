"""The speed verdicts: the student's training steps timed in turn with the reference's (or, in self
mode, with their own on one device or rank), as the grader's timings measured them
(checking.timing), judged in the site's bands. A step is credited with the images it trained only
where what the student's timed launch trained matches the grader's replay of that many steps
(verdicts.structure): a launch that trains less per step than the run it was graded on is no
faster, whatever its iterator says.
"""

from handson_lib.messages import tr
from handson_lib.verdicts.credit import band_share
from handson_lib.verdicts.structure import not_shown


def contention(rules, *observations):
    """A note for a speed check whose runs went without the machine's timing slot (another
    process held it past the slot's patience): their times shared the machine."""
    if any((getattr(obs, "progress", None) or {}).get("contended") for obs in observations if obs is not None):
        return tr(" (timed without the machine to itself: another process held its timing slot longer than "
                  "{seconds:.0f} s)", seconds=rules.slot_patience)
    return ""


def over_tcp(rules):
    """Why 2 ranks may step slower than 1 in the grading sandbox (said beside the scaling)."""
    if not rules.ranks_over_tcp:
        return ""
    return tr(" (in the grading sandbox the ranks talk over TCP, as between nodes: on one machine 2 ranks may step "
              "slower than 1; the share of the reference's scaling beside yours is what counts)")


def undecided(values, bands):
    """True when the spread of `values` crosses a band's floor (two bands would score it)."""
    return band_share(min(values), bands) != band_share(max(values), bands)


def spreads(timed, np, scaling):
    """(the ratio's block ratios on `np`, the scaling's: on `np` over on 1, or None)."""
    blocks = {n: timed[n].block_ratios() for n in timed}
    if scaling:
        return blocks[np], [a / b for a, b in zip(blocks[np], blocks[1])]
    return blocks[np], None


def speed_names(against, np, scaling):
    if against == "reference":
        return ["throughput vs the reference"] + ([f"scaling 1 -> {np} ranks vs the reference"] if scaling else [])
    return [f"scaling: {np} ranks vs your 1-rank run"] if scaling else []


def trained_as_timed(report, names, trained, rules, unit):
    """Fail every speed check where a launch the grader timed did not train what its steps must:
    `trained` is [(width, Comparison of its parameters through the timed steps with the replay)]."""
    for width, comparison in trained:
        if not comparison.matched(rules):
            for name in names:
                report.add(name, False, tr("not credited: the timed training steps did not train what the graded run "
                                           "trained: {why}", why=not_shown(comparison, width, unit, rules)))
            return True
    return False


def not_credited(report, names, timed, slowed):
    """Fail every speed check where the timings cannot be credited (the reference still slowed:
    `slowed`, {n: how many times slower than its session median, or None}; a timing that did not
    finish; what the grader saw of the student's launch); whether it did."""
    if any(slowed.values()):
        for name in names:
            report.add(name, False, tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                       + tr("the reference's steps ran {slowdown:.1f} times slower than in this session's other "
                            "timings, three times: something beside them slowed them down, and a ratio to them is "
                            "not credited", slowdown=max(v for v in slowed.values() if v)))
        return True
    broken = [n for n, t in timed.items() if not t.finished]
    if broken:
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


def paired_verdicts(report, names, timed, np, scaling, rules):
    """The throughput check (and the scaling check) of paired timings that can be credited."""
    bands = rules.throughput_bands
    ratio_blocks, scaling_blocks = spreads(timed, np, scaling)
    t = timed[np]
    still = tr(" (the spread crosses a band's floor even after a second timing: scored by the median)")
    ratio = t.ratio
    mine, theirs = t.median_pair_rates()
    report.add(names[0], ratio >= rules.min_throughput_ratio,
               tr("{ratio:.2f} x the reference's speed: in the median pair of training steps timed in turn, yours "
                  "{rate:.1f} images/s, the reference's {reference:.1f} (spread {low:.2f}-{high:.2f} over {blocks} "
                  "blocks of steps; needed >= {needed:.2f})", rate=mine, ratio=ratio, reference=theirs,
                  low=min(ratio_blocks), high=max(ratio_blocks), blocks=len(ratio_blocks),
                  needed=rules.min_throughput_ratio)
               + (still if undecided(ratio_blocks, bands) else "") + contention(rules, *timed.values()), value=ratio)
    if scaling:
        share = ratio / timed[1].ratio
        report.add(names[1], share >= rules.min_scaling_ratio,
                   tr("your step is {ratio:.2f}x the reference's on {np} ranks and {ratio_one:.2f}x on 1: {share:.2f} "
                      "of the reference's scaling from 1 to {np} ranks ({ratio:.2f} / {ratio_one:.2f}; spread "
                      "{low:.2f}-{high:.2f}; needed >= {needed:.2f})", np=np, ratio=ratio, ratio_one=timed[1].ratio,
                      share=share, low=min(scaling_blocks), high=max(scaling_blocks), needed=rules.min_scaling_ratio)
                   + (still if undecided(scaling_blocks, bands) else "") + over_tcp(rules), value=share)


def _busy(timed, rules):
    """Whether the rest of the machine was busy while the steps were timed: its load (`uptime`'s
    average) at least its cores, or the cores it kept busy at least `rules.busy_cores`."""
    progress = timed.progress or {}
    load, cores, others = progress.get("load"), progress.get("cores"), progress.get("others_cores")
    return (load is not None and cores and load >= cores) or (others is not None and others >= rules.busy_cores)


def self_speed_verdict(report, name, timed, n, devices, rules):
    """Self mode: the student's steps on `n` devices (or ranks) timed in turn with their own on 1,
    against the first of the site's speed-up bands. On a busy machine (its load said as `uptime`
    shows it) the steps on n get fewer cores than n: the speed-up is then judged per CPU the steps
    used (n times the CPU of a step on 1 over the CPU of a step on n, per image), which the load does
    not change, and said so."""
    needed = rules.speedup_bands[0][0]
    what = tr("{n} workers", n=n) if devices else tr("{np} ranks", np=n)
    baseline_name = tr("1-device run") if devices else tr("1-rank run")
    on_n = tr("on {n} devices", n=n) if devices else tr("on {np} ranks", np=n)
    speedup, blocks = timed.ratio, timed.block_ratios()
    fast, slow = timed.median_pair_rates()
    line = tr("{what}: {speedup:.2f}x your own {baseline}, your own steps on 1 and {on_n} timed in turn: in the "
              "median pair, {fast:.1f} vs {slow:.1f} images/s (spread {low:.2f}-{high:.2f}; needed >= {needed:.2f} on "
              "site {site})", what=what, speedup=speedup, baseline=baseline_name, on_n=on_n, fast=fast, slow=slow,
              low=min(blocks), high=max(blocks), needed=needed, site=rules.site)
    progress = timed.progress or {}
    load, cores = progress.get("load"), progress.get("cores")
    got = timed.cores("student") / timed.cores("reference") if timed.cores("reference") else None
    judged = speedup
    if load is not None:
        line += tr("; the machine's load meanwhile: {load:.1f} on {cores} cores (`uptime`)", load=load, cores=cores)
    busy = _busy(timed, rules)
    if busy and got and got < rules.load_limited_share * n:
        judged = min(float(n), speedup * n / got)   # never past n workers' worth
        line += tr(": your steps {on_n} got only {got:.2f} times the CPU of your steps on 1, so per CPU they used "
                   "they train {judged:.2f}x as fast (judged so: the load, not your script, held them back)",
                   on_n=on_n, got=got, judged=judged)
    if judged < needed and busy:
        line += tr(". A busy machine slows the run on more workers most: check again when it is quieter (`uptime` "
                   "below {cores}); the grader times your steps in turn with the reference's, so there a load weighs "
                   "on both alike", cores=cores or 2)
    report.add(name, judged >= needed, line + contention(rules, timed), value=judged)
