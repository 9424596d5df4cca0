"""`handson bench allreduce`: how close the ChainerMN gradient allreduce comes to the wire.

Seed 001 measured 8-9 Gibit/s point-to-point between two nodes but only ~5 Gibit/s inside the
allreduce of ResNet-50's L = 102,228,384 gradient bytes, counting the traffic of one rank as
2L(p-1)/p. This benchmark takes the same three measurements on the same ranks in one run:

- ``chainermn``: ``comm.multi_node_mean_grad(link)`` of the ``naive`` communicator (the only one
  that runs on NumPy) on a Chainer link whose gradients fill L bytes; for a model that is the
  model itself, so one ``MPI_Allreduce`` per parameter array, as in training;
- ``mpi4py``: one ``comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)`` over a float32 buffer of L bytes;
- ``mpi4py-inplace`` (with ``--in-place``): the same with ``MPI.IN_PLACE``, as ChainerMN calls it;
- ``p2p``: ping-pong ``Send`` / ``Recv`` of L bytes between rank 0 and the first rank on another
  node (rank 1 when all share one host), bandwidth
  L / (round trip / 2): the limit the allreduce is compared with.

Conventions of nccl-tests (doc/PERFORMANCE.md): algbw = S / t and, for allreduce, busbw = the bytes
one rank sends divided by the time, so that it can be set beside the point-to-point bandwidth. The
bytes one rank sends (seed 001's 2L(p-1)/p) are the caller's `traffic_rule(nbytes, p)`: notebook 04
asks the student for that rule, so this module has none of its own; the ranks measure times and
algbw, and `add_bus_bandwidth` turns them into busbw with the rule it is given (the instructor's
`handson bench allreduce` passes handson_lib.autograder.answers'). GB/s means 1e9 bytes/s; Gibit/s (the seed's "Gibps")
means 2**30 bits/s. Warm-up iterations are excluded; each timed iteration starts after a barrier
and its time is the slowest rank's; the paths take turns, one iteration each per round. Every
iteration (warm-up too) is checked against the known sum or mean of rank-dependent values, and
the check is reported beside the timing.

Test hook: ``HANDSON_BENCH_CORRUPT_RANK=R`` makes rank R add 1000 to the first element of each
array it contributes, so that the checks can be seen to fail.

Worker mode (what ``measure`` launches under the watchdog; run by hand it prints algbw only):
``mpiexec -n P python -m handson_lib.experiments.allreduce --worker [--model M | --bytes N | --sizes S]``.
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from handson_lib.experiments import stats
from handson_lib.messages import tr
from handson_lib.runtime.models import MODELS, get_model
from handson_lib.runtime.mpi import prepare_rank
from handson_lib.runtime.phases import gradient_bytes_of
from handson_lib.sites import jobs
from handson_lib.plotting import pyplot

PATHS = ("chainermn", "mpi4py", "p2p")
#: Measured with --in-place only: nccl-tests reports in-place beside out-of-place too.
IN_PLACE_PATH = "mpi4py-inplace"
PATH_LABELS = {
    "chainermn": "ChainerMN naive multi_node_mean_grad",
    "mpi4py": "mpi4py Allreduce (one buffer)",
    IN_PLACE_PATH: "mpi4py Allreduce IN_PLACE (one buffer)",
    "p2p": "point-to-point, rank 0 <-> a rank on another node (else rank 1)",
}
DEFAULT_MODEL = "resnet50"
DEFAULT_SWEEP = "1K:64M"
#: Input of the course models' dummy forward pass (CIFAR-shaped, like --dataset synthetic).
COURSE_INPUT_SHAPE = (3, 32, 32)
CORRUPT_ENV = "HANDSON_BENCH_CORRUPT_RANK"
RTOL = 1e-6
_UNITS = {"K": 2 ** 10, "KI": 2 ** 10, "KIB": 2 ** 10, "M": 2 ** 20, "MI": 2 ** 20, "MIB": 2 ** 20,
          "G": 2 ** 30, "GI": 2 ** 30, "GIB": 2 ** 30, "B": 1, "": 1}
# Elements checked at a time: keeps the temporaries of the check small for 100 MB buffers.
_CHUNK = 1 << 20


# ----------------------------------------------------------------------------- formulas

def algbw(nbytes, seconds):
    """Algorithm bandwidth S / t in GB/s (1e9 bytes per second), as nccl-tests reports it."""
    if seconds <= 0:
        raise ValueError(f"time must be positive, got {seconds!r} s")
    return nbytes / seconds / 1e9


def gbps_to_gibitps(gbps):
    """GB/s (1e9 bytes/s) to Gibit/s (2**30 bits/s), the unit of seed 001's figures."""
    return gbps * 1e9 * 8 / 2 ** 30


