"""The checks' public face, shared by `handson check`, the notebooks' hidden tests and the
autograder: `from handson_lib.checking import checks`, then checks.check_multi_gpu(...),
checks.throughput_credit(...), checks.locate(...), ...

A student's script is run under the instrumenting launcher (handson_lib.harness.observe) with a
watchdog and the grader's seed; the grader replays its training itself (replay) and hands what
it observed and computed to the verdicts (handson_lib.verdicts), which decide. The parts beside
this module:

  - multi_gpu, multi_node, jobscripts: each task's check (what to run, then the verdicts);
  - runs, evidence, replay, baselines: the observed runs, the grader's own evaluation of the
    trained model, its replay of the training, what the same training costs;
  - scripts: the script handed in, before any run (where it is, what is not written yet, what it
    imports from beside it), and the grader's seed;
  - watchdog: a student's run's limits; rules: the site's thresholds and bands, as verdicts.Rules;
  - against: how throughput is judged ("reference" or "self"), and the reference solutions
    handed in by whoever has them (the checks import nothing instructor-only);
  - timing: the scored timing, the training steps timed in turn (its settings: timing.settings).
"""

from handson_lib import tasks
# Every name below is part of `checks.<name>`: the notebooks, the tests and the autograder use them.
from handson_lib.checking.against import AGAINST, default_against, resolve_against  # noqa: F401
from handson_lib.checking.jobscripts import JOBSCRIPTS, check_jobscript  # noqa: F401
from handson_lib.checking.multi_gpu import MULTI_GPU_ARGS, check_multi_gpu  # noqa: F401
from handson_lib.checking.multi_node import (GRADED_MULTI_NODE_ARGS, MNIST_ARGS, MULTI_NODE_ARGS,  # noqa: F401
                                              check_mnist_multi_node, check_multi_node)
from handson_lib.checking.rules import credit_bands, grading_site, rules_for, site_thresholds  # noqa: F401
from handson_lib.checking.scripts import grader_seed, locate, still_unset  # noqa: F401
from handson_lib.checking.timing.scored import TIMING_ARGS  # noqa: F401
from handson_lib.checking.watchdog import SELF_STALL, student_limit, student_stall  # noqa: F401
from handson_lib.verdicts.credit import RATIO_TAG, band_share, throughput_credit  # noqa: F401
from handson_lib.verdicts.report import SPEED_CHECKS, TAMPERING, Check, Report, check_title  # noqa: F401
from handson_lib.verdicts.stopped import why_it_stopped, why_ranks_stopped  # noqa: F401

_CHECKS = {"check_multi_gpu": check_multi_gpu, "check_multi_node": check_multi_node,
           "check_mnist_multi_node": check_mnist_multi_node}


def _check_of(task):
    if task.jobscript:   # --site names the site whose lint applies (default: the script's `# handson-site:` line, else Reedbush-H)
        return lambda script, site=None, **_: check_jobscript(script, task.runs, site)
    return _CHECKS[task.check]


#: `handson check TASK`: each task of the registry (handson_lib.tasks) and its check.
TASKS = {task.name: _check_of(task) for task in tasks.TASKS}
