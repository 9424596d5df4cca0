"""The parallel work, shown by what a run trained: its parameters at the iterations the grader
picked, set beside the grader's own replay of data parallel training on the grader's split and
order of the data (handson_lib.checking.replay):

  - the path from the start to an early iteration: a correct script trains exactly what the replay
    trains there (to the bit on the course's CPU runs, within rounding where MPI adds three ranks'
    gradients in an order of its own);
  - one update at a few later iterations: from the run's own parameters, the grader's update on its
    minibatches of every worker or rank gives the run's next parameters, whatever rounding came
    before (in a training, rounding grows step by step: a path compared over an epoch would not
    tell it from another training);
  - every worker or rank holds the same parameters at each of them.

One process, ranks that train alone, a shard given twice, a broadcast of the parameters at the end:
none of them matches, whatever the run says of itself. What the run's own records say can name the
fix; only this comparison passes a check of the parallel structure.
"""

from dataclasses import dataclass, field

import numpy

from handson_lib.messages import tr


#: What a Comparison compares: the path from the start (a few iterations, and a late one, where
#: rounding has grown), the processes with each other, one update.
PATH, LATE, ALIKE, STEP = "path", "late", "alike", "step"


@dataclass
class Comparison:
    """A run's kept parameters against the replay's: the largest difference of each kind (PATH and
    ALIKE relative to the largest parameter, at least 1; STEP relative to the replay's update), where
    it was ("name@iteration"), and what the run did not keep."""
    worst: dict = field(default_factory=lambda: {PATH: 0.0, LATE: 0.0, ALIKE: 0.0, STEP: 0.0})
    where: dict = field(default_factory=dict)
    missing: list = field(default_factory=list)
    compared: int = 0
    steps: int = 0

    def add(self, kind, difference, where):
        self.compared += 1
        self.steps += kind in (STEP, LATE)
        if kind not in self.where or difference > self.worst[kind]:
            self.worst[kind], self.where[kind] = difference, where

    def tolerances(self, rules):
        return {PATH: rules.replay_tolerance, LATE: rules.late_path_tolerance, ALIKE: rules.replay_tolerance,
                STEP: rules.step_tolerance}

    def matched(self, rules):
        tolerance = self.tolerances(rules)
        return (self.compared > 0 and self.steps > 0 and not self.missing
                and all(self.worst[kind] <= tolerance[kind] for kind in self.worst))

    def farthest(self, rules):
        """The kind of difference farthest past its tolerance."""
        tolerance = self.tolerances(rules)
        return max(self.worst, key=lambda kind: self.worst[kind] / tolerance[kind])


def _floating(kept, expected):
    kept = numpy.asarray(kept)
    return kept.shape == expected.shape and numpy.issubdtype(kept.dtype, numpy.floating)


def _path_difference(kept, expected):
    if not _floating(kept, expected):
        return float("inf")
    with numpy.errstate(invalid="ignore", over="ignore"):
        worst = float(numpy.max(numpy.abs(numpy.asarray(kept, numpy.float64) - expected))) if expected.size else 0.0
    scale = max(1.0, float(numpy.max(numpy.abs(expected))) if expected.size else 1.0)
    return worst / scale if numpy.isfinite(worst) else float("inf")


def _step_difference(kept, expected, before):
    if not _floating(kept, expected) or not _floating(before, expected):
        return float("inf")
    with numpy.errstate(invalid="ignore", over="ignore"):
        step = float(numpy.linalg.norm(numpy.asarray(expected, numpy.float64) - before))
        off = float(numpy.linalg.norm(numpy.asarray(kept, numpy.float64) - expected))
    return off / step if numpy.isfinite(off) and step > 0 else float("inf")


