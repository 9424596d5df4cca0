"""The ChainerMN options of many workers tried on MPI ranks (`worker`): Chainer's answers to the
pure_nccl-only options, a short pure_nccl training, multi-node batch normalization; their
results read back and printed."""

import json
import unicodedata

from handson_lib import launch
from handson_lib.messages import tr
from handson_lib.experiments.large_batch.worker import RESULT_TAG

def _parse(mpi_result, what):
    for line in mpi_result.output.splitlines():
        if RESULT_TAG in line:
            return json.loads(line.split(RESULT_TAG, 1)[1])
    raise RuntimeError(f"{what} gave no result (exit code {mpi_result.returncode}):\n"
                       f"{mpi_result.tail(30)}")


def try_gpu_options(timeout=120):
    """Try FP16 allreduce and double buffering on this host (one MPI rank); Chainer's answers.

    Returns ``{"attempts": [{"call", "ok", "error"}], "gpus", "no_gpu_reason"}``: on a CPU host the
    pure_nccl calls fail with Chainer's own error, which is the demonstration."""
    result = launch.run_mpi(1, ["-m", "handson_lib.experiments.large_batch", "--probe-gpu-options"], timeout=timeout)
    return _parse(result, "the pure_nccl option probe")


def print_gpu_options(probe, print_fn=print):
    for attempt in probe["attempts"]:
        print_fn(f"{attempt['call']}\n    -> {tr('works here') if attempt['ok'] else attempt['error']}")
    if not probe["gpus"]:
        print_fn(tr("(no GPU on this host: {reason})", reason=probe["no_gpu_reason"]))


def run_gpu_options(ranks=1, iterations=30, timeout=600):
    """Train a few iterations with pure_nccl, FP16 allreduce and double buffering (GPU hosts)."""
    result = launch.run_mpi(ranks, ["-m", "handson_lib.experiments.large_batch", "--gpu-train",
                                 "--iterations", str(iterations)], timeout=timeout)
    return _parse(result, "the pure_nccl FP16 / double-buffering run")


def bn_compare(ranks=2, local_batch=4, channels=3, seed=0, timeout=120):
    """MultiNodeBatchNormalization vs local BatchNormalization on ``ranks`` local MPI ranks.

    Returns the statistics each rank's layers normalized with (``ranks[i]["local_bn"]``,
    ``["multi_node_bn"]``, each ``{"mean": [...], "var": [...]}`` per channel), the plain NumPy
    statistics of its own rows (``own_rows``) and of the whole batch (``whole_batch``), and those of
    one process running ``L.BatchNormalization`` on the concatenated batch (``single_process``)."""
    if ranks < 2:
        raise ValueError("the comparison needs at least 2 ranks")
    result = launch.run_mpi(ranks, ["-m", "handson_lib.experiments.large_batch", "--bn-compare",
                                 "--local-batch", str(local_batch), "--channels", str(channels),
                                 "--seed", str(seed)], timeout=timeout)
    return _parse(result, "the batch-normalization comparison")


def print_bn_compare(result, channel=0, print_fn=print):
    """One table row per rank: the mean / variance each BN used for one channel."""
    print_fn(tr("channel {channel}; {ranks} ranks x {rows} rows", channel=channel, ranks=len(result["ranks"]),
                rows=result["local_batch"]))
    print_fn(f"{'':34s} {'mean':>9s} {'var':>9s}")
    for row in result["ranks"]:
        for key, label in (("local_bn", "BatchNormalization"),
                           ("multi_node_bn", "MultiNodeBatchNormalization")):
            stats = row[key]
            print_fn(f"{_padded(tr('rank {rank}', rank=row['rank']) + ' ' + label, 34)} "
                     f"{stats['mean'][channel]:9.4f} {stats['var'][channel]:9.4f}")
    stats = result["single_process"]
    print_fn(f"{_padded(tr('1 process, the whole batch'), 34)} {stats['mean'][channel]:9.4f} "
             f"{stats['var'][channel]:9.4f}")


def _padded(text, width):
    """`text` padded to `width` terminal columns (a Japanese character takes two)."""
    return text + " " * max(width - sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text), 0)
