"""Inside `mpiexec -n P python -m handson_lib.experiments.allreduce --worker`: every path timed at
every size on every rank, the checks of each iteration, and rank 0's result (JSON, or the table
when run by hand)."""

import argparse
import json
import os
from pathlib import Path

from handson_lib.experiments import stats
from handson_lib.experiments.allreduce.buffers import (build_gradient_link, check_buffer, contribution,
                                                       expected_mean, expected_sum, pattern)
from handson_lib.experiments.allreduce.report import format_table
from handson_lib.experiments.allreduce.units import (DEFAULT_MODEL, IN_PLACE_PATH, PATH_LABELS, algbw,
                                                     gbps_to_gibitps, human_bytes, parse_size, parse_sizes)
from handson_lib import settings
from handson_lib.runtime.mpi import prepare_rank
from handson_lib.runtime.phases import gradient_bytes_of
from handson_lib.sites import jobs

CORRUPT_ENV = settings.variable("bench_corrupt_rank")


def _corrupt_rank():
    value = (settings.current().bench_corrupt_rank or "").strip()
    if value and not value.isdigit():
        raise ValueError(f"{CORRUPT_ENV}={value!r}: give a rank number (test hook)")
    return int(value) if value else None


def _flat_link(nbytes):
    """A link with one float32 parameter of `nbytes`: the ChainerMN path for a bare size."""
    import chainer
    import numpy as np

    link = chainer.Link()
    with link.init_scope():
        link.gradients = chainer.Parameter(np.zeros(nbytes // 4, dtype=np.float32))
    return link


class _Path:
    """One measured operation: `prepare` (untimed), `operate` (timed), `check` (untimed).
    `halve` marks a round trip whose one-way time is half; `active` is False on ranks that
    take no part (P2P beyond its pair of ranks)."""

    def __init__(self, name, nbytes, calls, prepare, operate, check, halve=False, active=True):
        self.name, self.nbytes, self.calls = name, nbytes, calls
        self.prepare, self.operate, self.check = prepare, operate, check
        self.halve, self.active = halve, active
        self.times, self.oks, self.worst = [], [], 0.0


def _chainermn_path(comm, link, base, corrupt):
    import numpy as np
    params = [param for _, param in sorted(link.namedparams())]
    assert sum(p.size for p in params) == base.size, "the link and the buffers differ in size"
    offsets = np.cumsum([0] + [p.size for p in params])
    for param in params:
        param.grad = np.empty_like(param.data)

    def prepare():
        for param, start in zip(params, offsets):
            piece = base[start:start + param.size].reshape(param.shape)
            contribution(piece, comm.rank, corrupt, out=param.grad)

    def check():
        ok, worst = True, 0.0
        for param, start in zip(params, offsets):
            good, error = check_buffer(param.grad, expected_mean(base[start:start + param.size],
                                                                 comm.size))
            ok, worst = ok and good, max(worst, error)
        return ok, worst

    return _Path("chainermn", base.size * 4, len(params), prepare,
                 lambda: comm.multi_node_mean_grad(link), check)


def _mpi4py_path(mpi_comm, base, send, recv):
    import numpy as np
    from mpi4py import MPI
    want = expected_sum(base, mpi_comm.size)
    return _Path("mpi4py", base.size * 4, 1, lambda: recv.fill(np.nan),
                 lambda: mpi_comm.Allreduce(send, recv, op=MPI.SUM),
                 lambda: check_buffer(recv, want))


def _in_place_path(mpi_comm, base, send, recv):
    import numpy as np
    from mpi4py import MPI
    want = expected_sum(base, mpi_comm.size)
    return _Path(IN_PLACE_PATH, base.size * 4, 1, lambda: np.copyto(recv, send),
                 lambda: mpi_comm.Allreduce(MPI.IN_PLACE, recv, op=MPI.SUM),
                 lambda: check_buffer(recv, want))


def p2p_partner(hosts):
    """Rank 0's partner in the ping-pong: the first rank on another node, so that the bytes cross
    the network where there is one; rank 1 when every rank shares one host."""
    return next((rank for rank, host in enumerate(hosts) if host != hosts[0]), 1)


def _p2p_path(mpi_comm, base, send, recv, pair):
    """Ping-pong between the two ranks of `pair` (rank 0 first); each checks what arrived."""
    import numpy as np
    rank = mpi_comm.rank
    first, second = pair
    partner = {first: second, second: first}.get(rank)
    want = base + np.float32(partner + 1) if partner is not None else None

    def operate():
        if rank == first:
            mpi_comm.Send(send, dest=second, tag=7)
            mpi_comm.Recv(recv, source=second, tag=8)
        elif rank == second:
            mpi_comm.Recv(recv, source=first, tag=7)
            mpi_comm.Send(send, dest=first, tag=8)

    return _Path("p2p", base.size * 4, 1, lambda: recv.fill(np.nan), operate,
                 lambda: check_buffer(recv, want), halve=True, active=partner is not None)


def _run_rounds(mpi_comm, paths, iterations, warmup):
    """Each round runs every path once (A B C A B C ...), so that a slow spell of a shared
    machine hits all of them alike; the first `warmup` rounds are checked but not timed."""
    from mpi4py import MPI
    for i in range(warmup + iterations):
        for path in paths:
            path.prepare()
            mpi_comm.Barrier()
            start = MPI.Wtime()
            path.operate()
            elapsed = MPI.Wtime() - start
            if not path.active:
                continue
            ok, error = path.check()
            path.oks.append(ok)
            path.worst = max(path.worst, error)
            if i >= warmup:
                path.times.append(elapsed / 2 if path.halve else elapsed)


def _record(path, nbytes, times, oks, worst, iterations, warmup, calls=1):
    spread = stats.spread_summary(times)
    alg = algbw(nbytes, spread["median"])
    return {
        "path": path, "label": PATH_LABELS[path], "bytes": nbytes, "iterations": iterations,
        "warmup": warmup, "calls": calls,
        "time_s": spread["median"], "times_s": times, "min_s": spread["min"], "max_s": spread["max"],
        "algbw_GBps": alg, "algbw_Gibps": gbps_to_gibitps(alg),
        "correct": all(oks), "failed_checks": sum(not ok for ok in oks), "checks": len(oks),
        "max_error": worst,
    }


def _gather_path(mpi_comm, path, iterations, warmup):
    """Rank 0: per iteration the slowest active rank's time; the checks of every rank."""
    gathered = mpi_comm.gather((path.times, path.oks, path.worst), root=0)
    if mpi_comm.rank != 0:
        return None
    timed = [g[0] for g in gathered if g[0]]
    slowest = [max(column) for column in zip(*timed)]
    all_oks = [ok for g in gathered for ok in g[1]]
    return _record(path.name, path.nbytes, slowest, all_oks,
                   max(g[2] for g in gathered), iterations, warmup, path.calls)


def _worker_arguments(argv):
    parser = argparse.ArgumentParser(prog="python -m handson_lib.experiments.allreduce")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--model", default=None)
    parser.add_argument("--bytes", default=None)
    parser.add_argument("--sizes", default=None)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--in-place", action="store_true")
    parser.add_argument("--result-file", default=None)
    parser.add_argument("--algorithm", default="default")   # as the launcher chose it (launcher.ALGORITHMS)
    return parser.parse_args(argv)



def _measure_size(comm, link, nbytes, args, corrupt, say, pair):
    """Every path at one message size; rank 0 gets the records (the others None)."""
    import numpy as np
    mpi_comm = comm.mpi_comm
    say(f"[allreduce bench] {human_bytes(nbytes)} ({nbytes} bytes) on {comm.size} rank(s): "
        f"{args.warmup} warm-up + {args.iterations} timed rounds, one iteration of each path "
        f"per round")
    # The raw MPI and P2P paths share one send and one receive buffer (memory for ResNet-50).
    base = pattern(nbytes // 4)
    send = contribution(base, comm.rank, corrupt)
    recv = np.empty_like(send)
    paths = [_chainermn_path(comm, link, base, corrupt), _mpi4py_path(mpi_comm, base, send, recv)]
    if args.in_place:
        paths.append(_in_place_path(mpi_comm, base, send, recv))
    if comm.size >= 2:
        paths.append(_p2p_path(mpi_comm, base, send, recv, pair))
    else:
        say("[allreduce bench] one rank: no point-to-point partner, P2P skipped")
    _run_rounds(mpi_comm, paths, args.iterations, args.warmup)
    return [_gather_path(mpi_comm, path, args.iterations, args.warmup) for path in paths]


def _worker_result(args, comm, hosts, sizes, load_at_start, corrupt, results):
    """Rank 0's JSON-ready result: times and algbw per path and size (busbw: `add_bus_bandwidth`)."""
    from mpi4py import MPI
    return {
        "benchmark": "allreduce", "ranks": comm.size, "hosts": sorted(set(hosts)),
        "model": None if (args.sizes or args.bytes) else (args.model or DEFAULT_MODEL),
        "bytes": None if args.sizes else sizes[0],
        "sizes": sizes if args.sizes else None,
        "iterations": args.iterations, "warmup": args.warmup,
        "communicator": "naive", "algorithm": args.algorithm,
        "mpi_library": MPI.Get_library_version().strip().split("\n")[0],
        "load_average": load_at_start, "load_average_end": list(os.getloadavg()),
        "cpu_count": os.cpu_count(),
        "link": jobs.job_link(),
        "corrupt_rank": corrupt,
        "units": {"GBps": "1e9 bytes/s", "Gibps": "2**30 bits/s",
                  "time_s": "median over timed iterations of the slowest rank's time; p2p: "
                            "round trip / 2 (slower of its two ranks, p2p_pair)"},
        "results": results,
        "correct": all(r["correct"] for r in results),
    }


def run_worker(argv=None):
    """Inside `mpiexec -n P`: measure every path, rank 0 writes JSON (or prints the table)."""
    args = _worker_arguments(argv)
    prepare_rank("naive", gpu=False)
    import chainermn
    comm = chainermn.create_communicator("naive")
    corrupt = _corrupt_rank()

    def say(text):
        if comm.rank == 0:
            print(text, flush=True)

    if args.sizes or args.bytes:
        sizes = parse_sizes(args.sizes) if args.sizes else [parse_size(args.bytes)]
        model_link = None
    else:
        model_link = build_gradient_link(args.model or DEFAULT_MODEL)
        sizes = [gradient_bytes_of(model_link)]

    hosts = comm.mpi_comm.allgather(_processor_name())
    pair = (0, p2p_partner(hosts))
    load_at_start = list(os.getloadavg())
    results = []
    for nbytes in sizes:
        link = model_link if model_link is not None else _flat_link(nbytes)
        results += _measure_size(comm, link, nbytes, args, corrupt, say, pair)
    if comm.rank != 0:
        return 0
    result = _worker_result(args, comm, hosts, sizes, load_at_start, corrupt, results)
    result["p2p_pair"] = list(pair)
    if args.result_file:
        Path(args.result_file).write_text(json.dumps(result, indent=2))
        return 0
    print(format_table(result), flush=True)
    # Run by hand under a site's mpiexec: a wrong result fails the job.
    return 0 if result["correct"] else 1


def _processor_name():
    from mpi4py import MPI
    return MPI.Get_processor_name()
