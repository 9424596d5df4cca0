"""One rank of `measure` (`python -m handson_lib.experiments.breakdown --worker` under mpiexec): a
short ChainerMN training on the `naive` communicator with every phase timed, a TimerHook on rank
0, and rank 0's result of the whole job written as JSON."""

import argparse
import json
import socket
import statistics
from pathlib import Path

from handson_lib import data
from handson_lib.runtime import models, mpi, training
from handson_lib.runtime.phases import gradient_bytes_of, instrument, relative_timeline
from handson_lib.sites import jobs

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
    result.update(combine_ranks(result["ranks"], result["total_batch"]))
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


def combine_ranks(ranks, total_batch):
    """Whole-job figures: phases averaged over ranks; throughput from the slowest rank's time."""
    names = list(dict.fromkeys(k for r in ranks for k in r["phases_s"]))
    phases = {k: statistics.fmean(r["phases_s"].get(k, 0.0) for r in ranks) for k in names}
    iteration = statistics.fmean(r["iteration_s"] for r in ranks)
    slowest = max(r["total_s"] for r in ranks)
    timed = min(r["timed_iterations"] for r in ranks)
    return {"phases_s": phases, "iteration_s": iteration,
            "throughput": total_batch * timed / slowest if slowest > 0 else None}
