#!/usr/bin/env python
"""Task #1: train on several GPUs of one node with MultiprocessParallelUpdater.

    python train_cifar_multi_gpu.py --gpus 0 1     # two devices in parallel
    python train_cifar_multi_gpu.py --gpus 0       # one device: the baseline to compare with

Complete every `# PUT YOUR CODE HERE`, then check your work with
`handson check multi-gpu train_cifar_multi_gpu.py`. On a host without GPUs and NCCL the same
code runs the course's CPU stand-in (one worker process per device), announced on screen.
"""

import argparse

import chainer
from chainer import training
from chainer.training import extensions

from handson_lib import runtime  # the course's CPU stand-in, offline data, models and throughput line

# Chainer's updater where GPUs and NCCL exist, the CPU stand-in elsewhere (said on screen).
runtime.install_parallel_updater()


def main():
    parser = argparse.ArgumentParser(description="Task #1: multi-GPU training (seed 002)")
    parser.add_argument("--gpus", "-g", type=int, nargs="+", default=[0, 1],
                        help="device ids; the first is the main device, one id = baseline")
    runtime.add_common_arguments(parser)
    args = parser.parse_args()
    runtime.seed_everything(args.seed)

    multi = len(args.gpus) > 1
    if multi:
        runtime.print_banner("Start a training script using multiple GPUs.",
                            [("GPUs", len(args.gpus)), ("Minibatch-size", args.batchsize),
                             ("epoch", args.epoch)])
    else:
        runtime.print_banner("Start a training script using single GPU.",
                            [("Minibatch-size", args.batchsize), ("epoch", args.epoch)])

    train, test, info = runtime.load_data(args)
    model = runtime.get_model(args.model, n_class=info.n_class)
    optimizer = chainer.optimizers.MomentumSGD(lr=args.lr)
    optimizer.setup(model)

    if multi:
        train_iters = devices = updater = None

        # (1) Split the training set at random into one part per device and make one
        #     iterator per part (chainer.datasets.split_dataset_n_random).
        ### BEGIN SOLUTION
        parts = chainer.datasets.split_dataset_n_random(train, len(args.gpus), seed=args.seed)
        train_iters = [chainer.iterators.SerialIterator(part, args.batchsize) for part in parts]
        ### END SOLUTION

        # (2) The devices dict: device name -> GPU id; the main device's name must be 'main'.
        ### BEGIN SOLUTION
        devices = {"main": args.gpus[0]}
        devices.update({f"gpu{gpu}": gpu for gpu in args.gpus[1:]})
        ### END SOLUTION
        runtime.require_done("Task #1", train_iters=train_iters, devices=devices)
        print(devices)

        # (3) The updater: chainer.training.updaters.MultiprocessParallelUpdater.
        ### BEGIN SOLUTION
        updater = training.updaters.MultiprocessParallelUpdater(train_iters, optimizer, devices)
        ### END SOLUTION
        runtime.require_done("Task #1", updater=updater)
        device = runtime.evaluation_device(devices["main"])
    else:
        device = runtime.single_device(args.gpus[0])
        model.to_device(device)
        device.use()
        train_iter = chainer.iterators.SerialIterator(train, args.batchsize)
        updater = training.StandardUpdater(train_iter, optimizer, device=device)

    # Phase times and NVTX ranges when HANDSON_PHASES=1 (the profiling job scripts set it). With
    # several devices the updater runs forward and backward itself: only `update` is apart there.
    runtime.instrument_phases(updater, out=args.out, warmup=args.warmup_iterations)
    trainer = training.Trainer(updater, (args.epoch, "epoch"), out=args.out)
    test_iter = chainer.iterators.SerialIterator(test, args.batchsize, repeat=False, shuffle=False)
    trainer.extend(extensions.Evaluator(test_iter, model, device=device))
    trainer.extend(extensions.LogReport())
    trainer.extend(extensions.PrintReport(
        ["epoch", "main/loss", "validation/main/loss", "main/accuracy", "validation/main/accuracy",
         "elapsed_time"]))
    trainer.extend(extensions.PlotReport(["main/loss", "validation/main/loss"], "epoch", filename="loss.png"))
    trainer.extend(extensions.PlotReport(["main/accuracy", "validation/main/accuracy"], "epoch",
                                         filename="accuracy.png"))
    if not args.no_progress:
        trainer.extend(extensions.ProgressBar(update_interval=10))
    trainer.extend(runtime.throughput_extension(warmup=args.warmup_iterations, out=args.out))
    trainer.run()


if __name__ == "__main__":
    main()
