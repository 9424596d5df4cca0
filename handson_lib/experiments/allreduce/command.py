"""`handson bench allreduce`'s arguments and run, given the traffic rule (the instructor's command
in handson_lib.autograder.answers passes its own)."""

import json
import sys
from pathlib import Path

from handson_lib.experiments.allreduce.launcher import measure
from handson_lib.experiments.allreduce.model import FIT_SWEEP
from handson_lib.experiments.allreduce.report import bandwidth_figure, format_table
from handson_lib.experiments.allreduce.units import DEFAULT_SWEEP
from handson_lib.plotting import pyplot
from handson_lib.sites import jobs

def add_arguments(parser):
    parser.add_argument("--np", type=int, default=2, help="MPI ranks (default 2)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--model", default=None,
                      help="message size = the model's gradient bytes: resnet50 (seed 001's "
                           "L = 102,228,384 bytes; the default) or a course model: cnn, cnn-bn, "
                           "resnet18, mlp")
    what.add_argument("--bytes", default=None, help="message size in bytes (1048576, 64K, 1M, ...)")
    what.add_argument("--sizes", nargs="?", const=DEFAULT_SWEEP, default=None,
                      help=f"sweep message sizes: FIRST:LAST[:FACTOR] or a comma list "
                           f"(alone: {DEFAULT_SWEEP}, powers of 4)")
    parser.add_argument("--in-place", action="store_true",
                        help="also time the raw MPI allreduce with MPI.IN_PLACE (as ChainerMN calls it)")
    parser.add_argument("--iterations", type=int, default=10, help="timed iterations per path")
    parser.add_argument("--warmup", type=int, default=3, help="untimed iterations first")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds before the watchdog stops the run")
    parser.add_argument("--where", choices=jobs.WHERE, default="local",
                        help="local ranks (default), a job across the nodes of the local cluster "
                             "(`handson cluster up --link 1gbe`), or auto: the cluster when one is up")
    parser.add_argument("--plot", default=None, metavar="PNG",
                        help="write the bandwidth figure (busbw per path and size, the link's rate)")
    parser.add_argument("--out", default="results/bench", help="folder for allreduce_<what>_np{P}.json ('' = none)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of the table")
    parser.add_argument("--fit", default=None, metavar="P,P[:Q]",
                        help="measure on each P (and Q) ranks over --sizes (default 4K up to L), fit the "
                             "allreduce's cost model on the Ps and predict Q before setting it beside "
                             "what Q measured (e.g. 2,3:4)")


def parse_fit(spec):
    """'2,3:4' -> ([2, 3], [4]); '2,3' -> ([2, 3], [])."""
    fitted, _, held = spec.partition(":")
    try:
        on = [int(p) for p in fitted.split(",") if p.strip()]
        out = [int(p) for p in held.split(",") if p.strip()]
    except ValueError:
        raise ValueError(f"--fit takes process counts like 2,3:4, got {spec!r}") from None
    if len(on) < 1 or any(p < 2 for p in on + out):
        raise ValueError(f"--fit needs process counts of 2 or more to fit on (and to hold out), got {spec!r}")
    return on, out



def run_fit(args, terms, names):
    """`handson bench allreduce --fit`: measure, fit the cost model (`terms`, `names`: the caller's),
    print its coefficients and the held-out prediction; the figure with --plot."""
    from handson_lib.experiments.allreduce import model
    try:
        on, out = parse_fit(args.fit)
        points = {}
        for p in sorted(set(on + out)):
            print(f"measuring the allreduce on {p} ranks ...", flush=True)
            result = measure(np=p, sizes=args.sizes or FIT_SWEEP, iterations=args.iterations, warmup=args.warmup,
                             algorithm="ring",
                             timeout=args.timeout, where=args.where)
            points[p] = model.points_of(result)
        fitted = model.fit([pt for p in on for pt in points[p]], terms, names)
    except (ValueError, RuntimeError) as error:
        print(f"handson bench allreduce: {error}", file=sys.stderr)
        return 2 if isinstance(error, ValueError) else 1
    print(f"fitted on p = {', '.join(map(str, on))} ({len(fitted.points)} points, mpi4py Allreduce):")
    print(fitted.table())
    unseen = [pt for p in out for pt in points[p]]
    for pt, predicted, error in model.held_out(fitted, unseen):
        print(f"  p = {pt.p}, {pt.nbytes:>12.0f} bytes: measured {pt.seconds:.4g} s, predicted {predicted:.4g} s "
              f"({error:+.1%})")
    if args.plot:
        pyplot("Agg")
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        model.fit_figure(fitted, unseen).savefig(args.plot, dpi=120)
        print(f"figure written to {args.plot}")
    return 0


def run_command(args, traffic_rule):
    """`handson bench allreduce` with the given traffic rule (the instructor's command passes its
    own): the table or JSON, the file under --out; exit status 1 on a wrong allreduce result."""
    try:
        result = measure(np=args.np, nbytes=args.bytes, model=args.model, sizes=args.sizes,
                         iterations=args.iterations, warmup=args.warmup, timeout=args.timeout,
                         echo=not args.json, in_place=args.in_place, traffic_rule=traffic_rule,
                         where=args.where)
    except ValueError as error:
        print(f"handson bench allreduce: {error}", file=sys.stderr)
        return 2
    except RuntimeError as error:  # jobs.JobError too: no cluster, a refused job
        print(f"handson bench allreduce: {error}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_table(result))
    if args.out:
        what = args.model or ("sweep" if args.sizes else f"{args.bytes}B" if args.bytes else "resnet50")
        path = Path(args.out, f"allreduce_{what}_np{result['ranks']}.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2))
        if not args.json:
            print(f"JSON written to {path}")
    if args.plot:
        pyplot("Agg")
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        bandwidth_figure(result).savefig(args.plot, dpi=120)
        if not args.json:
            print(f"figure written to {args.plot}")
    if not result["correct"]:
        wrong = [f"{r['path']} ({r['bytes']} bytes)" for r in result["results"] if not r["correct"]]
        print(f"ERROR: wrong allreduce result: {', '.join(wrong)}", file=sys.stderr)
        return 1
    return 0
