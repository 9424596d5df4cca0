"""Where one training iteration spends its time: forward, backward, allreduce, update (seed 001).

Seed 001 put timers into ChainerMN's `_MultiNodeOptimizer.update` to split every iteration into
compute, allreduce and optimize. `instrument(updater_or_optimizer)` does the same from outside,
by wrapping methods of the *instances* (Chainer's code stays as it is):

- forward:   the loss function the optimizer calls (the model's `__call__`),
- backward:  `loss.backward()` on the Variable that forward returned,
- allreduce: the communicator's `multi_node_mean_grad` (ChainerMN averages the gradients),
- update:    the wrapped optimizer's own `update()` (MomentumSGD's parameter step); with a plain
             optimizer, from the end of backward to the end of `update()`,
- iteration: the updater's `update()` (data loading included) or else the optimizer's; what the
             four phases leave is reported as `other` (data, conversion, `cleargrads`).

Each phase is also an NVTX range of the same name when CuPy imports, so that Nsight Systems /
nvprof timelines show it. On a GPU the device is synchronised before each clock reading.

`measure(np=2, ...)` runs a short ChainerMN training on local CPU ranks (`naive` communicator)
and returns the per-phase medians of every rank, the throughput, the gradient size L and a
`chainer.function_hooks.TimerHook` table of rank 0: `handson profile breakdown` on the command
line. Training scripts switch the instrumentation on with HANDSON_PHASES=1 (see
`training.instrument_phases`).
"""

import argparse
import contextlib
import json
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from handson_lib import data, launch
from handson_lib.experiments.figures import scaling_plot
from handson_lib.messages import tr
from handson_lib.profiling import cpu_timeline
from handson_lib.runtime import models, mpi, training
from handson_lib.sites import jobs
from handson_lib.runtime.phases import (OTHER, PHASE_COLORS, PHASES, gradient_bytes_of, instrument,
                                        relative_timeline)
from handson_lib.plotting import pyplot


def timer_table(hook, iterations):
    """TimerHook's summary as rows sorted by time: function, count, total_ms, ms_per_iteration, share.

    share is of `hook.total_time()` (the outermost calls). A backward runs other functions inside
    it (Convolution2DFunction's backward calls Convolution2DGradW and Deconvolution2DFunction),
    and TimerHook counts those in both rows: the shares can add up to more than 100%.
    """
    summary = hook.summary()
    total = hook.total_time() or 1.0
    rows = [{"function": name, "count": int(r["occurrence"]), "total_ms": r["elapsed_time"] * 1e3,
             "ms_per_iteration": r["elapsed_time"] * 1e3 / max(1, iterations),
             "share": r["elapsed_time"] / total}
            for name, r in summary.items()]
    rows.sort(key=lambda r: -r["total_ms"])
    return rows


def _worker_arguments(argv):
    parser = argparse.ArgumentParser(prog="python -m handson_lib.experiments.breakdown --worker")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--batchsize", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--result", required=True)
    return parser.parse_args(argv)


def _rank_shard(args, comm):
    """(this rank's shard of the training set, number of classes)."""
    import chainermn
    kwargs = {}
    if args.dataset == "synthetic":
        # Enough for a few batches per rank; the iterator repeats the shard.
        n = args.batchsize * comm.size * 4
        kwargs = dict(n_train=n, n_test=comm.size, seed=args.seed)
    train, _, info = data.get_dataset(args.dataset, announce=False, **kwargs) if comm.rank == 0 \
        else (None, None, None)
    info = comm.bcast_obj(info)
    if comm.rank == 0 and len(train) < args.batchsize * comm.size:
        raise ValueError(f"dataset {args.dataset!r} has {len(train)} images: fewer than batch "
                         f"{args.batchsize} x {comm.size} ranks")
    return chainermn.scatter_dataset(train, comm, shuffle=True, seed=args.seed), info.n_class


