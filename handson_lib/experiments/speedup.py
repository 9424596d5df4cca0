"""`handson bench multi-gpu` / `multi-node`: throughput benchmarks, reported as ratios to a
reference in the same run.

Runs alternate between the configurations (A B A B ...) so that a slow spell of a shared
machine hits both; warm-up iterations are excluded by the launcher's own meter; the median and
the spread of the repeats are printed.
"""

import json
import re
import statistics
from pathlib import Path

from handson_lib import COURSE_ROOT, launch, settings
from handson_lib.experiments import stats
from handson_lib.checking import runs
from handson_lib.sites import jobs
from handson_lib.plotting import pyplot


#: the rows of the breakdown table, in order: where a step's time goes, per process
CATEGORIES = (
    ("data", "data (next batch)"),
    ("compute", "compute (forward + backward)"),
    ("wait", "waiting for the other worker(s)"),
    ("exchange", "gradient sum / allreduce"),
    ("update", "update (optimizer)"),
    ("copy", "parameter copies"),
    ("other", "other (in the step)"),
    ("idle", "idle (waiting for the next step)"),
)
STEP = "step (what T counts)"
BETWEEN = "between steps (evaluation, logs; not in T)"


def _standin_columns(standin, between):
    """The stand-in's phases ({"main": ..., "<device>": ...}) as breakdown columns (seconds)."""
    columns = {}
    for who, times in standin.items():
        names = {"reduce": "exchange"}
        column = {names.get(k, k): v for k, v in times.items()}
        if who == "main":
            column["between"] = between
        columns[who] = column
    return columns


def _rank_columns(ranks):
    """Ranks' phase records as columns: the allreduce splits into the exchange itself (the fastest
    rank's allreduce in each iteration) and the waiting for a slower rank (the rest)."""
    iterations = [r["phases"]["iterations"] for r in ranks]
    n = min(len(its) for its in iterations)
    columns = {}
    for r, its in zip(ranks, iterations):
        exchange, wait = [], []
        for i in range(n):
            fastest = min(other[i].get("allreduce", 0.0) for other in iterations)
            exchange.append(fastest)
            wait.append(its[i].get("allreduce", 0.0) - fastest)
        median = r["phases"]["summary"]["phases_s"]
        column = {"compute": median.get("forward", 0.0) + median.get("backward", 0.0),
                  "update": median.get("update", 0.0), "other": median.get("other", 0.0)}
        if len(ranks) > 1:
            column.update(exchange=statistics.median(exchange), wait=statistics.median(wait))
        if r.get("rank") in (0, None):
            column["between"] = r["throughput"].get("between_steps_s")
        name = "1 process" if len(ranks) == 1 and r.get("rank") is None else f"rank {r.get('rank') or 0}"
        columns[name] = column
    return columns


def _median_columns(repeats):
    """Median over the repeats of every column's every category (ms)."""
    merged = {}
    for columns in repeats:
        for who, column in columns.items():
            for key, value in column.items():
                if value is not None:
                    merged.setdefault(who, {}).setdefault(key, []).append(value * 1e3)
    return {who: {k: statistics.median(v) for k, v in column.items()} for who, column in merged.items()}


def _short(config):
    """A configuration's name in a column head: "MultiprocessParallelUpdater (2 workers)" -> "2 workers"."""
    inner = re.search(r"\(([^()]*\d[^()]*)\)$", config)
    return inner.group(1) if inner else config


def breakdown_text(breakdown):
    """The breakdown table: ms per step, one column per process of each configuration."""
    heads = [(config, who) for config, columns in breakdown.items() for who in columns]
    lines = [f"{'ms per step (median of the repeats)':42s}" + "".join(
                 f"{_short(config)[:10]:>11s}" if i == 0 or heads[i - 1][0] != config else f"{'':11s}"
                 for i, (config, _) in enumerate(heads)),
             f"{'':42s}" + "".join(f"{who:>11s}" for _, who in heads)]
    for key, label in [*CATEGORIES, ("step", STEP), ("between", BETWEEN)]:
        cells = []
        for config, who in heads:
            column = breakdown[config][who]
            value = sum(v for k, v in column.items() if k not in ("between", "idle")) if key == "step" \
                else column.get(key)
            cells.append(f"{value:11.1f}" if value is not None else f"{'':11s}")
        if any(c.strip() for c in cells):
            lines.append(f"{label:42s}" + "".join(cells))
    return "\n".join(lines)


def _finish(benchmark, rates, meta, out, filename, label, print_fn, breakdown=None, parallel=2):
    """Table, speed-up of the second configuration over the first (median, range, the limit),
    the breakdown of a step, JSON file."""
    configs = {name: stats.spread_summary(values) for name, values in rates.items()}
    base, par = configs.values()
    limit = min(parallel, launch.cpu_count())
    result = {"benchmark": benchmark, **meta, "link": jobs.job_link(), "configs": configs,
              "speedup": stats.ratio_of_medians(par, base),
              "speedup_range": stats.ratio_range(par, base),
              "paired_speedups": [p / b for p, b in zip(par["runs"], base["runs"])],
              "limit": limit, "limit_reason": f"{parallel} workers on {launch.cpu_count()} cores",
              "breakdown": breakdown}
    for line in speedup_text(result, label).splitlines():
        print_fn(line)
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(out, filename).write_text(json.dumps(result, indent=2))
    return result


