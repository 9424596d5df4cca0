"""Task #2's check (ChainerMN on local MPI ranks) and the MNIST conversion's: run under the
grader's launcher, then speed and scaling timed step by step beside the reference's (checking.timing).
"""

import numpy

from handson_lib import settings, tasks
from handson_lib.checking import against as modes
from handson_lib.checking.credit import credit_bands, site_thresholds
from handson_lib.checking.records import _accuracy_check, _shard_checks, _throughput_check
from handson_lib.checking.report import Report
from handson_lib.checking.runs import run_observed_mpi
from handson_lib.checking.scripts import _review, _unfinished_report, grader_seed, still_unset
from handson_lib.checking.seen import _averaging_seen, _reports_seen, _seen_by_the_grader, _work
from handson_lib.checking.timing.scored import _paired_speed_checks, _self_speed_check, speed_names
from handson_lib.checking.watchdog import SELF_STALL, _tail, _ticking, _why_ranks_stopped, student_limit, student_stall
from handson_lib.messages import tr


#: Task #2's correctness run (and the notebook's runs): enough steps to beat min_accuracy surely
#: (4 epochs: 0.63-0.70 over 10 runs on 2 ranks; after 3 the accuracy still swings, 0.18-0.68).
MULTI_NODE_ARGS = list(tasks.task("multi-node").run_args)


MNIST_ARGS = list(tasks.task("mnist-multi-node").run_args)  # accuracy 0.88-0.92 already: the rest is start-up


def _evaluator_check(report, obs):
    last = {r: rec["evaluations"][-1] for r, rec in obs.ranks.items() if rec.get("evaluations")}
    if len(last) < obs.np:
        report.add("evaluator aggregated over ranks", False, tr("not every rank ran an Evaluator"))
        return
    key = next((k for k in last[0]["reported"] if k.endswith("accuracy")), None) or \
        next(iter(last[0]["reported"]), None)
    if key is None:
        report.add("evaluator aggregated over ranks", False, tr("the Evaluator reported nothing"))
        return
    reported = [last[r]["reported"].get(key) for r in range(obs.np)]
    local = [last[r]["local"].get(key) for r in range(obs.np)]
    mean = sum(local) / len(local)
    same = max(reported) - min(reported) <= 1e-6
    is_mean = all(abs(v - mean) <= 1e-6 for v in reported)
    alone = not any(last[r].get("wrapped") for r in range(obs.np)) and \
        max(local) - min(local) <= 1e-6 and reported == local
    if alone:
        # Equal only because every rank evaluated the same test set on its own.
        report.add("evaluator aggregated over ranks", False,
                   tr("every rank evaluated the whole test set alone ({key} = {value:.4f} on each): give each "
                      "rank its part of the test set and wrap the Evaluator with "
                      "chainermn.create_multi_node_evaluator", key=key, value=reported[0]))
    elif same and is_mean:
        report.add("evaluator aggregated over ranks", True,
                   tr("{key} = {value:.4f} on every rank = mean of the ranks' own {local}",
                      key=key, value=reported[0], local=local))
    else:
        report.add("evaluator aggregated over ranks", False,
                   tr("each rank reports its own {key} {reported} instead of the mean over ranks ({mean:.4f}): "
                      "wrap the Evaluator with chainermn.create_multi_node_evaluator",
                      key=key, reported=reported, mean=mean))


