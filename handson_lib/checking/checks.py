"""The checks' public face, shared by `handson check`, the notebooks' hidden tests and the
autograder: `from handson_lib.checking import checks`, then checks.check_multi_gpu(...),
checks.throughput_credit(...), checks.locate(...), ...

A student's script is run under the instrumenting launcher (handson_lib.harness.observe) with a
watchdog; each check reads what the launcher observed, never the script's own printout. The
checks live by concern beside this module:

  - multi_gpu, multi_node, jobscripts: each task's check;
  - report: a check's verdict and the task's report;
  - scripts: the script handed in, before any run (where it is, what is not written yet);
  - watchdog: a student's run's limits, and why a run stopped;
  - records, seen: what the run recorded, and what the grader saw of it itself;
  - credit: the site's thresholds and the speed checks' points in its bands;
  - against: how throughput is judged ("reference" or "self"), and the reference solutions
    handed in by whoever has them (the checks import nothing instructor-only);
  - timing: the scored timing, the training steps timed in turn (its settings: timing.settings).
"""

from handson_lib import tasks
# Every name below is part of `checks.<name>`: the notebooks, the tests and the autograder use them.
from handson_lib.checking.against import AGAINST, default_against, resolve_against  # noqa: F401
from handson_lib.checking.credit import (RATIO_TAG, band_share, credit_bands, grading_site,  # noqa: F401
                                         site_thresholds, throughput_credit)
from handson_lib.checking.jobscripts import JOBSCRIPTS, check_jobscript  # noqa: F401
from handson_lib.checking.multi_gpu import MULTI_GPU_ARGS, check_multi_gpu  # noqa: F401
from handson_lib.checking.multi_node import (MNIST_ARGS, MULTI_NODE_ARGS, _evaluator_check,  # noqa: F401
                                             _parameters_check, _reporting_check, check_mnist_multi_node,
                                             check_multi_node)
from handson_lib.checking.records import (_accuracy_check, _equal_length_padding, _shard_checks,  # noqa: F401
                                          _throughput_check)
from handson_lib.checking.report import SPEED_CHECKS, TAMPERING, Check, Report, check_title  # noqa: F401
from handson_lib.checking.scripts import (_review, _unfinished_report, grader_seed, locate,  # noqa: F401
                                          still_unset)
from handson_lib.checking.seen import (AVERAGING_SHARE, RUN_WORK_SHARE, _averaging_seen,  # noqa: F401
                                       _reports_seen, _seen_by_the_grader, _trained_images, _work, _workers_seen)
from handson_lib.checking.timing.scored import (BUSY_CORES, LOAD_LIMITED_SHARE, TIMING_ARGS,  # noqa: F401
                                                _contention, _keep_rate, _over_tcp, _paired_speed_checks,
                                                _self_speed_check, _time_in_turn, _undecided, speed_names)
from handson_lib.checking.watchdog import (SELF_STALL, _stopped_how, _tail, _why_it_stopped,  # noqa: F401
                                           _why_ranks_stopped, student_limit, student_stall)

_CHECKS = {"check_multi_gpu": check_multi_gpu, "check_multi_node": check_multi_node,
           "check_mnist_multi_node": check_mnist_multi_node}


def _check_of(task):
    if task.jobscript:   # --site names the site whose lint applies (default: the script's `# handson-site:` line, else Reedbush-H)
        return lambda script, site=None, **_: check_jobscript(script, task.runs, site)
    return _CHECKS[task.check]


#: `handson check TASK`: each task of the registry (handson_lib.tasks) and its check.
TASKS = {task.name: _check_of(task) for task in tasks.TASKS}
