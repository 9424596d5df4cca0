"""`make demo`: the main job on embedded defaults (offline data, CPU or GPU as present)."""

import argparse
import tempfile

from handson_lib import training


def demo_arguments(quick=False, out=None):
    parser = training.add_common_arguments(argparse.ArgumentParser())
    argv = ["--epoch", "1" if quick else "2", "--train-size", "512" if quick else "4000",
            "--test-size", "256" if quick else "1000", "--out", out or "result/demo"]
    if quick:
        argv.append("--no-progress")
    return parser.parse_args(argv)


def main(args):
    out = tempfile.mkdtemp(prefix="handson-demo-") if args.quick else None
    ns = demo_arguments(quick=args.quick, out=out)
    print("=" * 72)
    print("handson demo: single-process baseline of Task #1 on the offline data")
    print("=" * 72)
    training.run_baseline(ns)
    print(f"Logs and plots: {ns.out}/")
    return 0