def _parameters_check(report, obs):
    np = obs.np
    alone = [r for r in range(np) if obs.ranks.get(r, {}).get("optimizer_communicator") is False]
    if len(obs.params) == np and len(alone) == np:
        # Identical parameters prove nothing when each rank ran the same single-process training.
        report.add("parameters identical on every rank", False,
                   tr("no rank averages its gradients with the others (the optimizer is a plain {optimizer}): "
                      "each rank trains alone; wrap the optimizer with "
                      "chainermn.create_multi_node_optimizer(opt, comm)", optimizer=obs.ranks[0].get("optimizer")))
    elif len(obs.params) == np:
        worst = max(float(numpy.max(numpy.abs(obs.params[r] - obs.params[0]))) for r in range(1, np))
        report.add("parameters identical on every rank", worst == 0.0,
                   tr("identical after training") if worst == 0.0 else
                   tr("the ranks' parameters differ by up to {worst:.3g} after training: each rank updated "
                      "alone; wrap the optimizer with chainermn.create_multi_node_optimizer(opt, comm)",
                      worst=worst))
    else:
        report.add("parameters identical on every rank", False, tr("parameters of some ranks are missing"))


def _reporting_check(report, obs):
    reporting = {r: [e for e in obs.ranks[r].get("extensions", [])
                     if e in ("LogReport", "PrintReport", "ProgressBar") or e.startswith("PlotReport")]
                 for r in range(obs.np)}
    extra = {r: e for r, e in reporting.items() if r > 0 and e}
    if not extra and reporting[0]:
        message = tr("LogReport/PrintReport on rank 0 only")
    elif extra:
        message = tr("ranks {ranks} also run {extensions}: add them under `if comm.rank == 0:`",
                     ranks=sorted(extra), extensions=sorted(set(sum(extra.values(), []))))
    else:
        message = tr("rank 0 has no LogReport/PrintReport")
    report.add("reports only on rank 0", not extra and bool(reporting[0]), message)


#: Task #2's checks of correctness, in the order of its report (the speed checks follow: speed_names).
CORRECTNESS = ("runs to the end", "shards are disjoint", "shards cover the training set",
               "parameters identical on every rank", "evaluator aggregated over ranks", "reports only on rank 0",
               "accuracy beats chance")


def check_multi_node(script, np=2, args=None, reference=None, timeout=300, site=None, scaling=True,
                     min_throughput_ratio=None, min_accuracy=None, min_scaling_ratio=None, print_fn=None,
                     reference_name="train_cifar_multi_node.py", task="multi-node", against=None, timed=True):
    """Grade Task #2 on `np` local ranks (and 1 rank for the scaling check).

    `reference` may be a dict {1: MPIObservation, np: MPIObservation} of the solution measured
    earlier in this session. `against="self"` judges speed by the script's own 1-rank run only
    (the scaling check; nothing when `scaling` is off). `timed`: the student's runs hold the
    machine's timing slot alone (their speed is scored)."""
    against = modes.resolve_against(against, reference, reference_name)
    limits = site_thresholds(site)
    min_ratio = limits["min_throughput_ratio"] if min_throughput_ratio is None else min_throughput_ratio
    min_acc = limits["min_accuracy"] if min_accuracy is None else min_accuracy
    min_scaling = limits["min_scaling_ratio"] if min_scaling_ratio is None else min_scaling_ratio
    args = list(MULTI_NODE_ARGS if args is None else args)
    say = print_fn or (lambda *_: None)
    reference = dict(reference or {})
    names = [*CORRECTNESS, *speed_names(against, np, scaling)]
    if against == "reference":
        # Its run on `np` ranks sets the watchdog; speed and scaling are timed step by step beside it.
        if np not in reference:
            say(tr("Measuring the reference solution on {np} rank(s) in this session ...", np=np))
            reference[np] = modes.measure_reference(reference_name, args, timeout, np=np)
        limit = student_limit(reference[np], timeout)
    else:
        # The scaling is timed step by step after the run, beside the script's own 1-rank steps.
        unset = still_unset(script)
        if unset:
            return _unfinished_report(task, script, unset, names, against)
        limit = timeout
    stall = student_stall(reference.get(np)) if against == "reference" else SELF_STALL
    say(tr("Running {script} on {np} ranks under the grader's launcher ...", script=script, np=np))
    # Against the reference, this run only decides correctness (its speed is timed apart, below):
    # it shares the machine with other students' runs.
    paired = against == "reference" and timed
    flags = _review(script)
    obs = run_observed_mpi(script, np, [*args, "--seed", str(grader_seed())], limit,
                           timed=timed and not paired and against == "reference", stall=stall,
                           part=f"{task}: your {np}-rank run", say=_ticking(say))
    report = Report(task, str(script), observed=obs.ranks.get(0, {}),
                    reference=reference[np].ranks.get(0, {}) if against == "reference" else {},
                    output_tail=_tail(obs.output), against=against)
    if not obs.finished:
        report.add("runs to the end", False, _why_ranks_stopped(obs, timeout))
        for name in names[1:]:
            report.add(name, False, tr("not checked: the run did not finish"))
        return report
    _correctness_checks(report, obs, np, min_acc)
    baseline = reference.get(np) if against == "reference" else None
    work = _work(args, baseline, against)
    _seen_by_the_grader(report, obs, baseline, flags, work)
    _averaging_seen(report, obs, baseline, work)
    _speed_checks(report, obs, names, script, np, args, against, paired, scaling, reference.get(np), limit, stall,
                  site, say, task, reference_name, min_ratio, min_scaling)
    return report