def _timed_training(updater, args, comm):
    """Warm-up, then the timed iterations; rank 0 runs a TimerHook over the timed ones only (the
    hook adds a little time per function call). Returns the hook."""
    from chainer.function_hooks import TimerHook
    hook = TimerHook()
    for i in range(args.warmup + args.iterations):
        if i == args.warmup and comm.rank == 0:
            hook.__enter__()
        updater.update()
    if comm.rank == 0:
        hook.__exit__(None, None, None)
    return hook


def _worker_result(args, comm, model, gathered, hook, timed):
    """Rank 0's JSON-ready result of the whole job.

    Every rank's spans of the timed iterations move from `gathered` into "timeline" (one entry
    per rank: rank, host, processor, spans [name, start_s, stop_s] from the earliest timed start
    of all ranks, "timeline_epoch_s"), drawn by `handson_lib.profiling.cpu_timeline`."""
    lanes = [{"rank": r["rank"], "host": r["host"], "processor": r["processor"], "spans": r.pop("spans")}
             for r in gathered]
    timeline, origin = relative_timeline(lanes)
    result = {
        "np": comm.size, "model": args.model, "batchsize": args.batchsize,
        "total_batch": args.batchsize * comm.size, "iterations": args.iterations,
        "warmup": args.warmup, "dataset": args.dataset, "communicator": "naive",
        "device": "CPU (NumPy ranks, naive communicator)", "link": jobs.job_link(),
        "gradient_bytes": gradient_bytes_of(model),
        "parameters": int(sum(p.size for p in model.params() if p.array is not None)),
        "ranks": sorted(gathered, key=lambda r: r["rank"]),
        "timer_hook": {"rank": 0, "iterations": timed, "total_ms": hook.total_time() * 1e3,
                       "rows": timer_table(hook, timed)},
        "timeline": timeline, "timeline_epoch_s": origin,
    }
    result.update(_combine(result["ranks"], result["total_batch"]))
    return result


def _worker(argv):
    """One rank of `measure`: a short ChainerMN training, every rank's phases to rank 0."""
    args = _worker_arguments(argv)
    mpi.prepare_rank("naive", gpu=False, forkserver=False)  # SerialIterator: no child processes
    import chainer
    import chainermn
    from mpi4py import MPI
    comm = chainermn.create_communicator("naive")
    training.seed_everything(args.seed)
    train, n_class = _rank_shard(args, comm)
    model = models.get_model(args.model, n_class=n_class)
    optimizer = chainermn.create_multi_node_optimizer(
        chainer.optimizers.MomentumSGD(lr=args.lr), comm)
    optimizer.setup(model)
    iterator = chainer.iterators.SerialIterator(train, args.batchsize, shuffle=True)
    updater = chainer.training.updaters.StandardUpdater(iterator, optimizer)
    rec = instrument(updater)
    hook = _timed_training(updater, args, comm)

    summary = rec.summary(args.warmup)
    timed = summary["timed_iterations"]
    images = args.batchsize * comm.size * timed
    mine = {"rank": comm.rank, **summary,
            "throughput": images / summary["total_s"] if summary["total_s"] > 0 else None,
            "per_iteration": rec.iterations,
            "nvtx": rec.nvtx is not None,
            "host": socket.gethostname(), "processor": MPI.Get_processor_name(),
            "spans": rec.timed_spans(args.warmup)}
    gathered = comm.gather_obj(mine)
    if comm.rank == 0:
        result = _worker_result(args, comm, model, gathered, hook, timed)
        Path(args.result).write_text(json.dumps(result))
    return 0


def _combine(ranks, total_batch):
    """Whole-job figures: phases averaged over ranks; throughput from the slowest rank's time."""
    names = list(dict.fromkeys(k for r in ranks for k in r["phases_s"]))
    phases = {k: statistics.fmean(r["phases_s"].get(k, 0.0) for r in ranks) for k in names}
    iteration = statistics.fmean(r["iteration_s"] for r in ranks)
    slowest = max(r["total_s"] for r in ranks)
    timed = min(r["timed_iterations"] for r in ranks)
    return {"phases_s": phases, "iteration_s": iteration,
            "throughput": total_batch * timed / slowest if slowest > 0 else None}


