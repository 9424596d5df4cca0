"""`handson bench ...`: throughput benchmarks, reported as ratios to a reference in the same run.

Runs alternate between the configurations (A B A B ...) so that a slow spell of a shared
machine hits both; warm-up iterations are excluded by the launcher's own meter; the median and
the spread of the repeats are printed.
"""

import json
import statistics
import sys
from pathlib import Path

from handson_lib import COURSE_ROOT
from handson_lib.grading import checks


def spread_summary(values):
    """Median, min, max and every value of repeated measurements."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": list(values)}


def _finish(benchmark, rates, meta, out, filename, label, print_fn):
    """Table, speed-up of the second configuration over the first (median, and range), JSON file."""
    (base_name, base), (par_name, par) = rates.items()
    speedup = statistics.median(par) / statistics.median(base)
    result = {"benchmark": benchmark, **meta, "configs": {n: spread_summary(r) for n, r in rates.items()},
              "speedup": speedup, "speedup_range": [min(par) / max(base), max(par) / min(base)]}
    for line in _speedup_text(result, label).splitlines():
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
            obs = checks.run_observed(script, [*extra, *common], timeout=900)
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
            obs = checks.run_observed_mpi(script, n, common, timeout=900)
            if not obs.finished:
                raise RuntimeError(f"{n} rank(s) failed:\n{obs.output[-2000:]}")
            rates[n].append(obs.throughput)
            print_fn(f"  run {i + 1}/{repeats} {n} rank(s): {obs.throughput:.1f} images/s")
    return _finish("multi-node", {f"{n} rank(s)": r for n, r in rates.items()},
                   {"ranks": ranks, "batchsize": batchsize, "omp_num_threads": 1},
                   out, f"multi_node_b{batchsize}.json", f"{ranks} ranks vs 1 (batch {batchsize})", print_fn)


def _speedup_text(result, label=None):
    lines = [f"{'configuration':45s} {'median img/s':>12s} {'min':>8s} {'max':>8s}"]
    for name, summary in result["configs"].items():
        lines.append(f"{name:45s} {summary['median']:12.1f} {summary['min']:8.1f} {summary['max']:8.1f}")
    low, high = result["speedup_range"]
    lines.append(f"speed-up{' ' + label if label else ''}: {result['speedup']:.2f}x (range {low:.2f}-{high:.2f})")
    return "\n".join(lines)


def _speedup_figure(result, title):
    import matplotlib.pyplot as plt
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


def _render(path, result):
    """(title, text table, figure) of one benchmark's JSON, by the file's name."""
    stem = path.stem
    if stem.startswith(("multi_gpu", "multi_node")):
        title = (f"Task #1 {result.get('workers')} workers vs 1 (backend {result.get('backend')})"
                 if stem.startswith("multi_gpu") else f"Task #2 {result.get('ranks')} ranks vs 1")
        title += f", batch {result.get('batchsize')}"
        return title, _speedup_text(result), _speedup_figure(result, title)
    if stem.startswith("allreduce"):
        from handson_lib.experiments import allreduce
        return (f"allreduce on {result['ranks']} ranks ({result.get('model') or 'sizes'})",
                allreduce.format_table(result), allreduce.bandwidth_figure(result))
    if stem.startswith("tuning"):
        from handson_lib.experiments import tuning
        return "speed-up levers (seed 004)", tuning.table(result), tuning.bars_figure(result)
    if stem.startswith("large_batch"):
        from handson_lib.experiments import large_batch
        return ("accuracy vs total batch (seed 003)", large_batch.format_table(result),
                large_batch.accuracy_figure(result))
    return None


def report(out="results/bench", print_fn=print):
    """One page for every benchmark in `out`: summary.md with each table and a PNG each."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    folder = Path(out)
    sections = []
    for path in sorted(folder.glob("*.json")):
        try:
            rendered = _render(path, json.loads(path.read_text()))
        except (KeyError, TypeError, ValueError) as error:
            print_fn(f"skipped {path.name}: not a benchmark result this version reads ({error!r})")
            continue
        if rendered is None:
            continue
        title, text, fig = rendered
        png = path.with_suffix(".png")
        fig.savefig(png, dpi=100, bbox_inches="tight")
        plt.close(fig)
        sections.append(f"## {title}\n\n`{path.name}`\n\n```\n{text}\n```\n\n![{title}]({png.name})\n")
        print_fn(f"{path.name}: {title} -> {png.name}")
    if not sections:
        raise SystemExit(f"no benchmark results in {folder}: run `make bench` (or handson bench ...) first")
    summary = folder / "summary.md"
    summary.write_text("# Benchmarks of the course\n\nEach figure is a ratio to a reference measured in the "
                       "same run (warm-up excluded, median and range of the repeats). Made by "
                       "`handson bench report`.\n\n" + "\n".join(sections))
    print_fn(f"summary: {summary}")
    return summary


def add_multi_gpu_arguments(parser):
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batchsize", type=int, default=32)
    parser.add_argument("--out", default="results/bench", help="folder for the JSON results")


add_multi_node_arguments = add_multi_gpu_arguments


def add_report_arguments(parser):
    parser.add_argument("--out", default="results/bench", help="folder of the JSON results")


def multi_gpu_main(args):
    bench_multi_gpu(repeats=args.repeats, batchsize=args.batchsize, out=args.out)


def multi_node_main(args):
    bench_multi_node(repeats=args.repeats, batchsize=args.batchsize, out=args.out)


def report_main(args):
    report(args.out)
