"""What runs inside `mpiexec ... python -m handson_lib.experiments.large_batch`: the pure_nccl-only
options tried (and trained with on GPU hosts), and multi-node batch normalization against local;
rank 0 prints one tagged JSON line that `mpi_runs` reads back."""

import json

from handson_lib import data
from handson_lib.experiments.large_batch.train import make_model
from handson_lib.runtime import devices
from handson_lib.runtime.mpi import prepare_rank, start_multi_node

#: What each option needs (Chainer 7.8.1 source: create_communicator, create_multi_node_optimizer).
GPU_OPTIONS = (
    ("create_communicator('pure_nccl', allreduce_grad_dtype='float16')",
     ("FP16 allreduce: gradients are cast to FP16, averaged with NCCL, cast back: half the bytes "
      "on the wire. Needs the pure_nccl communicator, so CuPy, NCCL 2 and one GPU per rank.")),
    ("create_communicator('naive', allreduce_grad_dtype='float16')",
     ("The same option on the CPU communicator: every communicator but pure_nccl refuses it "
      "(MPI has no FP16 sum).")),
    ("create_multi_node_optimizer(optimizer, naive_comm, double_buffering=True)",
     ("Double buffering: the allreduce of iteration t overlaps the forward/backward of t+1, and "
      "each update uses the gradients of the previous iteration (1-step stale). Needs pure_nccl "
      "and a separate CUDA stream.")),
)


RESULT_TAG = "LARGE-BATCH-RESULT "


def _emit(comm, payload):
    if comm is None or comm.rank == 0:
        print(RESULT_TAG + json.dumps(payload), flush=True)


def _error_text(exc):
    return f"{type(exc).__name__}: {exc}"


def _probe_worker():
    """Try the pure_nccl-only options here and report what Chainer answers (one rank)."""
    prepare_rank("naive", gpu=False, forkserver=False)
    import chainer
    import chainermn
    import numpy as np

    comm = chainermn.create_communicator("naive")
    attempts = []

    def attempt(call, action):
        try:
            made = action()
        except Exception as exc:  # noqa: BLE001 - the point is to show Chainer's own message
            attempts.append({"call": call, "ok": False, "error": _error_text(exc)})
            return None
        attempts.append({"call": call, "ok": True, "error": None})
        return made

    nccl_comm = attempt(GPU_OPTIONS[0][0], lambda: chainermn.create_communicator(
        "pure_nccl", allreduce_grad_dtype=np.float16))
    attempt(GPU_OPTIONS[1][0], lambda: chainermn.create_communicator(
        "naive", allreduce_grad_dtype=np.float16))
    model = chainer.links.Linear(3, 2)
    attempt(GPU_OPTIONS[2][0], lambda: chainermn.create_multi_node_optimizer(
        chainer.optimizers.MomentumSGD().setup(model), comm, double_buffering=True))
    if nccl_comm is not None:
        attempt("create_multi_node_optimizer(optimizer, pure_nccl_comm, double_buffering=True)",
                lambda: chainermn.create_multi_node_optimizer(
                    chainer.optimizers.MomentumSGD().setup(chainer.links.Linear(3, 2)), nccl_comm,
                    double_buffering=True))
    gpus, no_gpu_reason = devices.gpu_count()
    _emit(comm, {"attempts": attempts, "gpus": gpus, "no_gpu_reason": no_gpu_reason})