def _speed_checks(report, obs, names, script, np, args, against, paired, scaling, reference, limit, stall, site,
                  say, task, reference_name, min_ratio, min_scaling):
    """The speed checks of a correct run: the scaling over the script's own 1-rank steps (self
    mode), the throughput beside the reference's run (shown, never scored: `paired` off), or
    both timed step by step in turn with the reference's."""
    if against == "self":
        if scaling and report.failed:
            report.add(names[-1], False, tr("not timed: the run is not correct yet (see the FAIL lines above)"))
        elif scaling:
            _self_speed_check(report, names[-1], script, np, args, limit, stall, site, say, task, devices=False)
    elif not paired:  # a run whose speed is shown, never scored (the MNIST conversion)
        # ... except under the autograder: there it shares the machine with other students' runs
        # while the reference ran alone, and a ratio of the two would only measure the neighbours.
        if not settings.current().grader.autograding:
            _throughput_check(report, obs, reference, min_ratio)
    elif report.failed:
        for name in speed_names(against, np, scaling):
            report.add(name, False, tr("not timed: the run is not correct yet (see the FAIL lines above)"))
    else:
        _paired_speed_checks(report, script, modes.reference_script(reference_name), np, scaling, limit, stall,
                             credit_bands("reference", site), min_ratio, min_scaling, task, say, run_args=args)


def _correctness_checks(report, obs, np, min_acc):
    """The checks of a finished run's records (and its tagged output): to the end, the shards,
    the parameters, the evaluator, the reports, the accuracy."""
    report.add("runs to the end", True, tr("{np} ranks, {iterations} iterations in {seconds:.1f} s",
                                           np=np, iterations=obs.ranks[0].get("iterations"), seconds=obs.seconds))
    shards = {"shards": [obs.ranks[r]["shards"][0] for r in range(np)],
              "train_fingerprints": obs.ranks[0].get("train_fingerprints")}
    _shard_checks(report, shards, what="rank")
    _parameters_check(report, obs)
    _evaluator_check(report, obs)
    _reporting_check(report, obs)
    _reports_seen(report, obs)
    _accuracy_check(report, obs.ranks[0], min_acc, obs.evidence)


def check_mnist_multi_node(script, np=2, **kwargs):
    """Grade the "ChainerMN in seconds" conversion (digits MLP: too small to scale, so no scaling check)."""
    kwargs.setdefault("args", MNIST_ARGS)
    kwargs.setdefault("scaling", False)
    kwargs.setdefault("timed", False)  # its speed is shown, never scored
    return check_multi_node(script, np=np, reference_name="train_mnist_multi_node.py",
                            task="mnist-multi-node", **kwargs)