@contextlib.contextmanager
def cpu_fillers(count):
    """`count` processes that only spin while the block runs. With them a run on p ranks keeps as
    many processes busy as a run on more ranks: every rank gets the same share of the cores at
    every p, as one GPU per rank computes at the same speed however many ranks there are."""
    # A session each: with the kernel's autogroup scheduling every session shares the cores
    # equally, and each rank of a cluster job runs in its node's own session too.
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL,
                              start_new_session=True)
             for _ in range(max(0, int(count)))]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def busy_processes(counts, cores=None):
    """For a sweep over rank counts: the processes to keep busy at every p so that each rank's share
    of the cores stays the one of the largest run (None: the largest run fits the cores anyway)."""
    largest = max(counts)
    return largest if largest > (cores or launch.cpu_count()) else None


def measure(np=2, model="cnn", batchsize=32, iterations=20, warmup=3, dataset="synthetic",
            timeout=600, lr=0.02, seed=0, where="local", busy=None):
    """Phase breakdown of a short ChainerMN training on `np` CPU ranks (`naive`): local ranks,
    or with `where` 'cluster' (or 'auto' when one is up) a job across the nodes of the local
    cluster and its shaped link (`handson cluster up --link 1gbe`); the result's `link` says which.
    `busy`: keep that many processes busy during the run, filling up with spinning processes
    (`cpu_fillers`), so that a sweep's ranks compute at the same speed at every p; the result's
    `fillers` says how many ran.

    Returns a dict: np, model, batchsize, total_batch, gradient_bytes (L), phases_s (medians,
    averaged over ranks), iteration_s, throughput (images/s of all ranks), ranks (each rank's
    medians and every iteration's record, warm-up included at the front), timer_hook (rank 0's
    TimerHook table over the timed iterations).
    """
    for name, value, least in (("np", np, 1), ("batchsize", batchsize, 1), ("iterations", iterations, 1),
                               ("warmup", warmup, 1)):
        if not isinstance(value, int) or value < least:
            why = (" (the multi-node optimizer's first iteration broadcasts rank 0's weights "
                   "instead of updating: it is always warm-up)") if name == "warmup" else ""
            raise ValueError(f"{name} must be an integer >= {least}, not {value!r}{why}")
    if model not in models.MODELS:
        raise ValueError(f"unknown model {model!r}; choose one of {', '.join(models.MODELS)}")
    with tempfile.TemporaryDirectory(prefix="breakdown-") as tmp:
        out = Path(tmp) / "result.json"
        argv = ["-m", "handson_lib.experiments.breakdown", "--worker", "--model", model, "--batchsize", batchsize,
                "--iterations", iterations, "--warmup", warmup, "--dataset", dataset, "--lr", lr,
                "--seed", seed, "--result", out]
        fillers = max(0, (busy or 0) - np)
        with cpu_fillers(fillers):
            run = jobs.run_ranks(np, argv, timeout=timeout, where=where, name="breakdown",
                                 cwd=str(Path(__file__).resolve().parent.parent))
        if not run.ok or not out.exists():
            raise RuntimeError(f"the breakdown run on {np} rank(s) failed "
                               f"({'timed out' if run.timed_out else f'exit {run.returncode}'}):\n"
                               f"{run.tail(25)}")
        result = json.loads(out.read_text())
    result["seconds"] = run.seconds
    result["fillers"] = fillers
    return result


