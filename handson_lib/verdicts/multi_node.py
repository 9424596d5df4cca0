"""Task #2's correctness verdicts (ChainerMN on MPI ranks), and the MNIST conversion's.

The ranks' records name the fix of a wrong script (its shards, its optimizer, its evaluator, its
reports); what passes the parallel structure is what the ranks trained: every rank's parameters
at the iterations the grader picked against the grader's replay of the ranks training together on
its split of the data (verdicts.structure), and what every rank's evaluator reported against what
the grader computes the multi-node evaluator reports with those parameters. The launcher's
tagged output shows which ranks print the trainer's reports; the bytes the ranks sent each other
(in the grading sandbox) can overrule a pass (verdicts.seen).
"""

import math

import numpy

from handson_lib.messages import tr
from handson_lib.verdicts import seen, structure
from handson_lib.verdicts.records import _accuracy_check, _shard_checks

#: Task #2's checks of correctness, in the order of its report (the speed checks follow).
CORRECTNESS = ("runs to the end", "shards are disjoint", "shards cover the training set",
               "parameters identical on every rank", "evaluator aggregated over ranks", "reports only on rank 0",
               "accuracy beats chance")
#: The checks of the parallel structure: only what the ranks trained passes them.
STRUCTURE = ("shards are disjoint", "shards cover the training set", "parameters identical on every rank",
             "evaluator aggregated over ranks")
#: What an evaluator reports that the grader computes itself.
EVALUATED = ("validation/main/accuracy", "validation/main/loss")


def _evaluator_said(report, run):
    """What the ranks' records say of their Evaluator (a claim: it names the fix)."""
    last = {r: rec["evaluations"][-1] for r, rec in run.ranks.items() if rec.get("evaluations")}
    if len(last) < run.np:
        report.add("evaluator aggregated over ranks", False, tr("not every rank ran an Evaluator"))
        return
    key = next((k for k in last[0]["reported"] if k.endswith("accuracy")), None) or \
        next(iter(last[0]["reported"]), None)
    if key is None:
        report.add("evaluator aggregated over ranks", False, tr("the Evaluator reported nothing"))
        return
    reported = [last[r]["reported"].get(key) for r in range(run.np)]
    local = [last[r]["local"].get(key) for r in range(run.np)]
    if None in reported or None in local:
        report.add("evaluator aggregated over ranks", False, tr("the Evaluator reported nothing"))
        return
    mean = sum(local) / len(local)
    same = max(reported) - min(reported) <= 1e-6
    is_mean = all(abs(v - mean) <= 1e-6 for v in reported)
    alone = not any(last[r].get("wrapped") for r in range(run.np)) and \
        max(local) - min(local) <= 1e-6 and reported == local
    shown = [round(v, 4) for v in local]
    if alone:
        report.add("evaluator aggregated over ranks", False,
                   tr("every rank evaluated the whole test set alone ({key} = {value:.4f} on each): give each "
                      "rank its part of the test set and wrap the Evaluator with "
                      "chainermn.create_multi_node_evaluator", key=key, value=reported[0]))
    elif same and is_mean:
        report.add("evaluator aggregated over ranks", True,
                   tr("{key} = {value:.4f} on every rank = mean of the ranks' own {local}",
                      key=key, value=reported[0], local=shown))
    else:
        report.add("evaluator aggregated over ranks", False,
                   tr("each rank reports its own {key} {reported} instead of the mean over ranks ({mean:.4f}): "
                      "wrap the Evaluator with chainermn.create_multi_node_evaluator",
                      key=key, reported=[round(v, 4) for v in reported], mean=mean))


def _near(reported, expected, tolerance):
    """Whether an evaluator's report holds the grader's values (EVALUATED) within `tolerance`."""
    keys = [k for k in EVALUATED if k in expected]
    values = [(reported or {}).get(k) for k in keys]
    return bool(keys) and all(isinstance(v, (int, float)) and math.isfinite(v) and abs(v - expected[k]) <= tolerance
                              for v, k in zip(values, keys))


