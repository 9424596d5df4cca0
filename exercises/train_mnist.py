#!/usr/bin/env python
"""The single-process starting point of "ChainerMN in seconds" (seed 000).

A Chainer MNIST-style training script (an MLP, Chainer's example layout) on the offline digits
data. `train_mnist_multi_node.py` is the same script converted to ChainerMN.

    python train_mnist.py            # CPU
    python train_mnist.py --gpu 0    # GPU 0
"""

import argparse

import chainer
from chainer import training
from chainer.training import extensions

from handson_lib.runtime import models, throughput
from handson_lib.runtime import training as course


def main():
    parser = argparse.ArgumentParser(description="Chainer example: MNIST-style digits")
    parser.add_argument("--gpu", "-g", type=int, default=-1, help="GPU id (negative: CPU)")
    parser.add_argument("--unit", "-u", type=int, default=1000, help="units per hidden layer")
    course.add_common_arguments(parser, batchsize=100, epoch=20, model="mlp")
    parser.set_defaults(dataset="digits", lr=0.05)
    args = parser.parse_args()
    course.seed_everything(args.seed)

    device = chainer.get_device(args.gpu if args.gpu >= 0 else "@numpy")
    train, test, info = course.load_data(args)
    model = chainer.links.Classifier(models.MLP(args.unit, info.n_class))
    model.to_device(device)
    device.use()
    optimizer = chainer.optimizers.MomentumSGD(lr=args.lr)
    optimizer.setup(model)

    train_iter = chainer.iterators.SerialIterator(train, args.batchsize)
    test_iter = chainer.iterators.SerialIterator(test, args.batchsize, repeat=False, shuffle=False)
    updater = training.StandardUpdater(train_iter, optimizer, device=device)
    trainer = training.Trainer(updater, (args.epoch, "epoch"), out=args.out)
    trainer.extend(extensions.Evaluator(test_iter, model, device=device))
    course.add_report_extensions(trainer, args.out, progress=not args.no_progress)
    trainer.extend(throughput.make_extension(args.batchsize, warmup=args.warmup_iterations, out=args.out))
    trainer.run()


if __name__ == "__main__":
    main()