def load_sweep(folder):
    """results_by_np from a scaling sweep run with HANDSON_PHASES=1 (jobscripts/*/run_scaling_sweep.sh).

    Reads FOLDER/p<ranks>/phases_rank<r>.json (every rank) and throughput.json (rank 0's
    `Throughput:` figure); rank counts without phase files are left out. Where every rank's file
    carries its spans, the result has the "timeline" that `measure` gives too."""
    results = {}
    for sub in sorted(Path(folder).glob("p*")):
        if not (sub.is_dir() and sub.name[1:].isdigit()):
            continue
        files = sorted(sub.glob("phases_rank*.json")) or sorted(sub.glob("phases.json"))
        if not files:
            continue
        ranks = [json.loads(f.read_text()) for f in files]
        ranks.sort(key=lambda r: r.get("rank") or 0)
        p = int(sub.name[1:])
        result = {"np": p, "ranks": ranks, "model": None, "batchsize": None, "source": str(sub),
                  "gradient_bytes": ranks[0].get("gradient_bytes")}
        result.update(_combine(ranks, total_batch=0))
        if all(r.get("spans") for r in ranks):
            result["timeline"], result["timeline_epoch_s"] = relative_timeline(
                [{"rank": r.get("rank"), "host": r.get("host"), "spans": r["spans"]} for r in ranks])
        meter = sub / "throughput.json"
        result["throughput"] = json.loads(meter.read_text())["images_per_sec"] if meter.exists() else None
        results[p] = result
    if not results:
        raise FileNotFoundError(f"no p<ranks>/phases_rank*.json under {folder}: run the sweep with "
                                f"HANDSON_PHASES=1 (qsub -v HANDSON_PHASES=1 run_scaling_sweep.sh)")
    return results


# ------------------------------------------------------------------------------ figures, tables



def link_text(result):
    """Where the ranks' bytes went: 'one host' or the shaped link's profile and rate."""
    link = result.get("link") or {}
    if not link.get("rate_bps"):
        return "one host (shared memory, no network)"
    return f"{link['profile']} link, {link['rate_bps'] / 1e9:g} Gbit/s per node"


def _label(result):
    if result.get("model") and result.get("batchsize"):
        return f"{result['model']}, batch {result['batchsize']} per rank"
    return "training script"


def phase_figure(results_by_np, title=None):
    """Stacked bars: ms per iteration in each phase, one bar per rank count (mean over ranks)."""
    plt = pyplot()
    counts = sorted(results_by_np)
    fig, ax = plt.subplots(figsize=(1.6 * len(counts) + 4.5, 4))
    names = list(PHASES) + [OTHER]
    bottoms = [0.0] * len(counts)
    for name in names:
        values = [max(0.0, results_by_np[p]["phases_s"].get(name, 0.0)) * 1e3 for p in counts]
        ax.bar([str(p) for p in counts], values, bottom=bottoms, label=name,
               color=PHASE_COLORS.get(name), width=0.6)
        bottoms = [b + v for b, v in zip(bottoms, values)]
    for i, p in enumerate(counts):
        ax.text(i, bottoms[i], f"{results_by_np[p]['iteration_s'] * 1e3:.1f} ms", ha="center",
                va="bottom", fontsize=8)
    first = results_by_np[counts[0]]
    ax.set_xlabel("ranks (p)")
    ax.set_ylabel("ms per iteration (median)")
    ax.set_title(title or f"{_label(first)}, {link_text(first)}: time per iteration")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    return fig


def scaling_figure(results_by_np, title=None):
    """Throughput vs ranks with the linear ideal, and the efficiency (figures.scaling_plot)."""
    first = results_by_np[min(results_by_np)]
    return scaling_plot({p: r["throughput"] for p, r in results_by_np.items()},
                        title=title or f"{_label(first)}: throughput vs ranks (phase-timed runs)")


