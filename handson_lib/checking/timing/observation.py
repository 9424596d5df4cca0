"""What one paired timing measured: the seconds of each side's training steps on the grader's
clock, and what it saw of their CPU (PairedObservation); the ratio and its spread read from it.
"""

import statistics
from dataclasses import dataclass, field


#: The two sides of a timing, in the order of its first pair of steps.
WHO = ("reference", "student")


def step_order(step):
    """Who goes first at `step`: A B, B A, A B, ... (a drift within a pair cancels out)."""
    return WHO if step % 2 == 0 else WHO[::-1]


@dataclass
class PairedObservation:
    """One paired timing: the seconds of each training step of the reference and of the student
    (the grader's clock), taken in turn on `np` ranks or devices, and what the grader saw of their CPU."""
    np: int
    steps: dict
    images_per_step: dict
    error: str
    seconds: float
    progress: dict = None
    cpu: dict = field(default_factory=dict)   # {who: {"own": s, "waiting": s}} over the timed steps
    suspicions: list = field(default_factory=list)
    kept: dict = field(default_factory=dict)      # the student's launch's parameters after its steps (snapshots)
    trained: list = field(default_factory=list)   # [(width, their comparison with the grader's replay)]

    @property
    def finished(self):
        return not self.error and all(self.steps.get(who) for who in WHO)

    def rate(self, who):
        """Images per second of `who`: images per step over its median step time."""
        return self.images_per_step[who] / statistics.median(self.steps[who])

    def cores(self, who):
        """The cores `who`'s processes kept busy over its timed steps (CPU seconds over seconds),
        as the grader saw them from outside."""
        seconds = sum(self.steps.get(who) or [])
        return (self.cpu.get(who) or {}).get("own", 0.0) / seconds if seconds else 0.0

    def pair_ratios(self):
        """The student's rate over the reference's for each pair of steps taken in turn."""
        scale = self.images_per_step["student"] / self.images_per_step["reference"]
        return [scale * ref / mine for ref, mine in zip(self.steps["reference"], self.steps["student"])]

    def _median_pair(self):
        """The index of the pair whose ratio is the median (the lower of the middle two)."""
        ratios = self.pair_ratios()
        middle = statistics.median_low(ratios)
        return ratios.index(middle)

    @property
    def ratio(self):
        """The student's rate over the reference's: the median over the pairs of steps (a pair
        shares the machine's state of the moment); a pair's own ratio, so that its two rates
        (`median_pair_rates`) give it."""
        return self.pair_ratios()[self._median_pair()]

    def median_pair_rates(self):
        """(the student's rate, the reference's) in images/s of the median pair: their ratio is `ratio`."""
        i = self._median_pair()
        return (self.images_per_step["student"] / self.steps["student"][i],
                self.images_per_step["reference"] / self.steps["reference"][i])

    def block_ratios(self, blocks=4):
        """The same median in `blocks` consecutive blocks of pairs: its spread within the launch."""
        pairs = self.pair_ratios()
        blocks = max(1, min(blocks, len(pairs) // 3))
        size = len(pairs) // blocks
        return [statistics.median(pairs[b * size:(b + 1) * size]) for b in range(blocks)]

    def pooled(self, earlier):
        """This timing's steps after `earlier`'s (a second timing of an undecided ratio)."""
        self.steps = {who: earlier.steps[who] + self.steps[who] for who in WHO}
        self.suspicions = earlier.suspicions + self.suspicions
        self.trained = earlier.trained + self.trained
        return self


@dataclass
class Baseline:
    """Self mode: the student's own script on `ranks` ranks (or, None, one process on `devices`
    devices) with `args`, timed in the reference's place."""
    ranks: int
    devices: int
    args: list
    name: str
