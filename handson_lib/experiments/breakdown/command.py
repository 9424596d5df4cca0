"""`handson profile breakdown`: the phases measured on each rank count, the tables printed, and
the JSON, the figures and the ranks' timeline written where asked."""

import argparse
import json
import sys
from pathlib import Path

from handson_lib.experiments.breakdown.report import (as_json, format_phase_table, format_timer_table,
                                                      link_text, phase_figure, scaling_figure)
from handson_lib.experiments.breakdown.runs import sweep
from handson_lib.plotting import pyplot
from handson_lib.profiling import cpu_timeline
from handson_lib.sites import jobs

def add_arguments(parser):
    parser.add_argument("--np", type=int, nargs="+", default=None,
                        help="rank counts to measure, e.g. --np 1 2 4 (default: 1 2 locally, 1 2 4 "
                             "on the cluster)")
    parser.add_argument("--model", default="cnn", help="cnn, cnn-bn, resnet18 or mlp")
    parser.add_argument("--batchsize", type=int, default=32, help="minibatch per rank")
    parser.add_argument("--iterations", type=int, default=20, help="timed iterations")
    parser.add_argument("--warmup", type=int, default=3, help="iterations left out first (>= 1)")
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run (watchdog)")
    parser.add_argument("--same-cpu-share", action=argparse.BooleanOptionalAction, default=None,
                        help="when the largest --np has more ranks than this machine has cores, keep "
                             "as many processes busy in every run (spinning fillers), so that each "
                             "rank computes at the same speed at every p, as with one GPU per rank "
                             "(default: on for runs on the cluster, off for local ranks)")
    parser.add_argument("--where", choices=jobs.WHERE, default="local",
                        help="local ranks (default), jobs across the nodes of the local cluster "
                             "(`handson cluster up --link 1gbe`), or auto: the cluster when one is up")
    parser.add_argument("--top", type=int, default=10, help="rows of the TimerHook table")
    parser.add_argument("--plot", default=None, metavar="PNG",
                        help="write the stacked phase bars (and PNG_scaling.png for several --np)")
    parser.add_argument("--json", default=None, metavar="FILE", help="write every result as JSON")
    parser.add_argument("--trace", default=None, metavar="FILE.json", help="write the timeline of every "
                        "rank (largest --np) as a Chrome trace for ui.perfetto.dev / chrome://tracing")
    parser.add_argument("--timeline", default=None, metavar="PNG",
                        help="draw the timeline of every rank (largest --np)")


def main(args):
    settings = dict(model=args.model, batchsize=args.batchsize, iterations=args.iterations,
                    warmup=args.warmup, dataset=args.dataset, timeout=args.timeout)
    print(f"{args.model}, batch {args.batchsize} per rank: {args.warmup} warm-up + {args.iterations} "
          f"timed iterations per run", flush=True)
    try:
        results = sweep(args.np, where=args.where, same_cpu_share=args.same_cpu_share,
                        print_fn=lambda text: print(text, flush=True), **settings)
    except (RuntimeError, ValueError) as err:  # jobs.JobError too
        print(f"error: {err}", file=sys.stderr)
        return 1
    for p, result in results.items():
        print()
        print(format_timer_table(result, top=args.top))
    print()
    first = results[min(results)]
    print(f"ranks: {first['device']}; between nodes: {link_text(first)}; gradient size L = "
          f"{first['gradient_bytes']:,} bytes")
    print(format_phase_table(results))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(as_json(results), indent=1))
        print(f"results: {args.json}")
    if args.plot:
        pyplot("Agg")
        plot = Path(args.plot)
        plot.parent.mkdir(parents=True, exist_ok=True)
        phase_figure(results).savefig(plot, dpi=120)
        print(f"phase breakdown: {plot}")
        if len(results) > 1 and 1 in results:
            scaling = plot.with_name(plot.stem + "_scaling" + plot.suffix)
            scaling_figure(results).savefig(scaling, dpi=120)
            print(f"scaling (throughput and efficiency vs ranks): {scaling}")
    cpu_timeline.write_outputs(results, trace=args.trace, png=args.timeline)
    return 0
