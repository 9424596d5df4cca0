"""What the grader sees of a run itself, outside its processes (launch.OutsideView) and in the
script as handed in: it overrules a check that the run's own records passed ("tampering
suspected", for the instructor to review).
"""

import re

from handson_lib import launch
from handson_lib.checking import source_review
from handson_lib.checking.runs import argument
from handson_lib.messages import tr


# What the run's processes record (observed.json, the workers' and ranks' arrays) is a claim: it
# can fail a check, never pass one alone. Each pass rests as well on what the grader sees itself:
#   - the seed: the grader picks the data's seed of every correctness run (`grader_seed`), and
#     evaluates the trained model on held-out images of that seed (checking.evidence): a model
#     trained before the run does not fit its classes;
#   - the run's processes seen from outside (launch.OutsideView): the CPU they used against the
#     same training's (`RUN_WORK_SHARE`), how many of them computed (Task #1's workers), and in
#     the grading sandbox the bytes the ranks sent each other (Task #2: averaging the gradients
#     moves about 2L(p-1) bytes an iteration, `AVERAGING_SHARE`; ranks that train alone, none);
#   - the script as handed in (checking.source_review): no atexit, os._exit, launcher files ...

#: The least CPU a run may take, as a share of what the same training took its baseline (the
#: reference's run, or the student's own 1-device / 1-rank run), seen from outside.
RUN_WORK_SHARE = 0.4


#: The least the ranks must send each other, as a share of what averaging the gradients moves.
AVERAGING_SHARE = 0.3


def _trained_images(obs):
    """The images a trusted run (the reference's) trained on, all workers or ranks together."""
    record = obs.ranks.get(0, {}) if hasattr(obs, "ranks") else obs.record
    width = obs.np if hasattr(obs, "ranks") else 1
    return (record.get("iterations") or 0) * sum(b or 0 for b in record.get("batch_sizes") or []) * width


def _work(args, baseline, against):
    """(the images the grader's arguments ask the student's run to train on, the images its
    baseline trained on): the student's own baseline ran the same arguments; the reference's
    images are its trusted record's. (None, None) when the arguments do not say."""
    if baseline is None:
        return None, None
    record = baseline.ranks.get(0, {}) if hasattr(baseline, "ranks") else baseline.record
    n_train = argument(args, "--train-size") or (record.get("dataset") or {}).get("n_train")
    try:
        asked = int(argument(args, "--epoch", 4)) * int(n_train)
    except (TypeError, ValueError):
        return None, None
    return asked, (_trained_images(baseline) if against == "reference" else asked)


def _seen_by_the_grader(report, obs, baseline, flags, work=(None, None)):
    """Overrule "runs to the end" where the script's own lines (`flags`) or the CPU its processes
    used, seen from outside, contradict a run that says it trained: less than RUN_WORK_SHARE of
    the baseline's CPU per image, for the images `work` (_work) says."""
    if flags:
        report.overrule("runs to the end", tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                        + tr("the script {lines}: a training script has no use for that (the grader's records "
                             "of the run are not the script's to touch)", lines=source_review.said(flags)))
        return
    mine = (obs.outside or {}).get("cpu")
    theirs = (getattr(baseline, "outside", None) or {}).get("cpu")
    asked, done = work
    if mine is None or not theirs or not asked or not done:
        return
    expected = theirs * asked / done
    if mine < RUN_WORK_SHARE * expected:
        report.overrule("runs to the end", tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                        + tr("the run says it trained, but its processes used {mine:.1f} CPU-seconds, {share:.0%} of "
                             "the {theirs:.1f} that the same training takes (seen by the grader, outside the run)",
                             mine=mine, share=mine / expected, theirs=expected))


def _workers_seen(report, obs, gpus):
    """Task #1: the processes that computed, seen from outside the run, against one per device."""
    seen = (obs.outside or {}).get("processes")
    if not seen:
        return
    busy = launch.busy_processes(obs.outside)
    if report.passed("one worker process per device") and len(busy) < gpus:   # a failed check keeps the records' own words (they say why)
        report.overrule("one worker process per device",
                        tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                        + tr("the grader saw {n} process(es) computing ({cpu} CPU-seconds), {gpus} expected: one "
                             "process did the work", n=len(busy), gpus=gpus,
                             cpu=", ".join(f"{p['cpu']:.1f}" for p in busy) or "0"))


def _averaging_seen(report, obs, reference, work=(None, None)):
    """Task #2: the bytes the ranks sent each other over the run, seen from outside (the grading
    sandbox's own loopback), against what averaging the gradients moves: about 2L(p-1) bytes an
    iteration for gradients of L bytes, the reference's L and iterations (the same training).
    Nothing to see outside the sandbox, or without the reference: the records decide there."""
    sent = (obs.outside or {}).get("loopback_bytes")
    params = getattr(reference, "params", None) or {}
    iterations = (getattr(reference, "ranks", None) or {}).get(0, {}).get("iterations")
    asked, done = work
    if sent is None or obs.np < 2 or 0 not in params or not iterations or not asked or not done:
        return
    iterations = round(iterations * asked / done)   # the reference's, for as many images as asked
    expected = iterations * 2 * (obs.np - 1) * 4 * params[0].size
    if report.passed("parameters identical on every rank") and sent < AVERAGING_SHARE * expected:   # a failed check keeps the records' own words
        report.overrule("parameters identical on every rank",
                        tr("tampering suspected, for the instructor to review: ")   # TAMPERING
                        + tr("the ranks sent each other {sent:.1f} MB over the run; averaging the gradients moves about "
                             "{expected:.0f} MB ({iterations} iterations of 2L(p-1), L = {megabytes:.2f} MB): each rank "
                             "trained alone. Wrap the optimizer with chainermn.create_multi_node_optimizer(opt, comm)",
                             sent=sent / 1e6, expected=expected / 1e6, iterations=iterations,
                             megabytes=4 * params[0].size / 1e6))


#: What the trainer's reports print, as the launcher tags each rank's lines ("[1,r]<stdout>: ...",
#: `mpiexec --output tag`): PrintReport's header and ProgressBar's bars.
_TAGGED_REPORT = re.compile(r"^\[\d+,(\d+)\]<std(?:out|err)>: ?(?:\x1b\[J)?(?:epoch\s+main/|\s*(?:total|this epoch) \[)",
                            re.M)


def _reports_seen(report, obs):
    """Overrule "reports only on rank 0" where the launcher's tagged output, which the ranks'
    records do not make, shows another rank printing the trainer's reports."""
    seen = sorted({int(rank) for rank in _TAGGED_REPORT.findall(obs.output or "")} - {0})
    if seen and report.passed("reports only on rank 0"):
        report.overrule("reports only on rank 0", tr("tampering suspected, for the instructor to review: ")  # TAMPERING
                        + tr("the run's records say rank 0 alone reports, but rank(s) {ranks} printed the trainer's "
                             "reports (seen in the launcher's output, where each line carries its rank)", ranks=seen))
