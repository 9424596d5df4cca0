"""`handson check TASK FILE`: a task's checks on a script (checking.checks), their report printed.

Where the reference solutions are installed (the instructor's checkout: the instructor-only
handson_lib.checking.reference), this command hands them to the checks, which then judge
throughput against the reference by default; the student edition has none: self mode.
"""

import importlib
import importlib.util
import sys
from pathlib import Path

from handson_lib.checking import against as modes
from handson_lib.checking.against import AGAINST
from handson_lib.checking.checks import TASKS
from handson_lib.messages import tr
from handson_lib.sites.table import SITES

#: The instructor-only module of the reference solutions (absent from the student edition).
REFERENCE_MODULE = "handson_lib.checking.reference"


def installed_reference_solutions():
    """The reference solutions where they are installed, else None (the student edition)."""
    if importlib.util.find_spec(REFERENCE_MODULE) is None:
        return None
    return importlib.import_module(REFERENCE_MODULE)


def add_arguments(parser):
    parser.add_argument("task", help=f"{', '.join(TASKS)} (a jobscript-* task: the job script's points, lint at "
                        "the script's site)")
    parser.add_argument("file", help="your script, e.g. exercises/train_cifar_multi_gpu.py")
    parser.add_argument("--timeout", type=float, default=300, help="seconds before the watchdog stops a run")
    parser.add_argument("--site", default=None, help="the site whose thresholds and bands apply: "
                        f"{', '.join(SITES)} (default: HANDSON_SITE, else local); for jobscript-*, the "
                        "site whose rules apply (default: the script's '# handson-site:' line, else reedbush)")
    parser.add_argument("--min-throughput-ratio", type=float, default=None,
                        help="throughput needed, as a fraction of the reference solution's (reference mode)")
    parser.add_argument("--np", type=int, default=2, help="ranks for multi-node (also run on 1 for scaling)")
    parser.add_argument("--against", choices=AGAINST, default=None,
                        help="judge throughput against the reference solution's steps timed in turn with yours, or against "
                             "your own 1-device / 1-rank run (default: reference where the solutions are "
                             "installed, self otherwise)")
    parser.add_argument("--json", action="store_true", help="machine-readable report")


def main(args):
    if args.task not in TASKS:
        print(tr("unknown task {task!r}; choose one of {choices}", task=args.task, choices=", ".join(TASKS)),
              file=sys.stderr)
        return 2
    if not Path(args.file).exists():
        print(tr("{file}: no such file", file=args.file), file=sys.stderr)
        return 2
    kwargs = dict(timeout=args.timeout, site=args.site, print_fn=print, against=args.against)
    if args.task in ("multi-node", "mnist-multi-node"):
        kwargs["np"] = args.np
    if args.min_throughput_ratio is not None:
        kwargs["min_throughput_ratio"] = args.min_throughput_ratio
    try:
        with modes.reference_solutions_from(installed_reference_solutions()):
            report = TASKS[args.task](args.file, **kwargs)
    except ValueError as error:  # a bad --site or --against
        print(f"handson check: {error}", file=sys.stderr)
        return 2
    print(report.to_json() if args.json else report.text())
    return 0 if report.ok else 1
