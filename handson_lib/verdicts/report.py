"""A check's verdict and the report of a task: each check's name (its identity) and its title
in the student's language, and the report's text and JSON (`handson check`, the notebooks).
"""

import json
import re
from dataclasses import asdict, dataclass, field

from handson_lib.messages import tr


#: Names of the checks that judge speed (scored in bands by `throughput_credit`) start with these.
SPEED_CHECKS = ("throughput", "scaling")


#: How a check begins where the run's records contradict what the grader measured itself: no
#: points, and the course's grader names the check in the student's status.
TAMPERING = "tampering suspected, for the instructor to review: "


#: How each check's name is shown (`check_title`): (the English name as a pattern, its title).
_TITLES = (
    (r"runs to the end", lambda: tr("runs to the end")),
    (r"uses MultiprocessParallelUpdater", lambda: tr("uses MultiprocessParallelUpdater")),
    (r"one worker process per device", lambda: tr("one worker process per device")),
    (r"shards are disjoint", lambda: tr("shards are disjoint")),
    (r"shards cover the training set", lambda: tr("shards cover the training set")),
    (r"parameters equal on all workers", lambda: tr("parameters equal on all workers")),
    (r"parameters identical on every rank", lambda: tr("parameters identical on every rank")),
    (r"evaluator aggregated over ranks", lambda: tr("evaluator aggregated over ranks")),
    (r"reports only on rank 0", lambda: tr("reports only on rank 0")),
    (r"accuracy beats chance", lambda: tr("accuracy beats chance")),
    (r"throughput vs the reference", lambda: tr("throughput vs the reference")),
    (r"throughput: (?P<n>\d+) devices vs your 1-device run",
     lambda n: tr("throughput: {n} devices vs your 1-device run", n=n)),
    (r"scaling 1 -> (?P<n>\d+) ranks vs the reference",
     lambda n: tr("scaling 1 -> {n} ranks vs the reference", n=n)),
    (r"scaling: (?P<n>\d+) ranks vs your 1-rank run", lambda n: tr("scaling: {n} ranks vs your 1-rank run", n=n)),
    (r"job script lint", lambda: tr("job script lint")),
    (r"resources of the task", lambda: tr("resources of the task")),
)


def check_title(name):
    """A check's name as the student reads it, in the student's language (HANDSON_LANG). The
    English name stays the check's identity: code, tests and hidden tests compare `Check.name`."""
    for pattern, title in _TITLES:
        match = re.fullmatch(pattern, name)
        if match:
            return title(**match.groupdict())
    return name


@dataclass
class Check:
    name: str             # the English name: the check's identity (see `title`)
    passed: bool
    message: str          # in the student's language, made when the check is added
    value: float = None   # the measured ratio, for the throughput and scaling checks

    @property
    def title(self):
        """The name as shown, translated (check_title)."""
        return check_title(self.name)

    def line(self):
        # [PASS] / [FAIL] stay in English: scripts and tests look for them.
        return f"  [{'PASS' if self.passed else 'FAIL'}] {self.title}: {self.message}"


@dataclass
class Report:
    task: str
    script: str
    checks: list = field(default_factory=list)
    observed: dict = field(default_factory=dict)
    reference: dict = field(default_factory=dict)
    output_tail: str = ""
    against: str = "reference"   # how throughput was judged: "reference" or "self"
    bands: tuple = ()            # ((floor, share of the points), ...) the speed checks are scored in
    tag_ratios: bool = False     # under the course's grader: the credit's line of ratios for its report

    @property
    def speed_checks(self):
        return [c for c in self.checks if c.name.startswith(SPEED_CHECKS)]

    @property
    def ok(self):
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def failed(self):
        return [c for c in self.checks if not c.passed]

    def add(self, name, passed, message, value=None):
        self.checks.append(Check(name, bool(passed), message, value))

    def passed(self, name):
        """Whether the check `name` is there and passed."""
        return any(c.passed for c in self.checks if c.name == name)

    def extend(self, name, words):
        """Add `words` to the message of the check `name` (what else showed it)."""
        for check in self.checks:
            if check.name == name:
                check.message += words

    def overrule(self, name, message):
        """What the grader saw itself fails the check `name` (one the run's records may have passed)."""
        for check in self.checks:
            if check.name == name:
                check.passed, check.message = False, message

    def text(self):
        lines = [f"handson check {self.task} {self.script}"]
        lines += [c.line() for c in self.checks]
        passed = sum(c.passed for c in self.checks)
        if self.ok:
            lines.append(tr("{passed} of {total} checks passed", passed=passed, total=len(self.checks)))
        else:
            lines.append(tr("{passed} of {total} checks passed -- see the FAIL lines above",
                            passed=passed, total=len(self.checks)))
        if not self.ok and self.output_tail:
            lines.append(tr("Last lines of your script's output:"))
            lines += ["  | " + line for line in self.output_tail.splitlines()]
        return "\n".join(lines)

    def to_json(self):
        return json.dumps({"task": self.task, "script": self.script, "ok": self.ok,
                           "checks": [asdict(c) for c in self.checks]}, indent=2)
