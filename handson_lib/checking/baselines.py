"""What the grader expects a correct run to cost, from its own baseline (the reference's run in this
session, or the student's own 1-device / 1-rank run): the CPU its processes use and the bytes its
ranks send each other. The verdicts weigh what was seen from outside against these
(handson_lib.verdicts.seen).
"""

from handson_lib.checking.runs import argument


def trained_images(obs):
    """The images a trusted run (the reference's) trained on, all workers or ranks together."""
    record = obs.ranks.get(0, {}) if hasattr(obs, "ranks") else obs.record
    width = obs.np if hasattr(obs, "ranks") else 1
    return (record.get("iterations") or 0) * sum(b or 0 for b in record.get("batch_sizes") or []) * width


def work(args, baseline, against):
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
    return asked, (trained_images(baseline) if against == "reference" else asked)


def expected_cpu(baseline, images):
    """The CPU-seconds the same training takes, scaled from the baseline's (seen from outside) to
    the images asked (`images`: `work`'s pair); None where it cannot be said."""
    theirs = (getattr(baseline, "outside", None) or {}).get("cpu")
    asked, done = images
    if not theirs or not asked or not done:
        return None
    return theirs * asked / done


#: The fewest iterations the grader's samples of the loopback must cover before its bytes are weighed:
#: a short run on a busy machine may end between two samples, its last one taken at start-up.
COVERED_ITERATIONS = 2


def averaging(obs, reference, images):
    """(bytes the ranks sent each other by the last iteration the grader's samples saw, bytes
    averaging the gradients moves over as many iterations, those iterations, the gradients' bytes
    L): about 2L(p-1) an iteration. Only what the samples covered is weighed (a run that ends
    between two samples sent the rest unseen). None where nothing is seen (outside the sandbox),
    the samples cover fewer than COVERED_ITERATIONS, or the reference cannot say."""
    outside = obs.outside or {}
    sent = outside.get("loopback_bytes")
    params = getattr(reference, "params", None) or {}
    iterations = (getattr(reference, "ranks", None) or {}).get(0, {}).get("iterations")
    asked, done = images
    if sent is None or obs.np < 2 or 0 not in params or not iterations or not asked or not done:
        return None
    iterations = round(iterations * asked / done)   # the reference's, for as many images as asked
    # The iteration the run had marked at the grader's last sample (its claim: one that says less
    # weighs less, one that says more is held to more), at most as many as the training asks.
    covered = min(max((iteration for iteration, _ in outside.get("traffic") or []), default=0), iterations)
    if covered < COVERED_ITERATIONS:
        return None
    gradient_bytes = 4 * params[0].size
    return sent, covered * 2 * (obs.np - 1) * gradient_bytes, covered, gradient_bytes
