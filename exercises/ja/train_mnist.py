#!/usr/bin/env python
"""1 プロセスで動く、"ChainerMN in seconds"（シード資料 000）の出発点となるスクリプトです。

オフラインの手書き数字データで学習する、Chainer の MNIST 形式の学習スクリプトです（MLP、Chainer の
サンプルと同じ構成）。`train_mnist_multi_node.py` は、同じスクリプトを ChainerMN に変換したものです。

    python train_mnist.py            # CPU
    python train_mnist.py --gpu 0    # GPU 0
"""

import argparse

import chainer
from chainer import training
from chainer.training import extensions

from handson_lib import runtime  # このコースのオフラインのデータ、モデル、スループットの行


def main():
    parser = argparse.ArgumentParser(description="Chainer のサンプル: MNIST 形式の手書き数字")
    parser.add_argument("--gpu", "-g", type=int, default=-1, help="GPU の ID（負の値なら CPU）")
    parser.add_argument("--unit", "-u", type=int, default=1000, help="隠れ層 1 つあたりのユニット数")
    runtime.add_common_arguments(parser, batchsize=100, epoch=20, model="mlp")
    parser.set_defaults(dataset="digits", lr=0.05)
    args = parser.parse_args()
    runtime.seed_everything(args.seed)

    device = chainer.get_device(args.gpu if args.gpu >= 0 else "@numpy")
    model = chainer.links.Classifier(runtime.MLP(args.unit, 10))
    model.to_device(device)
    device.use()

    optimizer = chainer.optimizers.MomentumSGD(lr=args.lr)
    optimizer.setup(model)

    train, test, info = runtime.load_data(args)

    train_iter = chainer.iterators.SerialIterator(train, args.batchsize)
    test_iter = chainer.iterators.SerialIterator(test, args.batchsize, repeat=False, shuffle=False)
    updater = training.StandardUpdater(train_iter, optimizer, device=device)
    trainer = training.Trainer(updater, (args.epoch, "epoch"), out=args.out)

    evaluator = extensions.Evaluator(test_iter, model, device=device)
    trainer.extend(evaluator)

    # 出力を書く拡張: ログ、グラフ、プログレスバー、スループットの行。
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
    for extension in reports:
        trainer.extend(extension)
    trainer.run()


if __name__ == "__main__":
    main()
