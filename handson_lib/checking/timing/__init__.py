"""The scored timing: a student's training steps timed in turn with the reference's (or with their
own on one device or rank, in self mode), on the grader's clock, outside their processes.

Its parts, each where its layer lets it run:
  - `settings`: the settings (PairedTiming; the checks use SCORED): steps timed, the limits that
    bound how long a submission can hold the machine's timing slot, the retimings;
  - `scored`: the speed checks that time and judge (checking.checks calls them);
  - `paired`: the coordinator (run_paired) that launches both sides and times their steps;
  - `observation`: what a timing measured (PairedObservation) and the ratios read from it;
  - handson_lib.harness.stepper: what each side's processes run (it runs inside the runs, so it
    lives with the harness and imports nothing of this package);
  - handson_lib.launch.slot: the machine's timing slot (every timed run waits for it, SLOT_PATIENCE);
  - the grading sandbox's side: each launch states its launch.Confinement, which
    autograder.nbgrader_ext.judge_sandbox_command follows.
"""

from handson_lib.checking.timing.observation import WHO, Baseline, PairedObservation  # noqa: F401
from handson_lib.checking.timing.paired import STEPPER_MODULE, run_paired, run_paired_mpi  # noqa: F401
from handson_lib.checking.timing.settings import SCORED, PairedTiming  # noqa: F401