def format_phase_table(results_by_np, efficiency=None):
    """Median ms per phase and rank count, the images/s; with `efficiency` ({p: value}, e.g. the
    notebook's own) an efficiency column too."""
    names = list(PHASES) + [OTHER]
    eff = efficiency or {}
    head = (f"{'ranks':>5s} " + " ".join(f"{n:>9s}" for n in names)
            + f" {'iteration':>9s}   {'images/s':>9s}" + (f" {'efficiency':>10s}" if eff else ""))
    lines = [tr("median ms per iteration (mean over ranks)"), head]
    for p in sorted(results_by_np):
        r = results_by_np[p]
        cells = " ".join(f"{r['phases_s'].get(n, 0.0) * 1e3:9.2f}" for n in names)
        rate = f"{r['throughput']:9.1f}" if r.get("throughput") else f"{'-':>9s}"
        e = "" if not eff else f" {eff[p]:10.2f}" if eff.get(p) is not None else f" {'-':>10s}"
        lines.append(f"{p:5d} {cells} {r['iteration_s'] * 1e3:9.2f}   {rate}{e}")
    return "\n".join(lines)


def format_timer_table(result, top=10):
    hook = result["timer_hook"]
    lines = [tr("TimerHook on rank 0 of {np}, {iterations} iterations, {total:.1f} ms in functions "
                "(forward and backward; a backward's inner functions count in their own row too, so "
                "shares may add up to more than 100%):", np=result['np'], iterations=hook['iterations'],
                total=hook['total_ms']),
             f"{'function':32s} {'count':>7s} {'total ms':>10s} {'ms/iter':>9s} {'share':>7s}"]
    for row in hook["rows"][:top]:
        lines.append(f"{row['function']:32s} {row['count']:7d} {row['total_ms']:10.2f} "
                     f"{row['ms_per_iteration']:9.3f} {row['share'] * 100:6.1f}%")
    return "\n".join(lines)


def as_json(results_by_np):
    """The file `--json` writes: {"benchmark": "breakdown", "results": {"<p>": result}}."""
    return {"benchmark": "breakdown", "results": {str(p): r for p, r in results_by_np.items()}}


def from_json(saved):
    """results_by_np from what `as_json` wrote."""
    return {int(p): r for p, r in saved["results"].items()}


def report_title(saved):
    results = from_json(saved)
    return f"phase breakdown on {', '.join(map(str, sorted(results)))} rank(s), {_label(results[min(results)])}"


def report_table(saved):
    return format_phase_table(from_json(saved))


def report_figure(saved):
    return phase_figure(from_json(saved))


# ------------------------------------------------------------------------------ CLI

def add_arguments(parser):
    parser.add_argument("--np", type=int, nargs="+", default=None,
                        help="rank counts to measure, e.g. --np 1 2 4 (default: 1 2 locally, 1 2 4 "
                             "on the cluster)")
    parser.add_argument("--model", default="cnn", help="cnn, cnn-bn, resnet18 or mlp")
    parser.add_argument("--batchsize", type=int, default=32, help="minibatch per rank")
    parser.add_argument("--iterations", type=int, default=20, help="timed iterations")
    parser.add_argument("--warmup", type=int, default=3, help="iterations left out first (>= 1)")
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run (watchdog)")
    parser.add_argument("--same-cpu-share", action=argparse.BooleanOptionalAction, default=None,
                        help="when the largest --np has more ranks than this machine has cores, keep "
                             "as many processes busy in every run (spinning fillers), so that each "
                             "rank computes at the same speed at every p, as with one GPU per rank "
                             "(default: on for runs on the cluster, off for local ranks)")
    parser.add_argument("--where", choices=jobs.WHERE, default="local",
                        help="local ranks (default), jobs across the nodes of the local cluster "
                             "(`handson cluster up --link 1gbe`), or auto: the cluster when one is up")
    parser.add_argument("--top", type=int, default=10, help="rows of the TimerHook table")
    parser.add_argument("--plot", default=None, metavar="PNG",
                        help="write the stacked phase bars (and PNG_scaling.png for several --np)")
    parser.add_argument("--json", default=None, metavar="FILE", help="write every result as JSON")
    parser.add_argument("--trace", default=None, metavar="FILE.json", help="write the timeline of every "
                        "rank (largest --np) as a Chrome trace for ui.perfetto.dev / chrome://tracing")
    parser.add_argument("--timeline", default=None, metavar="PNG",
                        help="draw the timeline of every rank (largest --np)")