def parse_size(text):
    """'1048576', '1M', '1MiB', '64K' -> bytes (binary units). Must be a positive multiple of 4
    because the buffers hold float32 gradients."""
    raw = str(text).strip()
    upper = raw.upper()
    digits = upper.rstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    unit = upper[len(digits):]
    if not digits or unit not in _UNITS:
        raise ValueError(f"cannot read the size {raw!r}: give bytes, e.g. 1048576, 64K, 1M or 1MiB")
    try:
        value = float(digits) * _UNITS[unit]
    except ValueError:
        raise ValueError(f"cannot read the size {raw!r}: give bytes, e.g. 1048576, 64K, 1M or 1MiB") \
            from None
    nbytes = int(value)
    if nbytes != value or nbytes <= 0 or nbytes % 4:
        raise ValueError(f"size {raw!r} = {value:g} bytes: need a positive whole number of float32 "
                         f"elements (a multiple of 4 bytes)")
    return nbytes


def parse_sizes(spec):
    """'1K:64M' (powers of 4 from 1 KiB to 64 MiB), '1K:64M:2' (factor 2) or '1M,4M,100M'."""
    if isinstance(spec, (list, tuple)):
        sizes = [parse_size(s) for s in spec]
    elif ":" in str(spec):
        parts = str(spec).split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"--sizes {spec!r}: write FIRST:LAST[:FACTOR], e.g. 1K:64M or 1K:64M:2")
        first, last = parse_size(parts[0]), parse_size(parts[1])
        factor = int(parts[2]) if len(parts) == 3 else 4
        if factor < 2 or last < first:
            raise ValueError(f"--sizes {spec!r}: need FIRST <= LAST and a FACTOR of at least 2")
        sizes, size = [], first
        while size <= last:
            sizes.append(size)
            size *= factor
    else:
        sizes = [parse_size(s) for s in str(spec).split(",") if s.strip()]
    if not sizes:
        raise ValueError(f"--sizes {spec!r} names no size")
    return sizes


def human_bytes(nbytes):
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.4g} {unit}"
    return f"{nbytes} B"


# ----------------------------------------------------------------------------- models

def build_gradient_link(model_name, input_shape=COURSE_INPUT_SHAPE, n_class=10):
    """The Chainer link whose parameters a training run allreduces, with every parameter
    allocated. 'resnet50' is Chainer's ResNet50Layers (1000 classes, random weights, no
    download); the course models are initialised lazily, so they see one dummy batch first."""
    import chainer
    import numpy as np
    if model_name == "resnet50":
        import chainer.links as L
        return L.ResNet50Layers(pretrained_model=None)
    _check_model(model_name)
    model = get_model(model_name, n_class=n_class)
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        model.predictor(np.zeros((1,) + tuple(input_shape), dtype=np.float32))
    return model


def _check_model(model_name):
    if model_name != "resnet50" and model_name not in MODELS:
        raise ValueError(f"unknown model {model_name!r}; choose resnet50 or one of {', '.join(MODELS)}")


# ----------------------------------------------------------------------------- checks

