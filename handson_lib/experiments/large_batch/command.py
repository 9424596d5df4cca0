"""`handson bench large-batch`'s arguments and run, given the rules (the instructor's command in
handson_lib.autograder.answers passes its own)."""

import json
import sys
from pathlib import Path

from handson_lib import data
from handson_lib.experiments.large_batch.experiment import DEFAULT_BATCHES, run
from handson_lib.experiments.large_batch.report import accuracy_figure, format_table

def add_arguments(parser):
    parser.add_argument("--epochs", type=int, default=10, help="epochs of every run (default 10)")
    parser.add_argument("--batches", default=",".join(map(str, DEFAULT_BATCHES)),
                        help="total batch sizes, comma-separated (default %(default)s)")
    parser.add_argument("--base-batch", type=int, default=16,
                        help="the batch that --base-lr is tuned for (default 16)")
    parser.add_argument("--base-lr", type=float, default=0.01, help="learning rate at --base-batch")
    parser.add_argument("--warmup-epochs", type=float, default=2.0,
                        help="gradual warmup length in epochs (default 2)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per configuration (mean reported)")
    parser.add_argument("--model", default="mlp", help="mlp (hidden units: --hidden-units) or cnn")
    parser.add_argument("--hidden-units", type=int, default=100)
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--out", default="results/bench", help="folder for large_batch.json")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--plot", default=None, metavar="PNG", help="write the accuracy-vs-batch plot")


def _parse_batches(text):
    try:
        batches = [int(b) for b in str(text).split(",") if b.strip()]
    except ValueError:
        raise ValueError(f"--batches takes integers separated by commas, got {text!r}") from None
    if not batches or min(batches) < 1:
        raise ValueError(f"--batches needs positive integers, got {text!r}")
    return batches


def run_command(args, scaling_rule, lr_schedule_factory):
    """`handson bench large-batch` with the given rules (the instructor's command passes its own):
    the result, or None after printing why the arguments are wrong."""
    try:
        batches = _parse_batches(args.batches)
        result = run(batches=batches, epochs=args.epochs, dataset=args.dataset, model=args.model,
                     base_batch=args.base_batch, base_lr=args.base_lr,
                     warmup_epochs=args.warmup_epochs, seeds=args.seeds,
                     hidden_units=args.hidden_units, scaling_rule=scaling_rule,
                     lr_schedule_factory=lr_schedule_factory,
                     print_fn=None if args.json else (lambda *a: print(*a, flush=True)))
    except (ValueError, data.DatasetError) as exc:
        print(f"handson bench large-batch: {exc}", file=sys.stderr)
        return None
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_table(result))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        path = Path(args.out, "large_batch.json")
        path.write_text(json.dumps(result, indent=2))
        if not args.json:
            print(f"wrote {path}")
    if args.plot:
        accuracy_figure(result).savefig(args.plot, dpi=120)
        if not args.json:
            print(f"wrote {args.plot}")
    return result
