"""`handson bench tuning`: the levers measured in turn, the table printed, tuning.json and the
bar chart written."""

import json
import sys
from pathlib import Path

from handson_lib.experiments.tuning.levers import LEVER_NAMES, parse_levers
from handson_lib.experiments.tuning.measure import run_levers
from handson_lib.experiments.tuning.report import bars_figure, table
from handson_lib.experiments.tuning.worker import add_run_arguments
from handson_lib.plotting import pyplot

def add_arguments(parser):
    parser.add_argument("--levers", default=",".join(LEVER_NAMES),
                        help="levers in the order they are switched on (default: the talk's order)")
    parser.add_argument("--each", action="store_true",
                        help="each lever alone against the baseline instead of cumulative steps")
    parser.add_argument("--repeats", type=int, default=3, help="runs per step, alternating")
    add_run_arguments(parser, iterations=30, warmup=3)
    parser.set_defaults(max_seconds=20.0)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads of the training process")
    parser.add_argument("--timeout", type=float, default=900, help="seconds before a run is stopped")
    parser.add_argument("--out", default="results/bench", help="folder for tuning.json")
    parser.add_argument("--plot", default=None, help="bar chart PNG (default: OUT/tuning.png)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def main(args):
    progress = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else print
    try:
        result = run_levers(parse_levers(args.levers), repeats=args.repeats, iterations=args.iterations,
                            warmup=args.warmup, batchsize=args.batchsize, device=args.gpu,
                            cumulative=not args.each, model=args.model, width=args.width,
                            image_size=args.image_size, source_size=args.source_size,
                            n_processes=args.n_processes, max_seconds=args.max_seconds,
                            dataset=args.dataset, timeout=args.timeout, threads=args.threads,
                            print_fn=progress)
    except (ValueError, RuntimeError) as error:
        print(f"handson bench tuning: {error}", file=sys.stderr)
        return 2
    pyplot("Agg")   # a file, no display
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tuning.json").write_text(json.dumps(result, indent=2))
    plot = Path(args.plot) if args.plot else out / "tuning.png"
    plot.parent.mkdir(parents=True, exist_ok=True)
    bars_figure(result).savefig(plot, dpi=110)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(table(result))
        print(f"wrote {out / 'tuning.json'} and {plot}")
    return 0
