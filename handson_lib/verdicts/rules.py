"""The rules a verdict is judged by, in one object handed down (never read from the environment
here): the site's thresholds and bands, how speed is judged, and the shares and tolerances that
weigh what the grader saw. handson_lib.checking builds it (`checking.credit.rules_for`).
"""

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Rules:
    site: str = "local"
    against: str = "reference"          # speed against the reference's steps, or "self" (the student's own)
    min_accuracy: float = 0.2
    min_throughput_ratio: float = 0.7
    min_scaling_ratio: float = 0.75
    throughput_bands: tuple = ((0.7, 1.0), (0.4, 0.5))
    speedup_bands: tuple = ((1.2, 1.0), (1.05, 0.5))
    #: A run's processes must use at least this share of the CPU that the same training took its
    #: baseline (the reference's run, or the student's own 1-device / 1-rank run), seen from outside.
    run_work_share: float = 0.4
    #: The ranks must send each other at least this share of what averaging the gradients moves.
    averaging_share: float = 0.3
    #: The largest difference between a run's parameters and the grader's replay of the same training
    #: from the start (3 to 5 iterations), relative to the largest parameter (at least 1): rounding,
    #: not another training (the course's runs match to the bit; three or four ranks whose gradients
    #: MPI adds in an order of its own, by 2e-6 at most over 7 runs; a rank that trains alone, 1e-3).
    replay_tolerance: float = 1e-4
    #: The same at a late iteration (a timed launch's last of 18 steps), where rounding has grown: the
    #: course's runs match to the bit; three ranks, 1e-4; a launch that skipped the work of 12 of its
    #: 18 steps, 5e-2.
    late_path_tolerance: float = 1e-3
    #: The largest difference between one update of a run and the grader's update from the run's own
    #: parameters, relative to the grader's update (rounding: about 1e-4; an update of another
    #: gradient, the order of 1).
    step_tolerance: float = 1e-2
    #: The largest difference between an evaluator's report and the grader's computation of it.
    evaluation_tolerance: float = 1e-4
    #: The accuracy the grader measured of the reference's run in this session (the same seed: the
    #: same training), or None: a seed whose data trains slowly lowers the accuracy needed, to
    #: `accuracy_share` of it at most (never raises it).
    reference_accuracy: float = None
    accuracy_share: float = 0.8
    #: Whether Chainer's MultiprocessParallelUpdater can run where the run ran (GPUs and NCCL): only
    #: there do the workers' own parameters stay out of the grader's view.
    chainer_updater_possible: bool = False
    #: Under the course's grader: the reference's run and output are never shown to the student.
    autograding: bool = False
    #: Seconds a run waits for the machine's timing slot before it runs beside its holder.
    slot_patience: float = 120.0
    #: Whether the ranks talk over TCP (the grading sandbox): said beside a scaling below 1.
    ranks_over_tcp: bool = False
    #: Self mode: the rest of the machine keeping this many cores busy is a load worth naming.
    busy_cores: float = 0.5
    #: Self mode: steps on n workers that got less than this share of n times the CPU of the steps
    #: on 1 were held back by the load, and are judged per CPU they used.
    load_limited_share: float = 0.85

    @property
    def needed_accuracy(self):
        """The accuracy a run needs: the site's, or less where the reference reached less in this session."""
        if self.reference_accuracy is None:
            return self.min_accuracy
        return min(self.min_accuracy, self.accuracy_share * self.reference_accuracy)

    @property
    def bands(self):
        """The bands the speed checks are scored in, in this mode."""
        return self.throughput_bands if self.against == "reference" else self.speedup_bands

    def but(self, **changes):
        return replace(self, **changes)
