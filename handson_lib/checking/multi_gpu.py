"""Task #1's check: one process training on several devices (MultiprocessParallelUpdater),
run under the grader's launcher, then its speed timed step by step (checking.timing).
"""

import numpy

from handson_lib import tasks
from handson_lib.checking import against as modes
from handson_lib.checking.credit import credit_bands, site_thresholds
from handson_lib.checking.records import _accuracy_check, _shard_checks
from handson_lib.checking.report import Report
from handson_lib.checking.runs import run_observed
from handson_lib.checking.scripts import _review, _unfinished_report, grader_seed, still_unset
from handson_lib.checking.seen import _seen_by_the_grader, _work, _workers_seen
from handson_lib.checking.timing.scored import _paired_speed_checks, _self_speed_check
from handson_lib.checking.watchdog import SELF_STALL, _tail, _ticking, _why_it_stopped, student_limit, student_stall
from handson_lib.messages import tr


#: Small, quick runs on the offline synthetic data.
MULTI_GPU_ARGS = list(tasks.task("multi-gpu").run_args)


#: Task #1's checks, in the order of its report (the speed check's name follows the mode).
CORRECTNESS = ("runs to the end", "uses MultiprocessParallelUpdater", "one worker process per device",
               "shards are disjoint", "shards cover the training set", "parameters equal on all workers",
               "accuracy beats chance")
SCRIPT_NAME = "train_cifar_multi_gpu.py"


def check_multi_gpu(script, gpus=2, args=None, reference=None, timeout=300, site=None,
                    min_throughput_ratio=None, min_accuracy=None, print_fn=None, against=None):
    """Grade Task #1. `reference` may be an Observation of the solution from this session;
    `against` chooses how throughput is judged (AGAINST; default: see `default_against`)."""
    against = modes.resolve_against(against, reference, SCRIPT_NAME)
    limits = site_thresholds(site)
    min_ratio = limits["min_throughput_ratio"] if min_throughput_ratio is None else min_throughput_ratio
    min_acc = limits["min_accuracy"] if min_accuracy is None else min_accuracy
    args = list(MULTI_GPU_ARGS if args is None else args)
    run_args = ["--gpus", *map(str, range(gpus)), *args]
    say = print_fn or (lambda *_: None)
    if against == "reference":
        if reference is None:
            say(tr("Measuring the reference solution in this session ..."))
            reference = modes.measure_reference(SCRIPT_NAME, run_args, timeout)
        baseline, speed_name = reference, "throughput vs the reference"
    else:
        # The speed-up is timed step by step after the run, beside the script's own 1-device steps.
        baseline, speed_name = None, f"throughput: {gpus} devices vs your 1-device run"
        unset = still_unset(script)
        if unset:
            return _unfinished_report("multi-gpu", script, unset, [*CORRECTNESS, speed_name], against)
    say(tr("Running {script} on {n} devices under the grader's launcher ...", script=script, n=gpus))
    # This run decides correctness only (its speed is timed apart, step by step, below): against
    # the reference it shares the machine with other students' runs.
    limit, stall = student_limit(baseline, timeout), student_stall(baseline) or SELF_STALL
    flags = _review(script)
    obs = run_observed(script, [*run_args, "--seed", str(grader_seed())], limit, stall=stall,
                       part=f"your {gpus}-device run", say=_ticking(say))
    report = Report("multi-gpu", str(script), observed=obs.record,
                    reference=reference.record if against == "reference" else {},
                    output_tail=_tail(obs.output), against=against)
    if not obs.finished:
        report.add("runs to the end", False, _why_it_stopped(obs, timeout))
        for name in (*CORRECTNESS[1:], speed_name):
            report.add(name, False, tr("not checked: the script did not finish"))
        return report
    _correctness_checks(report, obs, gpus, min_acc)
    _seen_by_the_grader(report, obs, baseline, flags, _work(args, baseline, against))
    _workers_seen(report, obs, gpus)
    if report.failed:
        report.add(speed_name, False, tr("not timed: the run is not correct yet (see the FAIL lines above)"))
    elif against == "reference":
        _paired_speed_checks(report, script, modes.reference_script(SCRIPT_NAME), gpus, False, limit, stall,
                             credit_bands("reference", site), min_ratio, None, "multi-gpu", say, devices=True,
                             run_args=args)
    else:
        _self_speed_check(report, speed_name, script, gpus, args, limit, stall, site, say, "multi-gpu", devices=True)
    return report


def _correctness_checks(report, obs, gpus, min_acc):
    """The checks of a finished run's records: to the end, the updater, the workers, the shards,
    the parameters, the accuracy."""
    record = obs.record
    report.add("runs to the end", True, tr("{iterations} iterations in {seconds:.1f} s",
                                           iterations=record.get("iterations"), seconds=obs.seconds))
    _updater_check(report, record)
    _workers_check(report, obs, gpus)
    _shard_checks(report, record)
    _parameters_check(report, obs)
    _accuracy_check(report, record, min_acc, obs.evidence)


def _updater_check(report, record):
    updater = record.get("updater")
    # The updater of the course's stand-in or Chainer's (a class of the script's named alike is neither).
    uses_mpu = updater in ("CPUParallelUpdater", "MultiprocessParallelUpdater") and \
        record.get("backend") in ("cpu", "chainer") and \
        record.get("updater_module") in ("handson_lib.runtime.multigpu", "chainer.training.updaters.multiprocess_parallel_updater")
    report.add("uses MultiprocessParallelUpdater", uses_mpu,
               tr("backend: {backend}", backend=record.get("backend")) if uses_mpu else
               tr("the trainer ran {updater}: one process did all the work. Build "
                  "chainer.training.updaters.MultiprocessParallelUpdater(iterators, optimizer, devices)",
                  updater=updater))


def _workers_check(report, obs, gpus):
    record = obs.record
    if record.get("backend") == "chainer":
        n = record.get("n_iterators")
        report.add("one worker process per device", n == gpus,
                   tr("{n} iterator(s) for {gpus} GPUs (Chainer's updater starts one process each)",
                      n=n, gpus=gpus))
    else:
        pids = {int(w["pid"]) for i, w in obs.workers.items() if i > 0} - {record.get("pid")}
        n = len(pids) + (1 if 0 in obs.workers else 0)
        report.add("one worker process per device", n == gpus,
                   tr("{n} process(es) computed gradients, {gpus} expected", n=n, gpus=gpus))


def _parameters_check(report, obs):
    if obs.record.get("backend") == "chainer":
        report.add("parameters equal on all workers", True,
                   tr("Chainer's updater broadcasts the main device's parameters after every update"))
    elif len(obs.workers) >= 2:
        params = [w["params"] for _, w in sorted(obs.workers.items())]
        worst = max(float(numpy.max(numpy.abs(p - params[0]))) for p in params[1:])
        report.add("parameters equal on all workers", worst == 0.0,
                   tr("largest difference between workers after training: {worst:.3g}", worst=worst))
    else:
        report.add("parameters equal on all workers", False, tr("fewer than two workers to compare"))
