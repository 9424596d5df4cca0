#!/usr/bin/env python
"""`train_mnist.py` converted to ChainerMN: "ChainerMN in seconds" (seed 000).

Start from the single-process script and fill in the `# PUT YOUR CODE HERE` parts; each says what
the multi-process run needs there (02_multi_node.ipynb teaches the calls). You only add lines.

    mpiexec -n 2 python train_mnist_multi_node.py             # CPU ranks
    mpiexec -n 4 python train_mnist_multi_node.py --gpu 0     # one GPU per rank

Check it with `handson check mnist-multi-node train_mnist_multi_node.py`.
"""

import argparse

import chainer
from chainer import training
from chainer.training import extensions

from handson_lib import runtime  # the course's offline data, models and throughput line

# What the conversion needs.
### BEGIN SOLUTION
import chainermn
### END SOLUTION


def main():
    parser = argparse.ArgumentParser(description="Chainer example: MNIST-style digits")
    parser.add_argument("--gpu", "-g", type=int, default=-1, help="GPU id (negative: CPU)")
    parser.add_argument("--unit", "-u", type=int, default=1000, help="units per hidden layer")
    runtime.add_common_arguments(parser, batchsize=100, epoch=20, model="mlp")
    parser.set_defaults(dataset="digits", lr=0.05)
    args = parser.parse_args()
    runtime.seed_everything(args.seed)

    device = chainer.get_device(args.gpu if args.gpu >= 0 else "@numpy")
    # The processes that mpiexec started must be connected to each other (over NCCL with --gpu,
    # plain MPI on CPUs), and each process must use its own GPU of its node (the CPU without --gpu).
    ### BEGIN SOLUTION
    comm = chainermn.create_communicator("pure_nccl" if args.gpu >= 0 else "naive")
    device = chainer.get_device(comm.intra_rank if args.gpu >= 0 else "@numpy")
    ### END SOLUTION
    model = chainer.links.Classifier(runtime.MLP(args.unit, 10))
    model.to_device(device)
    device.use()

    optimizer = chainer.optimizers.MomentumSGD(lr=args.lr)
    # Every update must use the gradients of all processes, so that the models stay identical.
    ### BEGIN SOLUTION
    optimizer = chainermn.create_multi_node_optimizer(optimizer, comm)
    ### END SOLUTION
    optimizer.setup(model)

    train, test, info = runtime.load_data(args)
    # Every process must train on its own part of the training set (no example twice), and test
    # on its own part of the test set.
    ### BEGIN SOLUTION
    train = chainermn.scatter_dataset(train, comm, shuffle=True)
    test = chainermn.scatter_dataset(test, comm, shuffle=True)
    ### END SOLUTION

    train_iter = chainer.iterators.SerialIterator(train, args.batchsize)
    test_iter = chainer.iterators.SerialIterator(test, args.batchsize, repeat=False, shuffle=False)
    updater = training.StandardUpdater(train_iter, optimizer, device=device)
    trainer = training.Trainer(updater, (args.epoch, "epoch"), out=args.out)

    evaluator = extensions.Evaluator(test_iter, model, device=device)
    # The validation figures must describe the whole test set (all processes' parts), and be the
    # same on every process.
    ### BEGIN SOLUTION
    evaluator = chainermn.create_multi_node_evaluator(evaluator, comm)
    ### END SOLUTION
    trainer.extend(evaluator)

    # The extensions that write: logs, plots, the progress bar and the throughput line.
    reports = [
        extensions.LogReport(),
        extensions.PrintReport(["epoch", "main/loss", "validation/main/loss", "main/accuracy",
                                "validation/main/accuracy", "elapsed_time"]),
        extensions.PlotReport(["main/loss", "validation/main/loss"], "epoch", filename="loss.png"),
        extensions.PlotReport(["main/accuracy", "validation/main/accuracy"], "epoch",
                              filename="accuracy.png"),
        runtime.throughput_extension(warmup=args.warmup_iterations, out=args.out),
    ]
    if not args.no_progress:
        reports.append(extensions.ProgressBar(update_interval=10))
    # Only one process may write logs, plots and the throughput line (the others would repeat
    # them, and write the same files at the same time).
    ### BEGIN SOLUTION
    reports = reports if comm.rank == 0 else []
    ### END SOLUTION
    for extension in reports:
        trainer.extend(extension)
    trainer.run()


if __name__ == "__main__":
    main()