def compare(snapshots, replayed, who):
    """Compare the parameters a run kept ({name: {iteration: array}}) of each of `who` (the
    processes that must have kept them, the first the one the replay's steps start from: "main",
    "worker1", ... or "rank0", ...) with the replay's (checking.replay.Replayed) at every iteration
    of the grader's plan (`replayed.plan`)."""
    plan = replayed.plan
    found = Comparison()
    kept = {name: (snapshots or {}).get(name) or {} for name in who}
    found.missing = [f"{name}@{k}" for name in who for k in plan.iterations if k not in kept[name]]
    first = kept[who[0]]
    for name in who:
        for k, expected in sorted(replayed.parameters.items()):
            if k in kept[name]:
                found.add(LATE if k == plan.late and k != plan.early else PATH,
                          _path_difference(kept[name][k], expected), f"{name}@{k}")
        for k in plan.iterations:   # every process holds the first one's parameters
            if name != who[0] and k in kept[name] and k in first:
                found.add(ALIKE, _path_difference(kept[name][k], numpy.asarray(first[k], numpy.float64)),
                          f"{name}@{k}")
        for k, expected in sorted(replayed.stepped.items()):
            if k in kept[name] and k - 1 in first:
                found.add(STEP, _step_difference(kept[name][k], expected, first[k - 1]), f"{name}@{k}")
    return found


def _who(where):
    name, _, iteration = where.partition("@")
    return name, iteration


def not_shown(comparison, width, unit, rules):
    """Why the trained parameters do not show `width` workers or ranks training together."""
    if comparison.missing:
        name, iteration = _who(comparison.missing[0])
        return tr("{name} kept no parameters at iteration {iteration}: nothing shows what it trained",
                  name=name, iteration=iteration)
    if comparison.compared == 0 or comparison.steps == 0:
        return tr("the run kept no parameters at the iterations the grader asked for: nothing shows what it "
                  "trained")
    kind = comparison.farthest(rules)
    name, iteration = _who(comparison.where[kind])
    worst = comparison.worst[kind]
    together = tr("{width} ranks training together", width=width) if unit == "ranks" else \
        tr("{width} workers, each on its own shard", width=width)
    if kind == ALIKE:
        first = "rank0" if unit == "ranks" else "main"
        return tr("at iteration {iteration} {name} holds other parameters than {first} (by up to {worst:.2g} of the "
                  "largest): the {unit} did not train together", iteration=iteration, name=name, first=first,
                  worst=worst, unit=tr("ranks") if unit == "ranks" else tr("workers"))
    if kind in (PATH, LATE):
        return tr("at iteration {iteration} the parameters of {name} are not those of the grader's replay of {together} "
                  "from the start (off by {worst:.2g} of the largest)", iteration=iteration, name=name,
                  together=together, worst=worst)
    return tr("the update of {name} to iteration {iteration} is not the update of {together} on the grader's minibatches "
              "there (off by {worst:.2g} of that update)", iteration=iteration, name=name, together=together, worst=worst)


def shown_by_training(report, names, comparison, rules, width, unit):
    """Fail each check of `names` that passed on the run's records where the trained parameters
    do not match the replay: they alone pass a check of the structure. The first says why, the
    others point to it."""
    if comparison.matched(rules):
        return True
    why = not_shown(comparison, width, unit, rules)
    cause = next((c for c in report.checks if c.name in names and not c.passed), None)
    first = True
    for name in names:
        if not report.passed(name):
            continue
        if cause is not None:   # a failed check's own words already name the fix: the first says it again
            report.overrule(name, tr("not shown by what the run trained; \"{cause}\" says why: {fix} ({why})",
                                     why=why, cause=cause.title, fix=cause.message) if first else
                            tr("not shown by what the run trained (see \"{cause}\")", cause=cause.title))
        else:
            report.overrule(name, tr("not shown by what the run trained: {why}", why=why) if first else
                            tr("not shown by what the run trained (see above)"))
        first = False
    return False


def matched_line(comparison, width, unit):
    """What a match with the replay shows, in a passing check's words."""
    what = tr("{width} ranks", width=width) if unit == "ranks" else tr("{width} workers", width=width)
    return tr("the trained parameters match the grader's replay of {what} on its split of the data ({n} "
              "comparisons: the path from the start, and {steps} updates)", what=what, n=comparison.compared,
              steps=comparison.steps)