def check_buffer(result, expected, rtol=RTOL):
    """(ok, max_abs_error): does `result` equal `expected` element by element, to `rtol`?"""
    import numpy as np
    result = np.asarray(result).ravel()
    expected = np.asarray(expected).ravel()
    if result.shape != expected.shape:
        return False, float("inf")
    worst, ok = 0.0, True
    for start in range(0, result.size, _CHUNK):
        got = result[start:start + _CHUNK].astype(np.float64)
        want = expected[start:start + _CHUNK].astype(np.float64)
        error = np.abs(got - want)
        if not np.all(np.isfinite(got)):
            return False, float("inf")
        worst = max(worst, float(error.max(initial=0.0)))
        ok = ok and bool(np.all(error <= rtol * np.abs(want)))
    return ok, worst


def _pattern(n):
    """Known, element-dependent values (0..6): a shifted or truncated result cannot pass."""
    import numpy as np
    return (np.arange(n, dtype=np.int64) % 7).astype(np.float32)


def _contribution(base, rank, corrupt_rank, out=None):
    """Rank r contributes base + (r + 1); the test hook spoils one element of one rank."""
    import numpy as np
    out = np.add(base, np.float32(rank + 1), out=out)
    if rank == corrupt_rank and out.size:
        out.flat[0] += np.float32(1000)
    return out


def expected_sum(base, p):
    """Sum over ranks of base + (r + 1), r = 0..p-1."""
    return base * p + p * (p + 1) / 2


def expected_mean(base, p):
    return base + (p + 1) / 2


# ----------------------------------------------------------------------------- worker (inside mpiexec)

def _corrupt_rank():
    value = os.environ.get(CORRUPT_ENV, "").strip()
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
            _contribution(piece, comm.rank, corrupt, out=param.grad)

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
    return parser.parse_args(argv)


