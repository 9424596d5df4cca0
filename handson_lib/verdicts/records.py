"""Checks on what a run recorded of itself (its shards, its accuracy, its throughput beside the
reference's run), shared by the tasks. A record is a claim: it can fail a check and name the fix,
never pass one alone (verdicts.structure passes the structure from what the run trained,
verdicts.seen overrules what the grader's own view contradicts).
"""

from handson_lib.messages import tr
from handson_lib.verdicts.speed import contention


def agreement(recorded_images, measured_images):
    """How far a run's own accuracy may lie from the grader's before it counts as a contradiction:
    five standard deviations of the difference of two accuracies of that many images (at worst,
    50 %), at least 0.15 and at most 0.35 (a record cannot buy a wider margin by its image count)."""
    spread = 0.5 * ((1 / max(1, recorded_images)) + (1 / max(1, measured_images))) ** 0.5
    return min(0.35, max(0.15, 5 * spread))


def _equal_length_padding(shards, sizes, train):
    """The images that scatter_dataset's default force_equal_length=True trains twice, when the
    shards are exactly that: each of ceil(N / n) images, together covering the N training images,
    with n * ceil(N / n) - N images more than N (the windows overlap by that much). None otherwise."""
    if train is None:
        return None
    total, n = len(set(train)), len(shards)
    size = -(-total // n)
    extra = n * size - total
    union = set().union(*shards)
    if extra == 0 or any(s != size for s in sizes) or union != set(train) or sum(sizes) - len(union) != extra:
        return None
    return extra


def _shard_checks(report, record, what="worker"):
    """The shards of the workers (Task #1) or of the ranks (`what="rank"`, Task #2)."""
    shards = [set(s) for s in record.get("shards", [])]
    train = record.get("train_fingerprints")
    sizes = [len(s) for s in record.get("shards", [])]
    who = tr("rank") if what == "rank" else tr("worker")
    if len(shards) < 2:
        report.add("shards are disjoint", False,
                   tr("only {n} {who} iterator(s): nothing was split", n=len(shards), who=who))
        report.add("shards cover the training set", False, tr("not checked: the data was not split"))
        return
    overlap = set().union(*[a & b for i, a in enumerate(shards) for b in shards[i + 1:]])
    padding = _equal_length_padding(shards, sizes, train) if what == "rank" else None
    if overlap and padding is not None:
        report.add("shards are disjoint", True,
                   tr("{n} shards of {size} images; {twice} image(s) in two shards: the padding of "
                      "scatter_dataset's force_equal_length=True ({total} images do not split evenly over {n} "
                      "ranks), no image otherwise twice", n=len(shards), size=sizes[0], twice=padding,
                      total=len(set(train))))
    elif overlap:
        share = len(overlap) / max(1, min(sizes))
        msg = tr("{n} training images are in more than one {who}'s shard ({share:.0%} of the smallest shard)",
                 n=len(overlap), who=who, share=share)
        if share > 0.99 and what == "rank":
            msg = tr("every rank trains on the whole training set: give each rank its own part with "
                     "chainermn.scatter_dataset(train, comm, shuffle=True)")
        elif share > 0.99:
            msg = tr("every worker gets the same images (the whole training set each): split it with "
                     "chainer.datasets.split_dataset_n_random(train, n) and give each worker its own part")
        report.add("shards are disjoint", False, msg)
    else:
        report.add("shards are disjoint", True,
                   tr("{n} shards of {sizes} images, no image twice", n=len(shards), sizes=sizes))
    if train is None:
        report.add("shards cover the training set", False,
                   tr("the script did not load its data with the course's loader (runtime.load_data)"))
        return
    union = set().union(*shards)
    missing = len(set(train) - union)
    if missing:
        report.add("shards cover the training set", False,
                   tr("{missing} of {total} training images are in no shard", missing=missing, total=len(set(train))))
    else:
        report.add("shards cover the training set", True,
                   tr("all {total} training images are used", total=len(set(train))))


def _accuracy_check(report, record, min_accuracy, seen=None):
    """The accuracy of the trained model, as the grader measured it itself (`seen`: the run's
    evidence, checking.evidence) beside what the run recorded: a contradiction is no pass but
    "tampering suspected", for the instructor to review. Without evidence (a run made by hand in
    a test), the record's."""
    acc = record.get("accuracy")
    n_class = record.get("dataset", {}).get("n_class", 10)
    if acc is None:
        report.add("accuracy beats chance", False, tr("no test accuracy could be measured"))
        return
    if seen is None:
        report.add("accuracy beats chance", acc >= min_accuracy,
                   tr("test accuracy {accuracy:.3f} measured by the observer (chance {chance:.2f}, needed "
                      "{needed:.2f})", accuracy=acc, chance=1 / n_class, needed=min_accuracy))
        return
    measured = seen.get("accuracy")
    if measured is None:
        report.add("accuracy beats chance", False,
                   tr("the grader could not evaluate the trained model itself: {why}", why=seen.get("why")))
    elif abs(measured - acc) > agreement(record.get("dataset", {}).get("n_test") or 1, seen.get("images") or 1):
        report.add("accuracy beats chance", False,
                   tr("tampering suspected, for the instructor to review: ")   # TAMPERING, for the catalogue
                   + tr("the run recorded a test accuracy of {recorded:.3f}, the grader measured {measured:.3f} for "
                        "the trained model on {images} images it never trained on", recorded=acc, measured=measured,
                        images=seen.get("images")))
    else:
        report.add("accuracy beats chance", measured >= min_accuracy,
                   tr("test accuracy {accuracy:.3f} measured by the grader on {images} images the run never "
                      "trained on (the run's own: {recorded:.3f}; chance {chance:.2f}, needed {needed:.2f})",
                      accuracy=measured, images=seen.get("images"), recorded=acc, chance=1 / n_class,
                      needed=min_accuracy))


def _throughput_check(report, student, reference, min_ratio, rules):
    if reference is None or reference.throughput is None:
        report.add("throughput vs the reference", False,
                   tr("the reference solution could not be measured in this session"))
        return
    rate = student.throughput
    if rate is None:
        report.add("throughput vs the reference", False, tr("no timed iteration (run too short?)"))
        return
    ratio = rate / reference.throughput
    report.add("throughput vs the reference", ratio >= min_ratio,
               tr("{rate:.1f} images/s = {ratio:.2f} x the reference's {reference:.1f} measured just before "
                  "(needed >= {needed:.2f})", rate=rate, ratio=ratio, reference=reference.throughput,
                  needed=min_ratio) + contention(rules, student, reference), value=ratio)
