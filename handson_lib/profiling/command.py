"""`handson profile summarize FILE [--plot PNG] [--json]`."""

import sys
from pathlib import Path

from handson_lib.profiling.model import ProfileFormatError
from handson_lib.profiling.read import SAMPLES, sample_profile
from handson_lib.profiling.summary import summarize
from handson_lib.profiling.timeline import timeline_figure
from handson_lib.plotting import pyplot


def add_arguments(parser):
    parser.add_argument("file", help="an Nsight Systems SQLite export (nsys export --type sqlite "
                        "report.nsys-rep) or an nvprof -o file; 'sample' (or 'sample-saxpy') reads the "
                        "shipped A100 SAXPY profile, 'sample-mlp' the H100 training loop")
    parser.add_argument("--plot", metavar="PNG", help="write the timeline to this PNG file")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--gap-threshold-ms", type=float, default=1.0,
                        help="list GPU idle gaps longer than this (default: 1 ms)")
    parser.add_argument("--top", type=int, default=10, help="kernels / NVTX ranges listed (default: 10)")


def main(args):
    path = args.file
    if path in ("sample", *(f"sample-{name}" for name in SAMPLES)) and not Path(path).exists():
        path = sample_profile(path.partition("-")[2] or "saxpy")
    if args.gap_threshold_ms < 0 or args.top < 0:
        print("error: --gap-threshold-ms and --top must not be negative", file=sys.stderr)
        return 2
    try:
        summary = summarize(path, gap_threshold_ms=args.gap_threshold_ms, top=args.top)
    except ProfileFormatError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(summary.to_json() if args.json else summary.text())
    if args.plot:
        plt = pyplot("Agg")
        fig = timeline_figure(summary, gap_threshold_ms=args.gap_threshold_ms)
        fig.savefig(args.plot, dpi=120, bbox_inches="tight")
        plt.close(fig)
        print(f"timeline written to {args.plot}", file=sys.stderr if args.json else sys.stdout)
    return 0
