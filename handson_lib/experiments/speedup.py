"""`handson bench multi-gpu` / `multi-node`: throughput benchmarks, reported as ratios to a
reference in the same run.

Runs alternate between the configurations (A B A B ...) so that a slow spell of a shared
machine hits both; warm-up iterations are excluded by the launcher's own meter; the median and
the spread of the repeats are printed.
"""

import json
from pathlib import Path

from handson_lib import COURSE_ROOT
from handson_lib.experiments import stats
from handson_lib.grading import runs
from handson_lib.sites import jobs
from handson_lib.plotting import pyplot


def _finish(benchmark, rates, meta, out, filename, label, print_fn):
    """Table, speed-up of the second configuration over the first (median, and range), JSON file."""
    configs = {name: stats.spread_summary(values) for name, values in rates.items()}
    base, parallel = configs.values()
    result = {"benchmark": benchmark, **meta, "link": jobs.job_link(), "configs": configs,
              "speedup": stats.ratio_of_medians(parallel, base),
              "speedup_range": stats.ratio_range(parallel, base)}
    for line in speedup_text(result, label).splitlines():
        print_fn(line)
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(out, filename).write_text(json.dumps(result, indent=2))
    return result


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
            obs = runs.run_observed(script, [*extra, *common], timeout=900)
            if not obs.finished:
                raise RuntimeError(f"{name} failed:\n{obs.output[-2000:]}")
            rates[name].append(obs.throughput)
            backend = obs.record.get("backend") or backend
            print_fn(f"  run {i + 1}/{repeats} {name}: {obs.throughput:.1f} images/s")
    return _finish("multi-gpu", rates, {"backend": backend, "workers": workers, "batchsize": batchsize},
                   out, f"multi_gpu_b{batchsize}.json", f"{workers} workers vs baseline (backend: {backend})",
                   print_fn)


def bench_multi_node(repeats=3, ranks=2, epoch=2, train_size=4000, batchsize=32, out=None, print_fn=print):
    """ChainerMN Task #2 on 1 rank vs `ranks` ranks, OMP_NUM_THREADS=1 per rank."""
    script = COURSE_ROOT / "solutions" / "train_cifar_multi_node.py"
    common = ["--epoch", str(epoch), "--train-size", str(train_size), "--test-size", "500",
              "--batchsize", str(batchsize), "--no-progress"]
    rates = {1: [], ranks: []}
    for i in range(repeats):
        for n in rates:
            obs = runs.run_observed_mpi(script, n, common, timeout=900)
            if not obs.finished:
                raise RuntimeError(f"{n} rank(s) failed:\n{obs.output[-2000:]}")
            rates[n].append(obs.throughput)
            print_fn(f"  run {i + 1}/{repeats} {n} rank(s): {obs.throughput:.1f} images/s")
    return _finish("multi-node", {f"{n} rank(s)": r for n, r in rates.items()},
                   {"ranks": ranks, "batchsize": batchsize, "omp_num_threads": 1},
                   out, f"multi_node_b{batchsize}.json", f"{ranks} ranks vs 1 (batch {batchsize})", print_fn)


def speedup_text(result, label=None):
    """The configurations' images/sec (median, min, max) and the speed-up, as text."""
    lines = [f"{'configuration':45s} {'median img/s':>12s} {'min':>8s} {'max':>8s}"]
    for name, summary in result["configs"].items():
        lines.append(f"{name:45s} {summary['median']:12.1f} {summary['min']:8.1f} {summary['max']:8.1f}")
    low, high = result["speedup_range"]
    lines.append(f"speed-up{' ' + label if label else ''}: {result['speedup']:.2f}x (range {low:.2f}-{high:.2f})")
    return "\n".join(lines)


def speedup_figure(result, title=None):
    """Bars of images/sec per configuration (median, min-max), the speed-up in the title."""
    plt = pyplot()
    title = title or report_title(result)
    names = list(result["configs"])
    medians = [result["configs"][n]["median"] for n in names]
    errors = [[m - result["configs"][n]["min"] for n, m in zip(names, medians)],
              [result["configs"][n]["max"] - m for n, m in zip(names, medians)]]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.bar(range(len(names)), medians, yerr=errors, capsize=4, color=["tab:gray", "tab:blue"][:len(names)])
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_ylabel("images/sec. (median, min-max)")
    ax.set_title(f"{title}: {result['speedup']:.2f}x")
    fig.tight_layout()
    return fig


def report_title(result):
    """What a multi-gpu / multi-node result compares, from its own fields."""
    if result["benchmark"] == "multi-gpu":
        title = f"Task #1 {result.get('workers')} workers vs 1 (backend {result.get('backend')})"
    else:
        title = f"Task #2 {result.get('ranks')} ranks vs 1"
    return f"{title}, batch {result.get('batchsize')}"


def add_multi_gpu_arguments(parser):
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batchsize", type=int, default=32)
    parser.add_argument("--out", default="results/bench", help="folder for the JSON results")


add_multi_node_arguments = add_multi_gpu_arguments


def multi_gpu_main(args):
    bench_multi_gpu(repeats=args.repeats, batchsize=args.batchsize, out=args.out)


def multi_node_main(args):
    bench_multi_node(repeats=args.repeats, batchsize=args.batchsize, out=args.out)
