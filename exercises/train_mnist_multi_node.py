#!/usr/bin/env python
"""`train_mnist.py` converted to ChainerMN: "ChainerMN in seconds" (seed 000).

Part A is the minimal conversion of the seed: a communicator, the device from `intra_rank`, a
multi-node optimizer, reports on rank 0. Part B is what the seed does next: `scatter_dataset`
so that no two ranks train on the same examples, and a multi-node evaluator.

    mpiexec -n 2 python train_mnist_multi_node.py
    mpiexec -n 4 python train_mnist_multi_node.py --gpu --communicator pure_nccl

Check it with `handson check mnist-multi-node train_mnist_multi_node.py`.
"""

import argparse

import chainer
import chainermn
from chainer import training
from chainer.training import extensions

from handson_lib import runtime  # the course's rank start-up, offline data, models and throughput line


def main():
    parser = argparse.ArgumentParser(description="ChainerMN example: MNIST-style digits")
    parser.add_argument("--gpu", "-g", action="store_true", help="one GPU per rank")
    parser.add_argument("--communicator", default=None, help="default: pure_nccl with --gpu, else naive")
    parser.add_argument("--unit", "-u", type=int, default=1000, help="units per hidden layer")
    runtime.add_common_arguments(parser, batchsize=100, epoch=20, model="mlp")
    parser.set_defaults(dataset="digits", lr=0.05)
    args = parser.parse_args()
    communicator_name = args.communicator or ("pure_nccl" if args.gpu else "naive")
    runtime.prepare_rank(communicator_name, gpu=args.gpu)
    runtime.seed_everything(args.seed)

    comm = device = None
    # Part A (1): the communicator, and this rank's device chosen from comm.intra_rank
    #             (the CPU, "@numpy", without --gpu).
    # PUT YOUR CODE HERE
    runtime.require_done("The conversion", comm=comm, device=device)

    train, test, info = runtime.load_data(args, announce=comm.rank == 0)
    model = chainer.links.Classifier(runtime.MLP(args.unit, info.n_class))
    model.to_device(device)
    device.use()

    optimizer = None
    # Part A (2): the optimizer, made multi-node.
    # PUT YOUR CODE HERE
    runtime.require_done("The conversion", optimizer=optimizer)
    optimizer.setup(model)

    # Part B (1): split the data over the ranks, without overlap.
    # PUT YOUR CODE HERE

    train_iter = chainer.iterators.SerialIterator(train, args.batchsize)
    test_iter = chainer.iterators.SerialIterator(test, args.batchsize, repeat=False, shuffle=False)
    updater = training.StandardUpdater(train_iter, optimizer, device=device)
    trainer = training.Trainer(updater, (args.epoch, "epoch"), out=args.out)

    evaluator = extensions.Evaluator(test_iter, model, device=device)
    # Part B (2): make the evaluator report the mean over all ranks.
    # PUT YOUR CODE HERE
    trainer.extend(evaluator)

    # Part A (3): logs and reports on one rank only: train_mnist.py's LogReport, PrintReport,
    #             PlotReports and ProgressBar, under `if comm.rank == 0:`.
    # PUT YOUR CODE HERE
    trainer.extend(runtime.throughput_extension(args.batchsize * comm.size, warmup=args.warmup_iterations,
                                             out=args.out if comm.rank == 0 else None,
                                             print_fn=print if comm.rank == 0 else None))
    trainer.run()


if __name__ == "__main__":
    main()
