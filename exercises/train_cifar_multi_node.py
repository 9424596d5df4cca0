#!/usr/bin/env python
"""Task #2: train on several nodes with ChainerMN.

    mpiexec -n 4 python train_cifar_multi_node.py --gpu    # one GPU per rank, pure_nccl
    mpiexec -n 2 python train_cifar_multi_node.py          # CPU ranks, naive communicator

Complete every `# PUT YOUR CODE HERE`, then check your work with
`handson check multi-node train_cifar_multi_node.py`.
"""

import argparse

import chainer
import chainermn
from chainer import training
from chainer.training import extensions

from handson_lib import runtime  # the course's rank start-up, offline data, models and throughput line


def main():
    parser = argparse.ArgumentParser(description="Task #2: multi-node training with ChainerMN (seed 002)")
    parser.add_argument("--gpu", "-g", action="store_true", help="use one GPU per rank")
    parser.add_argument("--communicator", default=None,
                        help="ChainerMN communicator (default: pure_nccl with --gpu, naive without)")
    runtime.add_common_arguments(parser)
    args = parser.parse_args()
    communicator_name = args.communicator or ("pure_nccl" if args.gpu else "naive")
    # Forkserver before MPI starts, a clear error for communicators Chainer 7 removed, and an
    # exception on one rank aborts all ranks instead of leaving them waiting.
    runtime.prepare_rank(communicator_name, gpu=args.gpu)
    runtime.seed_everything(args.seed)

    comm = device = None
    # (1) Create the communicator named `communicator_name` (chainermn.create_communicator).
    # PUT YOUR CODE HERE
    runtime.require_done("Task #2", comm=comm)

    # (2) The device of this rank: GPU number `comm.intra_rank` with --gpu (ranks on one node
    #     share its GPUs), the CPU ("@numpy") without.
    # PUT YOUR CODE HERE
    runtime.require_done("Task #2", device=device)

    if comm.rank == 0:
        print("==========================================")
        print(f"Num process (COMM_WORLD): {comm.size}")
        print("Using GPUs" if args.gpu else "Using CPUs (no GPU: ranks are CPU processes)")
        print(f"Using {communicator_name} communicator")
        print(f"Num Minibatch-size: {args.batchsize}")
        print(f"Num epoch: {args.epoch}")
        print("==========================================")

    train, test, info = runtime.load_data(args, announce=comm.rank == 0)
    model = runtime.get_model(args.model, n_class=info.n_class)
    model.to_device(device)
    device.use()

    optimizer = None
    # (3) An optimizer that averages the gradients of all ranks before every update
    #     (chainermn.create_multi_node_optimizer around MomentumSGD(lr=args.lr)).
    # PUT YOUR CODE HERE
    runtime.require_done("Task #2", optimizer=optimizer)
    optimizer.setup(model)

    # (4) Give every rank its own part of the training and the test data (chainermn.scatter_dataset;
    #     rank 0's copy is split and sent, shuffled).
    # PUT YOUR CODE HERE

    train_iter = chainer.iterators.SerialIterator(train, args.batchsize)
    test_iter = chainer.iterators.SerialIterator(test, args.batchsize, repeat=False, shuffle=False)
    updater = training.StandardUpdater(train_iter, optimizer, device=device)
    # Phase times and NVTX ranges when HANDSON_PHASES=1 (the profiling job scripts set it).
    runtime.instrument_phases(updater, out=args.out, warmup=args.warmup_iterations)
    trainer = training.Trainer(updater, (args.epoch, "epoch"), out=args.out)

    evaluator = None
    # (5) An evaluator whose result is averaged over all ranks
    #     (chainermn.create_multi_node_evaluator around extensions.Evaluator).
    # PUT YOUR CODE HERE
    runtime.require_done("Task #2", evaluator=evaluator)
    trainer.extend(evaluator)

    # (6) Logs, reports, plots and the progress bar, on rank 0 only (every rank would print and
    #     write the same files otherwise): under `if comm.rank == 0:`, the trainer's LogReport,
    #     PrintReport, the two PlotReports and (unless --no-progress) the ProgressBar, written as
    #     in train_cifar_multi_gpu.py.
    # PUT YOUR CODE HERE

    trainer.extend(runtime.throughput_extension(args.batchsize * comm.size, warmup=args.warmup_iterations,
                                             out=args.out if comm.rank == 0 else None,
                                             print_fn=print if comm.rank == 0 else None))
    trainer.run()


if __name__ == "__main__":
    main()