def _gpu_train_worker(iterations=30, batch=64):
    """FP16 allreduce + double buffering for real: pure_nccl, one GPU per rank (GPU hosts only)."""
    prepare_rank("pure_nccl", gpu=True, forkserver=False)
    import chainer
    import chainermn
    import numpy as np

    comm = chainermn.create_communicator("pure_nccl", allreduce_grad_dtype=np.float16)
    device = comm.intra_rank
    chainer.cuda.get_device_from_id(device).use()
    train, _, _ = data.get_dataset("digits", announce=False)
    train = chainermn.scatter_dataset(train if comm.rank == 0 else None, comm, shuffle=True, seed=0)
    model = make_model("mlp", 10, 100)
    model.to_gpu(device)
    optimizer = chainermn.create_multi_node_optimizer(
        chainer.optimizers.MomentumSGD(lr=0.05), comm, double_buffering=True)
    optimizer.setup(model)
    iterator = chainer.iterators.SerialIterator(train, batch, shuffle=True)
    losses = []
    for _ in range(iterations):
        x, t = chainer.dataset.concat_examples(iterator.next(), device)
        optimizer.update(model, x, t)
        losses.append(float(model.loss.array))
    first = np.asarray(chainer.cuda.to_cpu(model.predictor.l1.W.array))
    digest = comm.gather_obj(float(first.sum()))
    dtype = comm.get_config("allreduce_grad_dtype")
    _emit(comm, {"communicator": type(comm).__name__,
                 "allreduce_grad_dtype": None if dtype is None else np.dtype(dtype).name,
                 "optimizer": type(optimizer).__name__, "losses": losses,
                 "ranks": comm.size, "weight_sums": digest})


def _used_statistics(x, y, eps):
    """Mean and variance a batch normalization used, read back from its input and output.

    With gamma = 1 and beta = 0, ``y = (x - mean) / sqrt(var + eps)`` per channel, so
    ``x = mean + sqrt(var + eps) * y``: a straight-line fit of x on y gives both exactly."""
    import numpy as np
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    means, variances = [], []
    for c in range(x.shape[1]):
        slope, intercept = np.polyfit(y[:, c], x[:, c], 1)
        means.append(float(intercept))
        variances.append(float(slope ** 2 - eps))
    return means, variances


def _bn_worker(local_batch=4, channels=3, seed=0):
    """Each rank normalizes its own rows of one global batch with local BN and MultiNodeBN."""
    comm = start_multi_node("naive", forkserver=False)
    import chainer
    import chainer.links as L
    import chainermn
    import numpy as np
    chainer.disable_experimental_feature_warning = True

    # Every rank draws the same global batch and keeps its own rows; the rows of rank r are
    # shifted by 4r so that the ranks' own statistics clearly differ.
    rng = np.random.RandomState(seed)
    whole = rng.randn(comm.size * local_batch, channels).astype(np.float32)
    whole += np.repeat(4.0 * np.arange(comm.size, dtype=np.float32), local_batch)[:, None]
    mine = whole[comm.rank * local_batch:(comm.rank + 1) * local_batch]
    local_bn = L.BatchNormalization(channels)
    multi_bn = chainermn.links.MultiNodeBatchNormalization(channels, comm)
    with chainer.using_config("train", True):
        y_local = local_bn(mine).array
        y_multi = multi_bn(mine).array
    local_mean, local_var = _used_statistics(mine, y_local, local_bn.eps)
    multi_mean, multi_var = _used_statistics(mine, y_multi, multi_bn.eps)
    rows = comm.gather_obj({"rank": comm.rank, "local_bn": {"mean": local_mean, "var": local_var},
                            "multi_node_bn": {"mean": multi_mean, "var": multi_var},
                            "own_rows": {"mean": mine.mean(axis=0).tolist(),
                                         "var": mine.var(axis=0).tolist()}})
    if comm.rank == 0:
        single = L.BatchNormalization(channels)
        with chainer.using_config("train", True):
            y_single = single(whole).array
        single_mean, single_var = _used_statistics(whole, y_single, single.eps)
        _emit(comm, {"ranks": rows, "local_batch": local_batch, "channels": channels,
                     "single_process": {"mean": single_mean, "var": single_var},
                     "whole_batch": {"mean": whole.mean(axis=0).tolist(),
                                     "var": whole.var(axis=0).tolist()}})


def _worker_main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(prog="python -m handson_lib.experiments.large_batch",
                                     description="MPI workers of handson_lib.experiments.large_batch")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--bn-compare", action="store_true")
    mode.add_argument("--probe-gpu-options", action="store_true")
    mode.add_argument("--gpu-train", action="store_true")
    parser.add_argument("--local-batch", type=int, default=4)
    parser.add_argument("--channels", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=30)
    args = parser.parse_args(argv)
    if args.bn_compare:
        _bn_worker(args.local_batch, args.channels, args.seed)
    elif args.probe_gpu_options:
        _probe_worker()
    else:
        _gpu_train_worker(args.iterations)