def _phases_observed():
    """Every observed run records its phases (settings.observe_phases, carried to the runs)."""
    return settings.override(observe_phases=True)


def _baseline_columns(record):
    """A one-process run's phases (observed StandardUpdater) as a breakdown column."""
    return _rank_columns([{**record, "rank": None}])


def bench_multi_gpu(repeats=3, workers=2, epoch=2, train_size=4000, batchsize=32, out=None, print_fn=print):
    script = COURSE_ROOT / "solutions" / "train_cifar_multi_gpu.py"
    common = ["--epoch", str(epoch), "--train-size", str(train_size), "--test-size", "500",
              "--batchsize", str(batchsize), "--no-progress"]
    base_name, par_name = "baseline (1 process)", f"MultiprocessParallelUpdater ({workers} workers)"
    configs = {base_name: ["--gpus", "0"], par_name: ["--gpus", *map(str, range(workers))]}
    rates = {name: [] for name in configs}
    columns = {name: [] for name in configs}
    backend = None
    with _phases_observed():
        for i in range(repeats):
            for name, extra in configs.items():
                obs = runs.run_observed(script, [*extra, *common], timeout=900)
                if not obs.finished:
                    raise RuntimeError(f"{name} failed:\n{obs.output[-2000:]}")
                rates[name].append(obs.throughput)
                backend = obs.record.get("backend") or backend
                phases = obs.record.get("phases") or {}
                between = obs.record["throughput"].get("between_steps_s")
                columns[name].append(_standin_columns(phases["standin"], between) if "standin" in phases
                                     else _baseline_columns(obs.record))
                print_fn(f"  run {i + 1}/{repeats} {name}: {obs.throughput:.1f} images/s")
    breakdown = {name: _median_columns(c) for name, c in columns.items()}
    return _finish("multi-gpu", rates, {"backend": backend, "workers": workers, "batchsize": batchsize},
                   out, f"multi_gpu_b{batchsize}.json", f"{workers} workers vs baseline (backend: {backend})",
                   print_fn, breakdown=breakdown, parallel=workers)


def bench_multi_node(repeats=3, ranks=2, epoch=2, train_size=4000, batchsize=32, out=None, print_fn=print):
    """ChainerMN Task #2 on 1 rank vs `ranks` ranks, OMP_NUM_THREADS=1 per rank."""
    script = COURSE_ROOT / "solutions" / "train_cifar_multi_node.py"
    common = ["--epoch", str(epoch), "--train-size", str(train_size), "--test-size", "500",
              "--batchsize", str(batchsize), "--no-progress"]
    rates = {1: [], ranks: []}
    columns = {1: [], ranks: []}
    with _phases_observed():
        for i in range(repeats):
            for n in rates:
                obs = runs.run_observed_mpi(script, n, common, timeout=900)
                if not obs.finished:
                    raise RuntimeError(f"{n} rank(s) failed:\n{obs.output[-2000:]}")
                rates[n].append(obs.throughput)
                columns[n].append(_rank_columns([obs.ranks[r] for r in sorted(obs.ranks)]))
                print_fn(f"  run {i + 1}/{repeats} {n} rank(s): {obs.throughput:.1f} images/s")
    name = lambda n: f"{n} rank(s)"
    breakdown = {name(n): _median_columns(c) for n, c in columns.items()}
    return _finish("multi-node", {name(n): r for n, r in rates.items()},
                   {"ranks": ranks, "batchsize": batchsize, "omp_num_threads": 1},
                   out, f"multi_node_b{batchsize}.json", f"{ranks} ranks vs 1 (batch {batchsize})", print_fn,
                   breakdown=breakdown, parallel=ranks)


def speedup_text(result, label=None):
    """The configurations' images/sec (median, min, max), the speed-up against its limit, and the
    breakdown of a step when the result has one."""
    lines = [f"{'configuration':45s} {'median img/s':>12s} {'min':>8s} {'max':>8s}"]
    for name, summary in result["configs"].items():
        lines.append(f"{name:45s} {summary['median']:12.1f} {summary['min']:8.1f} {summary['max']:8.1f}")
    low, high = result["speedup_range"]
    lines.append(f"speed-up{' ' + label if label else ''}: {result['speedup']:.2f}x (range {low:.2f}-{high:.2f})")
    if result.get("limit"):
        paired = ", ".join(f"{r:.2f}" for r in result.get("paired_speedups") or [])
        lines.append(f"limit: {result['limit']:.2f}x ({result['limit_reason']}); reached "
                     f"{result['speedup'] / result['limit']:.0%} of it; run by run: {paired}")
    if result.get("breakdown"):
        lines += ["", breakdown_text(result["breakdown"])]
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
