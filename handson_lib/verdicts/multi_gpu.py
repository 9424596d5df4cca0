"""Task #1's correctness verdicts: one process training on several devices with
MultiprocessParallelUpdater (the course's CPU stand-in where there are no GPUs and NCCL).

The run's records name the fix of a wrong script (the updater it ran, its iterators and worker
processes, its shards, its workers' parameters); what passes the parallel structure is what the run
trained: the parameters of the main process and of every worker at the iterations the grader
picked, against the grader's replay of N workers on its split of the data (verdicts.structure).
The grader's view from outside can still overrule a pass (verdicts.seen).
"""

import numpy

from handson_lib.messages import tr
from handson_lib.verdicts import seen, structure
from handson_lib.verdicts.records import _accuracy_check, _shard_checks

#: Task #1's checks, in the order of its report (the speed check's name follows the mode).
CORRECTNESS = ("runs to the end", "uses MultiprocessParallelUpdater", "one worker process per device",
               "shards are disjoint", "shards cover the training set", "parameters equal on all workers",
               "accuracy beats chance")
#: The checks of the parallel structure: only what the run trained passes them.
STRUCTURE = CORRECTNESS[1:6]
#: The classes of the updaters that train on several devices and the end of their modules' names:
#: the course's stand-in and Chainer's (a class of the script's own is in `__main__`).
UPDATERS = {"CPUParallelUpdater": ".runtime.multigpu",
            "MultiprocessParallelUpdater": "chainer.training.updaters.multiprocess_parallel_updater"}


def _chainer_backend(record, rules):
    """Whether the run's workers are Chainer's own (GPU processes the grader's observer is not in):
    as the record says, where Chainer's updater can run at all."""
    return record.get("backend") == "chainer" and rules.chainer_updater_possible


def _updater_said(report, record, rules):
    updater = record.get("updater")
    named = updater in UPDATERS and str(record.get("updater_module")).endswith(UPDATERS[updater])
    if record.get("backend") == "chainer" and not rules.chainer_updater_possible:
        report.add("uses MultiprocessParallelUpdater", False,
                   tr("the run says it ran Chainer's updater, which needs GPUs and NCCL that this machine does not "
                      "have"))
    elif named and record.get("backend") in ("cpu", "chainer"):
        report.add("uses MultiprocessParallelUpdater", True, tr("backend: {backend}", backend=record.get("backend")))
    else:
        report.add("uses MultiprocessParallelUpdater", False,
                   tr("the trainer ran {updater}: one process did all the work. Build "
                      "chainer.training.updaters.MultiprocessParallelUpdater(iterators, optimizer, devices)",
                      updater=updater))


def _workers_said(report, run, gpus, rules):
    record = run.record
    if _chainer_backend(record, rules):
        n = record.get("n_iterators")
        report.add("one worker process per device", n == gpus,
                   tr("{n} iterator(s) for {gpus} GPUs (Chainer's updater starts one process each)",
                      n=n, gpus=gpus))
        return
    pids = {int(w["pid"]) for i, w in run.workers.items() if i > 0} - {record.get("pid")}
    n = len(pids) + (1 if 0 in run.workers else 0)
    report.add("one worker process per device", n == gpus,
               tr("{n} process(es) computed gradients, {gpus} expected", n=n, gpus=gpus))


def _parameters_said(report, run, rules):
    if _chainer_backend(run.record, rules):
        report.add("parameters equal on all workers", True,
                   tr("Chainer's updater broadcasts the main device's parameters after every update"))
    elif len(run.workers) >= 2:
        params = [w["params"] for _, w in sorted(run.workers.items())]
        worst = max(float(numpy.max(numpy.abs(p - params[0]))) for p in params[1:])
        report.add("parameters equal on all workers", worst == 0.0,
                   tr("largest difference between workers after training: {worst:.3g}", worst=worst))
    else:
        report.add("parameters equal on all workers", False, tr("fewer than two workers to compare"))


def kept_by(run, gpus, rules):
    """Who must have kept parameters at the grader's iterations: the main process, and every worker
    of the course's stand-in (Chainer's own workers are GPU processes of Chainer's)."""
    if _chainer_backend(run.record, rules):
        return ["main"]
    return ["main", *(f"worker{i}" for i in range(1, gpus))]


def correctness(report, run, replayed, gpus, rules, flags=(), expected_cpu=None):
    """The correctness checks of a finished run of Task #1 on `gpus` devices: its records' words,
    then what it trained against the grader's replay (`replayed`, checking.replay), then what the
    grader saw of it (`flags`: the script's review; `expected_cpu`: what the same training takes)."""
    record = run.record
    report.add("runs to the end", True, tr("{iterations} iterations in {seconds:.1f} s",
                                           iterations=record.get("iterations"), seconds=run.seconds))
    _updater_said(report, record, rules)
    _workers_said(report, run, gpus, rules)
    _shard_checks(report, record)
    _parameters_said(report, run, rules)
    _accuracy_check(report, record, rules.needed_accuracy, run.evidence)
    comparison = structure.compare(run.snapshots, replayed, kept_by(run, gpus, rules))
    if structure.shown_by_training(report, STRUCTURE, comparison, rules, gpus, "devices"):
        report.extend("uses MultiprocessParallelUpdater", "; " + structure.matched_line(comparison, gpus, "devices"))
    if not seen.review_contradicts(report, flags):
        seen.work_seen(report, (run.outside or {}).get("cpu"), expected_cpu, rules)
    seen.workers_seen(report, run.outside, gpus)
    seen.dependence_seen(report, (run.outside or {}).get("dependence"), "one worker process per device", ranks=False)
    return report
