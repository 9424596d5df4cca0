"""What the grader saw of a run itself, outside its processes (launch.OutsideView: their CPU, which
of them computed, the bytes the ranks sent each other; the launcher's output, tagged by rank) and
in the script as handed in (checking.source_review). It can only lower a score: it overrules a
check the run passed ("tampering suspected", for the instructor to review) or fails one the
exercise asks to be seen (rank 0's reports), and never passes a check alone.
"""

import re

from handson_lib.messages import tr


def review_said(found, limit=4):
    """The review's findings as one line: `line 12 imports atexit; line 20 uses os._exit`."""
    shown = "; ".join(f"line {line} {what}" for line, what in found[:limit])
    return shown + (f" (and {len(found) - limit} more)" if len(found) > limit else "")


def review_contradicts(report, flags):
    """Overrule "runs to the end" where the script's own lines (`flags`: [(line, what)] of
    checking.source_review) reach what a training script has no use for."""
    if flags:
        report.overrule("runs to the end", tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                        + tr("the script {lines}: a training script has no use for that (the grader's records "
                             "of the run are not the script's to touch)", lines=review_said(flags)))
    return bool(flags)


def work_seen(report, mine, expected, rules):
    """Overrule "runs to the end" where the CPU the run's processes used (`mine`, seen from outside)
    is less than rules.run_work_share of what the same training takes (`expected`)."""
    if mine is None or not expected:
        return
    if mine < rules.run_work_share * expected:
        report.overrule("runs to the end", tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                        + tr("the run says it trained, but its processes used {mine:.1f} CPU-seconds, {share:.0%} of "
                             "the {theirs:.1f} that the same training takes (seen by the grader, outside the run)",
                             mine=mine, share=mine / expected, theirs=expected))


def busy_processes(outside, share=0.2, floor=0.1, of_busiest=0.05):
    """The processes of an OutsideView result that computed: at least `floor` CPU-seconds and
    `of_busiest` of the busiest process's (the grading sandbox's bwrap spends a tenth of a second
    mounting the library file by file, more as the library grows: no worker), and a child at least
    `share` of what its parent computed while they both lived (a worker forked after its parent's
    start-up works beside it; the launcher, bwrap, mpiexec and an idle helper do not)."""
    processes = (outside or {}).get("processes") or []
    by_pid = {p["pid"]: p for p in processes}
    floor = max([floor] + [of_busiest * p["cpu"] for p in processes])
    busy = []
    for p in processes:
        parent, born = by_pid.get(p["ppid"]), p.get("parent_cpu_at_birth")
        beside = parent["cpu"] - born if parent is not None and born is not None else 0.0
        if p["cpu"] >= max(floor, share * beside):
            busy.append(p)
    return busy


def workers_seen(report, outside, gpus):
    """Task #1: fewer processes computed, seen from outside the run, than one per device."""
    if not (outside or {}).get("processes"):
        return
    busy = busy_processes(outside)
    if report.passed("one worker process per device") and len(busy) < gpus:   # a failed check keeps its own words
        report.overrule("one worker process per device",
                        tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                        + tr("the grader saw {n} process(es) computing ({cpu} CPU-seconds), {gpus} expected: one "
                             "process did the work", n=len(busy), gpus=gpus,
                             cpu=", ".join(f"{p['cpu']:.1f}" for p in busy) or "0"))


def averaging_seen(report, sent, expected, iterations, gradient_bytes, rules):
    """Task #2: the bytes the ranks sent each other by the last iteration the grader's samples saw
    (`sent`, on the grading sandbox's own loopback; None elsewhere) against what averaging the
    gradients moves in as many `iterations` (`expected`: about 2L(p-1) bytes an iteration for
    gradients of L bytes)."""
    if sent is None or not expected:
        return
    if report.passed("parameters identical on every rank") and sent < rules.averaging_share * expected:
        report.overrule("parameters identical on every rank",
                        tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                        + tr("the ranks sent each other {sent:.1f} MB in their first {iterations} iterations; averaging the "
                             "gradients moves about {expected:.0f} MB there ({iterations} iterations of 2L(p-1), L = "
                             "{megabytes:.2f} MB): each rank "
                             "trained alone. Wrap the optimizer with chainermn.create_multi_node_optimizer(opt, comm)",
                             sent=sent / 1e6, expected=expected / 1e6, iterations=iterations,
                             megabytes=gradient_bytes / 1e6))


#: A column of PrintReport's header: `epoch`, `iteration`, `elapsed_time`, or a reported key (`main/loss`).
_COLUMN = r"(?:epoch|iteration|elapsed_time|[\w.-]+/[\w./-]+)"
#: The iterations the process that marks a run's progress may mark while the others are stopped: the
#: step in hand ends.
STEPS_IN_HAND = 1


