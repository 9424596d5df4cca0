"""Who decides: the verdicts of the graded tasks, apart from everything that runs or observes.

Every function here takes what the grader observed and computed, as plain data (a run's exit
status and what its processes left, read as untrusted data; what the grader saw of its processes
from outside; the grader's own replay of the training and its own evaluation of the trained
model; the training steps it timed), and the rules of the session (`Rules`: the site's thresholds
and bands, the mode, the shares and tolerances), and returns a Report. It reads no setting, no
file and no process: handson_lib.checking observes and computes, then calls it, under the
autograder in the grader's own process, in `handson check` on the student's own observation.

  - report: a check's verdict and the task's report;
  - rules: the one settings object every verdict is handed;
  - records: what a run recorded of itself (its shards, its updater, its evaluator, its accuracy):
    a claim, which can fail a check and name the fix, never pass one alone;
  - structure: the parallel work shown by what the run trained, set beside the grader's replay;
  - seen: what the grader saw from outside the run (its CPU, its processes, the ranks' bytes,
    the launcher's tagged output) and in the script as handed in;
  - stopped: why a run did not finish, in the student's words;
  - multi_gpu, multi_node: each task's correctness verdicts, from the above;
  - speed: the speed verdicts of the timed training steps; credit: their points in the bands.

Nothing that runs inside a run or a kernel imports this package (the course's layout test holds
it to that), and it imports nothing of the course but its messages.
"""