def _evaluator_computed(report, run, evaluation, tolerance):
    """"evaluator aggregated over ranks" passes only where every rank's first report holds what the
    grader computes the multi-node evaluator reports: the mean over the ranks' own parts of the test
    set, with the parameters the ranks (matching the replay) had there."""
    if not report.passed("evaluator aggregated over ranks") or not evaluation:
        return
    first = [((run.ranks.get(r) or {}).get("evaluations") or [{}])[0].get("reported") for r in range(run.np)]
    means = [evaluation[k] for k in ("mean", "mean_strict") if evaluation.get(k)]
    if any(all(_near(f, mean, tolerance) for f in first) for mean in means):
        return
    key = EVALUATED[0]
    if all(_near(f, evaluation["whole"], tolerance) for f in first):
        why = tr("every rank reported the whole test set's {key} ({value:.4f}): give each rank its part of the test "
                 "set (chainermn.scatter_dataset) and wrap the Evaluator with chainermn.create_multi_node_evaluator",
                 key=key, value=evaluation["whole"][key])
    elif all(_near(f, own, tolerance) for f, own in zip(first, evaluation["ranks"])):
        why = tr("each rank reported its own part's {key} ({values}), not their mean: wrap the Evaluator with "
                 "chainermn.create_multi_node_evaluator", key=key,
                 values=[round(own[key], 4) for own in evaluation["ranks"]])
    else:
        reported = [(f or {}).get(key) for f in first]
        why = tr("the ranks reported {key} {reported} after the first epoch; the mean over the ranks' own parts of the "
                 "test set is {value:.4f} (computed by the grader with the ranks' parameters)", key=key,
                 reported=[round(v, 4) if isinstance(v, (int, float)) else v for v in reported],
                 value=means[0][key])
    report.overrule("evaluator aggregated over ranks", tr("not shown by what the evaluators reported: {why}", why=why))


def _parameters_said(report, run):
    np = run.np
    alone = [r for r in range(np) if run.ranks.get(r, {}).get("optimizer_communicator") is False]
    if len(run.params) == np and len(alone) == np:
        report.add("parameters identical on every rank", False,
                   tr("no rank averages its gradients with the others (the optimizer is a plain {optimizer}): "
                      "each rank trains alone; wrap the optimizer with "
                      "chainermn.create_multi_node_optimizer(opt, comm)", optimizer=run.ranks[0].get("optimizer")))
    elif len(run.params) == np:
        worst = max(float(numpy.max(numpy.abs(run.params[r] - run.params[0]))) for r in range(1, np))
        report.add("parameters identical on every rank", worst == 0.0,
                   tr("identical after training") if worst == 0.0 else
                   tr("the ranks' parameters differ by up to {worst:.3g} after training: each rank updated "
                      "alone; wrap the optimizer with chainermn.create_multi_node_optimizer(opt, comm)",
                      worst=worst))
    else:
        report.add("parameters identical on every rank", False, tr("parameters of some ranks are missing"))


def _reporting_said(report, run):
    reporting = {r: [e for e in run.ranks[r].get("extensions", [])
                     if e in ("LogReport", "PrintReport", "ProgressBar") or e.startswith("PlotReport")]
                 for r in range(run.np)}
    extra = {r: e for r, e in reporting.items() if r > 0 and e}
    if not extra and reporting[0]:
        message = tr("LogReport/PrintReport on rank 0 only")
    elif extra:
        message = tr("ranks {ranks} also run {extensions}: add them under `if comm.rank == 0:`",
                     ranks=sorted(extra), extensions=sorted(set(sum(extra.values(), []))))
    else:
        message = tr("rank 0 has no LogReport/PrintReport")
    report.add("reports only on rank 0", not extra and bool(reporting[0]), message)


def correctness(report, run, replayed, rules, flags=(), expected_cpu=None, averaging=None):
    """The correctness checks of a finished run on `run.np` ranks: the ranks' records' words, then
    what they trained and reported against the grader's replay (`replayed`, checking.replay), then
    what the grader saw of them (`flags`: the script's review; `expected_cpu`: what the same training
    takes; `averaging`: (bytes the ranks sent, bytes averaging moves, iterations, gradient bytes))."""
    np = run.np
    report.add("runs to the end", True, tr("{np} ranks, {iterations} iterations in {seconds:.1f} s",
                                           np=np, iterations=run.ranks[0].get("iterations"), seconds=run.seconds))
    shards = {"shards": [run.ranks[r]["shards"][0] for r in range(np)],
              "train_fingerprints": run.ranks[0].get("train_fingerprints")}
    _shard_checks(report, shards, what="rank")
    _parameters_said(report, run)
    _evaluator_said(report, run)
    _reporting_said(report, run)
    seen.reports_seen(report, run.output)
    _accuracy_check(report, run.ranks[0], rules.needed_accuracy, run.evidence)
    comparison = structure.compare(run.snapshots, replayed, [f"rank{r}" for r in range(np)])
    if structure.shown_by_training(report, STRUCTURE, comparison, rules, np, "ranks"):
        report.extend("parameters identical on every rank", "; " + structure.matched_line(comparison, np, "ranks"))
        _evaluator_computed(report, run, replayed.evaluation, rules.evaluation_tolerance)
    if not seen.review_contradicts(report, flags):
        seen.work_seen(report, (run.outside or {}).get("cpu"), expected_cpu, rules)
    outside = run.outside or {}
    seen.dependence_seen(report, outside.get("dependence"), "parameters identical on every rank", ranks=True)
    if averaging:
        seen.averaging_seen(report, *averaging, rules)
        seen.traffic_seen(report, outside.get("traffic"), 2 * (np - 1) * averaging[3], rules)
    return report