def dependence_seen(report, dependence, check, ranks):
    """Overrule `check` where the process that marks the run's progress went on training while the
    grader had stopped the run's other processes (launch.DependenceProbe: `dependence`): it does not
    need them. `ranks`: the others are ranks (else a main process's workers)."""
    advanced = (dependence or {}).get("advanced")
    if advanced is None or advanced <= STEPS_IN_HAND or not report.passed(check):
        return
    if ranks:
        why = tr("while the grader stopped the other ranks for {window:.1f} s, rank 0 went on training ({advanced} "
                 "iterations): it does not average its gradients with theirs", window=dependence["window"],
                 advanced=advanced)
    else:
        why = tr("while the grader stopped the run's {n} other process(es) for {window:.1f} s, its main process went "
                 "on training ({advanced} iterations): no worker computes a part of its gradients",
                 n=dependence["stopped"], window=dependence["window"], advanced=advanced)
    report.overrule(check, tr("tampering suspected, for the instructor to review: ") + why)   # TAMPERING


#: Where most of a run's iterations carried less than this share of what averaging moves, its
#: bytes were not the iterations' averaging (sent all at once, or a few iterations' only).
QUIET_ITERATIONS = 0.5


def _per_iteration(traffic):
    """The bytes of each stretch of at least two iterations, from (iteration, bytes so far) samples."""
    rates, start = [], None
    for iteration, sent in traffic:
        if start is None or iteration < start[0]:
            start = (iteration, sent)
        elif iteration - start[0] >= 2:
            rates.append((sent - start[1]) / (iteration - start[0]))
            start = (iteration, sent)
    return rates


def traffic_seen(report, traffic, per_iteration, rules):
    """Overrule "parameters identical on every rank" where most stretches of iterations carried less
    than rules.averaging_share of `per_iteration` (2L(p-1) bytes: what averaging moves each
    iteration), from the bytes the grader saw on the sandbox's loopback beside the iterations the
    ranks marked. Bytes sent all at once, or at a few iterations, are not every iteration's averaging."""
    rates = _per_iteration(traffic or [])
    if len(rates) < 3 or not per_iteration or not report.passed("parameters identical on every rank"):
        return
    quiet = sum(rate < rules.averaging_share * per_iteration for rate in rates) / len(rates)
    if quiet > QUIET_ITERATIONS:
        report.overrule("parameters identical on every rank",
                        tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                        + tr("in {share:.0%} of the stretches of iterations the grader watched, the ranks sent each "
                             "other less than {least:.2f} MB an iteration (averaging the gradients moves {megabytes:.2f} "
                             "MB every iteration): they did not average at every iteration", share=quiet,
                             least=rules.averaging_share * per_iteration / 1e6, megabytes=per_iteration / 1e6))


#: What the trainer's reports print, as the launcher tags each rank's lines ("[1,r]<stdout>: ...",
#: `mpiexec --output tag`): PrintReport's header (two columns or more, whichever the script chose)
#: and ProgressBar's bars.
_TAGGED_REPORT = re.compile(rf"^\[\d+,(\d+)\]<std(?:out|err)>: ?(?:\x1b\[J)?(?:{_COLUMN}(?:[ \t]+{_COLUMN})+[ \t]*$|"
                            r"\s*(?:total|this epoch) \[)", re.M)


def reporting_ranks(output):
    """The ranks whose tagged output holds the trainer's reports (PrintReport's header, ProgressBar):
    the launcher tags each line with its rank, which a rank's own records do not make."""
    return sorted({int(rank) for rank in _TAGGED_REPORT.findall(output or "")})


def reports_seen(report, output):
    """"reports only on rank 0" passes only where the tagged output shows rank 0 printing the
    trainer's reports and no other rank: another rank seen printing them overrules the records'
    pass; rank 0 not seen printing them fails it."""
    ranks = reporting_ranks(output)
    others = [r for r in ranks if r != 0]
    if others and report.passed("reports only on rank 0"):
        report.overrule("reports only on rank 0", tr("tampering suspected, for the instructor to review: ")  # TAMPERING
                        + tr("the run's records say rank 0 alone reports, but rank(s) {ranks} printed the trainer's "
                             "reports (seen in the launcher's output, where each line carries its rank)", ranks=others))
    elif 0 not in ranks and report.passed("reports only on rank 0"):
        report.overrule("reports only on rank 0",
                        tr("rank 0 printed no report (PrintReport's header is not in its output): extend the trainer "
                           "with extensions.PrintReport([...]) under `if comm.rank == 0:`"))