def sweep(counts=None, where="auto", same_cpu_share=None, print_fn=print, **settings):
    """`measure` for each rank count, saying where the ranks run: {p: result}.

    On the local cluster with a network (`where` 'cluster', or 'auto' when one is up) each run is a
    job across its nodes, by default for p = 1, 2, 4, every rank with the same share of this
    machine's cores at every p (`same_cpu_share`, default on there: `busy_processes`); elsewhere
    local ranks, by default p = 1, 2, and a note that no network is involved."""
    state = jobs.where_ranks_run(where)
    counts = tuple(counts or ((1, 2, 4) if state else (1, 2)))
    if same_cpu_share is None:
        same_cpu_share = state is not None
    busy = busy_processes(counts) if same_cpu_share else None
    if state:
        profile = state["profile"]
        print_fn(tr("ranks: jobs (qsub) across the local cluster's nodes {nodes}, linked at {gbit:g} "
                    "Gbit/s ({profile}); p = {counts}", nodes=', '.join(state['nodes']),
                    gbit=profile['rate_bps'] / 1e9, profile=profile['name'],
                    counts=', '.join(map(str, counts))))
    else:
        print_fn(tr("ranks: local processes on this machine, p = {counts}: they share memory, no network "
                    "is involved (with `handson cluster up --link 1gbe`, run by an admin as root, the same "
                    "call runs them as jobs across nodes)", counts=', '.join(map(str, counts))))
    if busy:
        print_fn(tr("same share of the cores at every p: {busy} processes busy in every run ({busy} ranks "
                    "share {cores} cores at the largest p; smaller runs get spinning fillers), so that "
                    "compute per rank does not grow with p on this machine", busy=busy,
                    cores=launch.cpu_count()))
    results = {}
    for p in counts:
        print_fn(tr("measuring {model} on {np} rank(s) ...", model=settings.get('model', 'cnn'), np=p))
        results[p] = measure(np=p, where="cluster" if state else "local", busy=busy, **settings)
    return results


def main(args):
    settings = dict(model=args.model, batchsize=args.batchsize, iterations=args.iterations,
                    warmup=args.warmup, dataset=args.dataset, timeout=args.timeout)
    print(f"{args.model}, batch {args.batchsize} per rank: {args.warmup} warm-up + {args.iterations} "
          f"timed iterations per run", flush=True)
    try:
        results = sweep(args.np, where=args.where, same_cpu_share=args.same_cpu_share,
                        print_fn=lambda text: print(text, flush=True), **settings)
    except (RuntimeError, ValueError) as err:  # jobs.JobError too
        print(f"error: {err}", file=sys.stderr)
        return 1
    for p, result in results.items():
        print()
        print(format_timer_table(result, top=args.top))
    print()
    first = results[min(results)]
    print(f"ranks: {first['device']}; between nodes: {link_text(first)}; gradient size L = "
          f"{first['gradient_bytes']:,} bytes")
    print(format_phase_table(results))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(as_json(results), indent=1))
        print(f"results: {args.json}")
    if args.plot:
        pyplot("Agg")
        plot = Path(args.plot)
        plot.parent.mkdir(parents=True, exist_ok=True)
        phase_figure(results).savefig(plot, dpi=120)
        print(f"phase breakdown: {plot}")
        if len(results) > 1 and 1 in results:
            scaling = plot.with_name(plot.stem + "_scaling" + plot.suffix)
            scaling_figure(results).savefig(scaling, dpi=120)
            print(f"scaling (throughput and efficiency vs ranks): {scaling}")
    cpu_timeline.write_outputs(results, trace=args.trace, png=args.timeline)
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv[1:]:
        sys.exit(_worker(sys.argv[1:]))
    sys.exit("run `handson profile breakdown` (this module's entry point for ranks is --worker)")
