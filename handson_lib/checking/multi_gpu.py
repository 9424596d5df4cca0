"""Task #1's check: one process training on several devices (MultiprocessParallelUpdater), run
under the grader's launcher with the grader's seed, its training replayed by the grader, then its
speed timed step by step (checking.timing); the verdicts are handson_lib.verdicts.multi_gpu's.
"""

from handson_lib import tasks
from handson_lib.checking import against as modes
from handson_lib.checking import baselines, replay
from handson_lib.checking.rules import rules_for
from handson_lib.checking.runs import run_observed
from handson_lib.checking.scripts import _review, grader_seed, refused_before_running
from handson_lib.checking.timing.scored import _paired_speed_checks, _self_speed_check
from handson_lib.checking.watchdog import (SELF_STALL, _tail, _ticking, student_cpu_limit, student_limit,
                                           student_stall)
from handson_lib.messages import tr
from handson_lib.runtime.devices import nccl_status
from handson_lib.verdicts import multi_gpu as verdicts
from handson_lib.verdicts.report import Report
from handson_lib.verdicts.stopped import why_it_stopped

#: Small, quick runs on the offline synthetic data.
MULTI_GPU_ARGS = list(tasks.task("multi-gpu").run_args)
CORRECTNESS = verdicts.CORRECTNESS
SCRIPT_NAME = "train_cifar_multi_gpu.py"


def check_multi_gpu(script, gpus=2, args=None, reference=None, timeout=300, site=None,
                    min_throughput_ratio=None, min_accuracy=None, print_fn=None, against=None):
    """Grade Task #1. `reference` may be an Observation of the solution from this session;
    `against` chooses how throughput is judged (AGAINST; default: see `default_against`)."""
    against = modes.resolve_against(against, reference, SCRIPT_NAME)
    rules = rules_for(against, site, min_throughput_ratio=min_throughput_ratio, min_accuracy=min_accuracy)
    rules = rules.but(chainer_updater_possible=nccl_status()[0])
    args = list(MULTI_GPU_ARGS if args is None else args)
    run_args = ["--gpus", *map(str, range(gpus)), *args]
    say = print_fn or (lambda *_: None)
    speed_name = "throughput vs the reference" if against == "reference" else \
        f"throughput: {gpus} devices vs your 1-device run"
    refused = refused_before_running("multi-gpu", script, [*CORRECTNESS, speed_name], against,
                                     unset_first=against == "self")
    if refused:
        return refused
    seed = grader_seed()
    if against == "reference" and reference is None:
        say(tr("Measuring the reference solution in this session ..."))
        reference = modes.measure_reference(SCRIPT_NAME, [*run_args, "--seed", str(seed)], timeout)
    # The speed-up is timed apart, step by step (against the reference's steps, or the script's own
    # 1-device steps): this run decides correctness only.
    baseline = reference if against == "reference" else None
    limit, stall = student_limit(baseline, timeout), student_stall(baseline) or SELF_STALL
    flags = _review(script)
    rules = rules.but(reference_accuracy=(getattr(baseline, "evidence", None) or {}).get("accuracy"))
    plan = replay.snapshot_plan("multi-gpu", args, gpus, seed)
    say(tr("Running {script} on {n} devices under the grader's launcher ...", script=script, n=gpus))
    obs = run_observed(script, [*run_args, "--seed", str(seed)], limit, stall=stall,
                       part=f"your {gpus}-device run", say=_ticking(say), snapshots=plan.iterations,
                       cpu_limit=student_cpu_limit(baseline),
                       probe_at=replay.probe_iteration("multi-gpu", args, gpus, plan))
    report = Report("multi-gpu", str(script), observed=obs.record,
                    reference=reference.record if against == "reference" else {},
                    output_tail=_tail(obs.output), against=against, bands=rules.bands,
                    tag_ratios=rules.autograding)
    if not obs.finished:
        report.add("runs to the end", False, why_it_stopped(obs, timeout))
        for name in (*CORRECTNESS[1:], speed_name):
            report.add(name, False, tr("not checked: the script did not finish"))
        return report
    say(tr("Replaying the training on the grader's side (the same data, seed and {n} workers) ...", n=gpus))
    replayed = replay.replay("multi-gpu", args, gpus, seed, plan, obs.snapshots)
    verdicts.correctness(report, obs, replayed, gpus, rules, flags,
                         baselines.expected_cpu(baseline, baselines.work(args, baseline, against)))
    if report.failed:
        report.add(speed_name, False, tr("not timed: the run is not correct yet (see the FAIL lines above)"))
    elif against == "reference":
        _paired_speed_checks(report, script, modes.reference_script(SCRIPT_NAME), gpus, False, limit, stall,
                             rules, "multi-gpu", say, devices=True, run_args=args)
    else:
        _self_speed_check(report, speed_name, script, gpus, args, limit, stall, rules, say, "multi-gpu", devices=True)
    return report
