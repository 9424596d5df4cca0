"""Task #2's check (ChainerMN on local MPI ranks) and the MNIST conversion's: run under the grader's
launcher with the grader's seed, their training replayed by the grader, then speed and scaling
timed step by step beside the reference's (checking.timing); the verdicts are
handson_lib.verdicts.multi_node's.
"""

from handson_lib import tasks
from handson_lib.checking import against as modes
from handson_lib.checking import baselines, replay
from handson_lib.checking.rules import rules_for
from handson_lib.checking.runs import run_observed_mpi
from handson_lib.checking.scripts import _review, grader_seed, refused_before_running
from handson_lib.checking.timing.scored import _paired_speed_checks, _self_speed_check
from handson_lib.checking.watchdog import (SELF_STALL, _tail, _ticking, student_cpu_limit, student_limit,
                                           student_stall)
from handson_lib.messages import tr
from handson_lib.verdicts import multi_node as verdicts
from handson_lib.verdicts.records import _throughput_check
from handson_lib.verdicts.report import Report
from handson_lib.verdicts.speed import speed_names
from handson_lib.verdicts.stopped import why_ranks_stopped

#: Task #2's correctness run in the self-check (and the notebook's runs), and against the
#: reference (the autograder's: shorter, see handson_lib.tasks).
MULTI_NODE_ARGS = list(tasks.task("multi-node").run_args)
GRADED_MULTI_NODE_ARGS = list(tasks.task("multi-node").args_against_reference())
MNIST_ARGS = list(tasks.task("mnist-multi-node").run_args)  # accuracy 0.88-0.92 already: the rest is start-up
CORRECTNESS = verdicts.CORRECTNESS


def check_multi_node(script, np=2, args=None, reference=None, timeout=300, site=None, scaling=True,
                     min_throughput_ratio=None, min_accuracy=None, min_scaling_ratio=None, print_fn=None,
                     reference_name="train_cifar_multi_node.py", task="multi-node", against=None, timed=True):
    """Grade Task #2 on `np` local ranks (and 1 rank for the scaling check).

    `reference` may be a dict {1: MPIObservation, np: MPIObservation} of the solution measured
    earlier in this session. `against="self"` judges speed by the script's own 1-rank run only
    (the scaling check; nothing when `scaling` is off). `timed`: the student's speed is scored."""
    against = modes.resolve_against(against, reference, reference_name)
    rules = rules_for(against, site, min_throughput_ratio, min_accuracy, min_scaling_ratio)
    if args is None:
        args = GRADED_MULTI_NODE_ARGS if against == "reference" else MULTI_NODE_ARGS
    args = list(args)
    say = print_fn or (lambda *_: None)
    reference = dict(reference or {})
    names = [*CORRECTNESS, *speed_names(against, np, scaling)]
    refused = refused_before_running(task, script, names, against, unset_first=against == "self")
    if refused:
        return refused
    seed = grader_seed()
    if against == "reference" and np not in reference:
        # Its run on `np` ranks sets the watchdog; speed and scaling are timed step by step beside it.
        say(tr("Measuring the reference solution on {np} rank(s) in this session ...", np=np))
        reference[np] = modes.measure_reference(reference_name, [*args, "--seed", str(seed)], timeout, np=np)
    baseline = reference.get(np) if against == "reference" else None
    limit = student_limit(baseline, timeout) if against == "reference" else timeout
    stall = student_stall(baseline) if against == "reference" else SELF_STALL
    say(tr("Running {script} on {np} ranks under the grader's launcher ...", script=script, np=np))
    # Against the reference, this run only decides correctness (its speed is timed apart, below):
    # it shares the machine with other students' runs.
    paired = against == "reference" and timed
    flags = _review(script)
    rules = rules.but(reference_accuracy=(getattr(baseline, "evidence", None) or {}).get("accuracy"))
    plan = replay.snapshot_plan(task, args, np, seed)
    obs = run_observed_mpi(script, np, [*args, "--seed", str(seed)], limit,
                           timed=timed and not paired and against == "reference", stall=stall,
                           part=f"{task}: your {np}-rank run", say=_ticking(say), snapshots=plan.iterations,
                           cpu_limit=student_cpu_limit(baseline),
                           probe_at=replay.probe_iteration(task, args, np, plan))
    report = Report(task, str(script), observed=obs.ranks.get(0, {}),
                    reference=baseline.ranks.get(0, {}) if baseline is not None else {},
                    output_tail=_tail(obs.output), against=against, bands=rules.bands,
                    tag_ratios=rules.autograding)
    if not obs.finished:
        report.add("runs to the end", False, why_ranks_stopped(obs, timeout))
        for name in names[1:]:
            report.add(name, False, tr("not checked: the run did not finish"))
        return report
    say(tr("Replaying the training on the grader's side (the same data, seed and {np} ranks) ...", np=np))
    replayed = replay.replay(task, args, np, seed, plan, obs.snapshots)
    images = baselines.work(args, baseline, against)
    verdicts.correctness(report, obs, replayed, rules, flags, baselines.expected_cpu(baseline, images),
                         baselines.averaging(obs, baseline, images))
    _speed_checks(report, obs, names, script, np, args, paired, scaling, baseline, limit, stall, rules, say, task,
                  reference_name)
    return report


def _speed_checks(report, obs, names, script, np, args, paired, scaling, reference, limit, stall, rules, say,
                  task, reference_name):
    """The speed checks of a correct run: the scaling over the script's own 1-rank steps (self
    mode), the throughput beside the reference's run (shown, never scored: `paired` off), or
    both timed step by step in turn with the reference's."""
    if rules.against == "self":
        if scaling and report.failed:
            report.add(names[-1], False, tr("not timed: the run is not correct yet (see the FAIL lines above)"))
        elif scaling:
            _self_speed_check(report, names[-1], script, np, args, limit, stall, rules, say, task, devices=False)
    elif not paired:  # a run whose speed is shown, never scored (the MNIST conversion)
        # ... except under the autograder: there it shares the machine with other students' runs
        # while the reference ran alone, and a ratio of the two would only measure the neighbours.
        if not rules.autograding:
            _throughput_check(report, obs, reference, rules.min_throughput_ratio, rules)
    elif report.failed:
        for name in speed_names("reference", np, scaling):
            report.add(name, False, tr("not timed: the run is not correct yet (see the FAIL lines above)"))
    else:
        _paired_speed_checks(report, script, modes.reference_script(reference_name), np, scaling, limit, stall,
                             rules, task, say, run_args=None)


def check_mnist_multi_node(script, np=2, **kwargs):
    """Grade the "ChainerMN in seconds" conversion (digits MLP: too small to scale, so no scaling check)."""
    kwargs.setdefault("args", MNIST_ARGS)
    kwargs.setdefault("scaling", False)
    kwargs.setdefault("timed", False)  # its speed is shown, never scored
    return check_multi_node(script, np=np, reference_name="train_mnist_multi_node.py",
                            task="mnist-multi-node", **kwargs)