def _measure_size(comm, link, nbytes, args, corrupt, say, pair):
    """Every path at one message size; rank 0 gets the records (the others None)."""
    import numpy as np
    mpi_comm = comm.mpi_comm
    say(f"[allreduce bench] {human_bytes(nbytes)} ({nbytes} bytes) on {comm.size} rank(s): "
        f"{args.warmup} warm-up + {args.iterations} timed rounds, one iteration of each path "
        f"per round")
    # The raw MPI and P2P paths share one send and one receive buffer (memory for ResNet-50).
    base = _pattern(nbytes // 4)
    send = _contribution(base, comm.rank, corrupt)
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
        "communicator": "naive", "mpi_library": MPI.Get_library_version().strip().split("\n")[0],
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


# ----------------------------------------------------------------------------- bus bandwidth, report

def add_bus_bandwidth(result, traffic_rule):
    """Add busbw to every record of `result` (in place; also returned), with `traffic_rule(nbytes,
    p)`: the bytes one rank sends in an allreduce of nbytes over p ranks. A point-to-point record's
    traffic is its own bytes (busbw = algbw). Adds the ratios per message size too."""
    p = result["ranks"]
    for r in result["results"]:
        traffic = r["bytes"] if r["path"] == "p2p" else traffic_rule(r["bytes"], p)
        if isinstance(traffic, bool) or not isinstance(traffic, (int, float)) or traffic < 0:
            raise ValueError(f"traffic_rule({r['bytes']}, {p}) gave {traffic!r}: it must return the "
                             f"bytes one rank sends, a number >= 0")
        r["traffic_bytes"] = traffic
        r["busbw_GBps"] = algbw(traffic, r["time_s"]) if traffic else 0.0
        r["busbw_Gibps"] = gbps_to_gibitps(r["busbw_GBps"])
        r["busbw_over_link"] = busbw_over_link(r["busbw_GBps"], result)
    result["traffic_rule"] = getattr(traffic_rule, "__name__", repr(traffic_rule))
    result["units"]["busbw"] = "traffic_rule(bytes, p) / time_s for allreduce; = algbw for p2p"
    result["ratios"] = ratios(result)
    return result


def link_rate_GBps(result):
    """The rate of the link the ranks talked over, GB/s (1e9 bytes/s); None on one host."""
    rate = (result.get("link") or {}).get("rate_bps")
    return rate / 8 / 1e9 if rate else None


def link_bandwidth(result):
    """(GB/s, what it is): the bandwidth each way that bounds an allreduce of `result`'s ranks. The
    shaped link's rate where the ranks ran on the local cluster with a network; elsewhere the
    point-to-point bandwidth the benchmark measured between its two ranks (the 'link' of ranks on
    one host is its memory)."""
    rate = link_rate_GBps(result)
    if rate:
        return rate, f"the rate of the {result['link']['profile']} link between the nodes"
    p2p = next((r for r in result["results"] if r["path"] == "p2p"), None)
    if p2p is None:
        raise ValueError("no link and no point-to-point measurement in this result (one rank?)")
    return p2p["algbw_GBps"], "the point-to-point bandwidth measured between the two ranks (no network)"


def busbw_over_link(busbw_GBps, result):
    """Bus bandwidth as a fraction of the link's rate: the physical limit of one rank's traffic."""
    return stats.ratio_or_none(busbw_GBps, link_rate_GBps(result))


def _has_busbw(result):
    return all("busbw_GBps" in r for r in result["results"])


def ratios(result):
    """Per message size: ChainerMN busbw / raw MPI busbw, and each busbw / P2P bandwidth."""
    by_size = {}
    for r in result["results"]:
        by_size.setdefault(r["bytes"], {})[r["path"]] = r["busbw_GBps"]

    def ratio(bw, a, b):
        return stats.ratio_or_none(bw.get(a), bw.get(b))

    return [{"bytes": size, "chainermn_over_mpi4py": ratio(bw, "chainermn", "mpi4py"),
             "chainermn_over_p2p": ratio(bw, "chainermn", "p2p"),
             "mpi4py_over_p2p": ratio(bw, "mpi4py", "p2p"),
             "chainermn_over_mpi4py_inplace": ratio(bw, "chainermn", IN_PLACE_PATH)}
            for size, bw in sorted(by_size.items())]


def report_title(result):
    return f"allreduce on {result['ranks']} ranks ({result.get('model') or 'sizes'})"


def _fmt_ratio(value):
    return "n/a" if value is None else f"{value:.2f}"


def format_table(result):
    """The nccl-tests-like table, then the ratios, as one string (its prose in the reader's
    language, HANDSON_LANG; the column headers and numbers as they are)."""
    hosts = result.get("hosts") or []
    lines = [tr("allreduce benchmark: {ranks} rank(s) on {n_hosts} host(s) ({hosts}), communicator "
                "{communicator}, {iterations} timed iterations after {warmup} warm-up",
                ranks=result['ranks'], n_hosts=len(hosts), hosts=', '.join(hosts),
                communicator=result.get('communicator', 'naive'), iterations=result['iterations'],
                warmup=result['warmup'])]
    bus = _has_busbw(result)
    if result.get("model"):
        traffic = next((r["traffic_bytes"] for r in result["results"] if r["path"] != "p2p"), None) \
            if bus else None
        if traffic is not None:
            lines.append(tr("gradients of {model}: L = {bytes:,} bytes ({size}); allreduce traffic per "
                            "rank = {traffic:,.0f} bytes", model=result['model'], bytes=result['bytes'],
                            size=human_bytes(result['bytes']), traffic=traffic))
        else:
            lines.append(tr("gradients of {model}: L = {bytes:,} bytes ({size})", model=result['model'],
                            bytes=result['bytes'], size=human_bytes(result['bytes'])))
    link = result.get("link") or {}
    if link.get("rate_bps"):
        lines.append(tr("link between nodes: {profile} ({note}), shaped to {gbit:g} Gbit/s = {rate:.3f} "
                        "GB/s each way per node; busbw / link = the share of that limit the path reached",
                        profile=link['profile'], note=link.get('note'), gbit=link['rate_bps'] / 1e9,
                        rate=link_rate_GBps(result)))
    if len(hosts) == 1:
        lines.append(tr("all ranks share one host: the bytes move through shared memory, not a network"))
    load, load_end = result.get("load_average"), result.get("load_average_end")
    if load and load_end:
        lines.append(tr("load average {start:.2f} at the start, {end:.2f} at the end, on {cpus} CPU(s): a "
                        "load above the CPU count means other processes shared them and the times are "
                        "noisy", start=load[0], end=load_end[0], cpus=result.get('cpu_count')))
    elif load:
        lines.append(tr("load average {start:.2f} at the start, on {cpus} CPU(s): a load above the CPU "
                        "count means other processes shared them and the times are noisy",
                        start=load[0], cpus=result.get('cpu_count')))
    header = (f"{'path':14s} {'bytes':>12s} {'calls':>5s} {'iters':>5s} {'median ms':>10s} "
              f"{'min ms':>9s} {'max ms':>9s} {'algbw GB/s':>10s}"
              + (f" {'busbw GB/s':>10s} {'busbw Gibit/s':>13s}" if bus else "")
              + (f" {'busbw/link':>10s}" if bus and link_rate_GBps(result) else "") + f" {'correct':>7s}")
    lines += [header, "-" * len(header)]
    for r in result["results"]:
        lines.append(
            f"{r['path']:14s} {r['bytes']:12d} {r['calls']:5d} {r['iterations']:5d} "
            f"{r['time_s'] * 1e3:10.3f} {r['min_s'] * 1e3:9.3f} {r['max_s'] * 1e3:9.3f} "
            f"{r['algbw_GBps']:10.3f}"
            + (f" {r['busbw_GBps']:10.3f} {r['busbw_Gibps']:13.3f}" if bus else "")
            + (f" {_fmt_ratio(r.get('busbw_over_link')):>10s}" if bus and link_rate_GBps(result) else "")
            + f" {'yes' if r['correct'] else 'NO':>7s}")
    pair = result.get("p2p_pair") or [0, 1]
    if bus:
        lines.append(tr("point to point between ranks {first} and {second}: busbw = algbw = bytes / "
                        "(round trip / 2); calls = MPI_Allreduce calls per iteration (ChainerMN: one per "
                        "parameter array)", first=pair[0], second=pair[1]))
    else:
        lines.append(tr("no busbw: measure(..., traffic_rule=...) adds it; calls = MPI_Allreduce calls per "
                        "iteration (ChainerMN: one per parameter array)"))
    for row in result.get("ratios") or (ratios(result) if bus else []):
        fields = dict(size=human_bytes(row['bytes']), mpi=_fmt_ratio(row['chainermn_over_mpi4py']),
                      chainermn_p2p=_fmt_ratio(row['chainermn_over_p2p']),
                      mpi_p2p=_fmt_ratio(row['mpi4py_over_p2p']))
        if row.get("chainermn_over_mpi4py_inplace") is not None:
            lines.append(tr("{size:>10s}: ChainerMN busbw / raw MPI busbw = {mpi}; busbw / P2P: ChainerMN "
                            "{chainermn_p2p}, raw MPI {mpi_p2p}; ChainerMN / raw MPI IN_PLACE = {inplace}",
                            inplace=_fmt_ratio(row['chainermn_over_mpi4py_inplace']), **fields))
        else:
            lines.append(tr("{size:>10s}: ChainerMN busbw / raw MPI busbw = {mpi}; busbw / P2P: ChainerMN "
                            "{chainermn_p2p}, raw MPI {mpi_p2p}", **fields))
    for r in result["results"]:
        if not r["correct"]:
            lines.append(tr("ERROR: {path} at {bytes} bytes gave a wrong result in {failed} of {checks} "
                            "checks (max error {error:g})", path=r['path'], bytes=r['bytes'],
                            failed=r['failed_checks'], checks=r['checks'], error=r['max_error']))
    return "\n".join(lines)


def bandwidth_figure(result, ax=None):
    """Bus bandwidth vs message size for the ChainerMN and raw MPI paths, with the P2P line
    (algbw where the result has no busbw: `add_bus_bandwidth`)."""
    plt = pyplot()
    kind = "busbw" if _has_busbw(result) else "algbw"
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
    else:
        fig = ax.figure
    styles = {"chainermn": {"marker": "o", "linestyle": "-", "color": "#4C72B0"},
              "mpi4py": {"marker": "s", "linestyle": "-", "color": "#DD8452"},
              IN_PLACE_PATH: {"marker": "D", "linestyle": ":", "color": "#55A868"},
              "p2p": {"marker": "^", "linestyle": "--", "color": "black"}}
    for path in (*PATHS[:2], IN_PLACE_PATH, PATHS[2]):
        points = sorted((r["bytes"], r[f"{kind}_GBps"], r["correct"])
                        for r in result["results"] if r["path"] == path)
        if not points:
            continue
        sizes = [s for s, _, _ in points]
        values = [v for _, v, _ in points]
        name = PATH_LABELS[path] + (" (bandwidth)" if path == "p2p" else f" ({kind})")
        if path == "p2p" and len(sizes) == 1:
            # One message size: the P2P limit as a line across, to read the points against.
            ax.axhline(values[0], linestyle="--", color="black", label=name)
        else:
            ax.plot(sizes, values, label=name, **styles[path])
        wrong = [(s, v) for s, v, ok in points if not ok]
        if wrong:
            ax.plot(*zip(*wrong), "x", color="red", markersize=12, label=f"{path}: WRONG result")
    rate = link_rate_GBps(result)
    if rate:
        ax.axhline(rate, linestyle=":", color="#C44E52", linewidth=2,
                   label=f"link rate: {result['link']['profile']} ({rate:.3g} GB/s each way)")
    ax.set_xscale("log", base=2)
    sizes = sorted({r["bytes"] for r in result["results"]})
    if len(sizes) <= 12:
        ax.set_xticks(sizes, [human_bytes(s).replace(".0 ", " ") for s in sizes], fontsize=8)
        ax.minorticks_off()
    ax.set_xlabel("message size")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("bandwidth [GB/s]")
    ax.secondary_yaxis("right", functions=(gbps_to_gibitps, lambda g: g * 2 ** 30 / 8e9)) \
        .set_ylabel("[Gibit/s]")
    title = (f"allreduce busbw = traffic per rank / time, {result['ranks']} ranks" if kind == "busbw"
             else f"allreduce algbw = bytes / time, {result['ranks']} ranks")
    if result.get("model"):
        title += f", {result['model']} gradients"
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- launcher

def _size_argument(nbytes=None, model=None, sizes=None):
    chosen = [name for name, value in (("nbytes", nbytes), ("model", model), ("sizes", sizes))
              if value is not None]
    if len(chosen) > 1:
        raise ValueError(f"give only one of model, bytes or sizes (got {', '.join(chosen)})")
    if sizes is not None:
        parsed = parse_sizes(sizes)
        return ["--sizes", ",".join(map(str, parsed))]
    if nbytes is not None:
        return ["--bytes", str(parse_size(nbytes))]
    model = model or DEFAULT_MODEL
    _check_model(model)
    return ["--model", model]


def measure(np=2, nbytes=None, model=None, sizes=None, iterations=10, warmup=3, timeout=600,
            echo=False, in_place=False, traffic_rule=None, where="local"):
    """Run the three paths on `np` ranks; returns the result dict (keys: ranks, hosts, link,
    model, bytes, sizes, results, correct, ...).

    `where`: 'local' (ranks on this machine under the watchdog), 'cluster' (a job across the
    nodes of the local cluster brought up with `handson cluster up --link PROFILE`) or 'auto' (the
    cluster when one is up); the result's `link` says which link the bytes crossed.
    Exactly one of `nbytes` (int or '1M'), `model` ('resnet50' or a course model) or `sizes`
    (list or '1K:64M') may be given; the default is ResNet-50's gradients (seed 001).
    `in_place=True` adds the MPI.IN_PLACE allreduce (path 'mpi4py-inplace').
    `traffic_rule(nbytes, p)`: the bytes one rank sends in an allreduce (yours from notebook 04);
    given, every record gets its busbw and the result its `ratios` (`add_bus_bandwidth`)."""
    if int(np) < 1:
        raise ValueError(f"np must be at least 1, got {np!r}")
    if int(iterations) < 1 or int(warmup) < 0:
        raise ValueError(f"need iterations >= 1 and warmup >= 0, got {iterations!r} and {warmup!r}")
    size_args = _size_argument(nbytes, model, sizes)
    with tempfile.TemporaryDirectory(prefix="allreduce_bench_") as tmp:
        result_file = Path(tmp, "result.json")
        argv = ["-m", "handson_lib.experiments.allreduce", "--worker", *size_args,
                "--iterations", str(int(iterations)), "--warmup", str(int(warmup)),
                *(["--in-place"] if in_place else []),
                "--result-file", str(result_file)]
        run = jobs.run_ranks(int(np), argv, timeout=timeout, where=where, name="allreduce", echo=echo)
        if not run.ok or not result_file.exists():
            why = "timed out" if run.timed_out else f"exit status {run.returncode}"
            raise RuntimeError(f"allreduce benchmark on {np} rank(s) failed ({why}):\n{run.tail(30)}")
        result = json.loads(result_file.read_text())
    return add_bus_bandwidth(result, traffic_rule) if traffic_rule is not None else result


def add_arguments(parser):
    parser.add_argument("--np", type=int, default=2, help="MPI ranks (default 2)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--model", default=None,
                      help="message size = the model's gradient bytes: resnet50 (seed 001's "
                           "L = 102,228,384 bytes; the default) or a course model: cnn, cnn-bn, "
                           "resnet18, mlp")
    what.add_argument("--bytes", default=None, help="message size in bytes (1048576, 64K, 1M, ...)")
    what.add_argument("--sizes", nargs="?", const=DEFAULT_SWEEP, default=None,
                      help=f"sweep message sizes: FIRST:LAST[:FACTOR] or a comma list "
                           f"(alone: {DEFAULT_SWEEP}, powers of 4)")
    parser.add_argument("--in-place", action="store_true",
                        help="also time the raw MPI allreduce with MPI.IN_PLACE (as ChainerMN calls it)")
    parser.add_argument("--iterations", type=int, default=10, help="timed iterations per path")
    parser.add_argument("--warmup", type=int, default=3, help="untimed iterations first")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds before the watchdog stops the run")
    parser.add_argument("--where", choices=jobs.WHERE, default="local",
                        help="local ranks (default), a job across the nodes of the local cluster "
                             "(`handson cluster up --link 1gbe`), or auto: the cluster when one is up")
    parser.add_argument("--plot", default=None, metavar="PNG",
                        help="write the bandwidth figure (busbw per path and size, the link's rate)")
    parser.add_argument("--out", default="results/bench", help="folder for allreduce_<what>_np{P}.json ('' = none)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of the table")


def run_command(args, traffic_rule):
    """`handson bench allreduce` with the given traffic rule (the instructor's command passes its
    own): the table or JSON, the file under --out; exit status 1 on a wrong allreduce result."""
    try:
        result = measure(np=args.np, nbytes=args.bytes, model=args.model, sizes=args.sizes,
                         iterations=args.iterations, warmup=args.warmup, timeout=args.timeout,
                         echo=not args.json, in_place=args.in_place, traffic_rule=traffic_rule,
                         where=args.where)
    except ValueError as error:
        print(f"handson bench allreduce: {error}", file=sys.stderr)
        return 2
    except RuntimeError as error:  # jobs.JobError too: no cluster, a refused job
        print(f"handson bench allreduce: {error}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_table(result))
    if args.out:
        what = args.model or ("sweep" if args.sizes else f"{args.bytes}B" if args.bytes else "resnet50")
        path = Path(args.out, f"allreduce_{what}_np{result['ranks']}.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2))
        if not args.json:
            print(f"JSON written to {path}")
    if args.plot:
        pyplot("Agg")
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        bandwidth_figure(result).savefig(args.plot, dpi=120)
        if not args.json:
            print(f"figure written to {args.plot}")
    if not result["correct"]:
        wrong = [f"{r['path']} ({r['bytes']} bytes)" for r in result["results"] if not r["correct"]]
        print(f"ERROR: wrong allreduce result: {', '.join(wrong)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run_worker())
