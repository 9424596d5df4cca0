"""`handson bench ...`: throughput benchmarks, reported as ratios to a reference in the same run.

Runs alternate between the configurations (A B A B ...) so that a slow spell of a shared
machine hits both; warm-up iterations are excluded by the launcher's own meter; the median and
the spread of the repeats are printed.
"""

import json
import statistics
import sys
from pathlib import Path

from handson_lib import COURSE_ROOT, grading


def _summary(rates):
    return {"median": statistics.median(rates), "min": min(rates), "max": max(rates), "runs": rates}


def bench_multi_gpu(repeats=3, workers=2, epoch=2, train_size=4000, batchsize=32, out=None, print_fn=print):
    script = COURSE_ROOT / "solutions" / "train_cifar_multi_gpu.py"
    common = ["--epoch", str(epoch), "--train-size", str(train_size), "--test-size", "500",
              "--batchsize", str(batchsize), "--no-progress"]
    configs = {"baseline (1 process)": ["--gpus", "0"],
               f"MultiprocessParallelUpdater ({workers} workers)": ["--gpus", *map(str, range(workers))]}
    rates = {name: [] for name in configs}
    backend = None
    for i in range(repeats):
        for name, extra in configs.items():
            obs = grading.run_observed(script, [*extra, *common], timeout=900)
            if not obs.finished:
                raise RuntimeError(f"{name} failed:\n{obs.output[-2000:]}")
            rates[name].append(obs.throughput)
            backend = obs.record.get("backend") or backend
            print_fn(f"  run {i + 1}/{repeats} {name}: {obs.throughput:.1f} images/s")
    base, par = (statistics.median(r) for r in rates.values())
    result = {"benchmark": "multi-gpu", "backend": backend, "workers": workers, "batchsize": batchsize,
              "configs": {n: _summary(r) for n, r in rates.items()}, "speedup": par / base,
              "speedup_range": [min(rates[list(rates)[1]]) / max(rates[list(rates)[0]]),
                                max(rates[list(rates)[1]]) / min(rates[list(rates)[0]])]}
    print_fn(f"{'configuration':45s} {'median img/s':>12s} {'min':>8s} {'max':>8s}")
    for name, summary in result["configs"].items():
        print_fn(f"{name:45s} {summary['median']:12.1f} {summary['min']:8.1f} {summary['max']:8.1f}")
    print_fn(f"speed-up {workers} workers vs baseline: {par / base:.2f}x "
             f"(range {result['speedup_range'][0]:.2f}-{result['speedup_range'][1]:.2f}; backend: {backend})")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(out, "multi_gpu.json").write_text(json.dumps(result, indent=2))
    return result


def main(args):
    if args.benchmark == "multi-gpu":
        bench_multi_gpu(repeats=args.repeats, batchsize=args.batchsize, out=args.out)
        return 0
    print(f"unknown benchmark {args.benchmark!r}", file=sys.stderr)
    return 2
