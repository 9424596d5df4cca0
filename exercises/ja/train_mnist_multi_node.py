#!/usr/bin/env python
"""`train_mnist.py` を ChainerMN に変換したもの: "ChainerMN in seconds"（シード資料 000）。

1 プロセスのスクリプトから始めて、`# PUT YOUR CODE HERE` の部分を埋めてください。各箇所のコメントに、
複数プロセスで実行するためにそこで何が必要かが書かれています（使う関数は 02_multi_node.ipynb で
学びます）。行を追加するだけで済みます。

    mpiexec -n 2 python train_mnist_multi_node.py             # CPU のランク
    mpiexec -n 4 python train_mnist_multi_node.py --gpu 0     # ランクごとに GPU を 1 つ

`handson check mnist-multi-node train_mnist_multi_node.py` で確認してください。
"""

import argparse

import chainer
from chainer import training
from chainer.training import extensions

from handson_lib import runtime  # このコースのオフラインのデータ、モデル、スループットの行

# 変換に必要なもの。
# PUT YOUR CODE HERE


def main():
    parser = argparse.ArgumentParser(description="Chainer のサンプル: MNIST 形式の手書き数字")
    parser.add_argument("--gpu", "-g", type=int, default=-1, help="GPU の ID（負の値なら CPU）")
    parser.add_argument("--unit", "-u", type=int, default=1000, help="隠れ層 1 つあたりのユニット数")
    runtime.add_common_arguments(parser, batchsize=100, epoch=20, model="mlp")
    parser.set_defaults(dataset="digits", lr=0.05)
    args = parser.parse_args()
    runtime.seed_everything(args.seed)

    device = chainer.get_device(args.gpu if args.gpu >= 0 else "@numpy")
    # mpiexec が起動したプロセス同士をつなぐ必要があります（--gpu ありなら NCCL、CPU なら
    # 普通の MPI で）。また、各プロセスは自分のノードの GPU のうち、自分の担当の 1 つを
    # 使う必要があります（--gpu なしなら CPU）。
    # PUT YOUR CODE HERE
    model = chainer.links.Classifier(runtime.MLP(args.unit, 10))
    model.to_device(device)
    device.use()

    optimizer = chainer.optimizers.MomentumSGD(lr=args.lr)
    # 全プロセスのモデルが同一に保たれるよう、毎回の更新で全プロセスの勾配を使う
    # 必要があります。
    # PUT YOUR CODE HERE
    optimizer.setup(model)

    train, test, info = runtime.load_data(args)
    # 各プロセスは学習データのうち自分の担当分で学習し（同じサンプルを二度使わない）、
    # テストデータのうち自分の担当分でテストする必要があります。
    # PUT YOUR CODE HERE

    train_iter = chainer.iterators.SerialIterator(train, args.batchsize)
    test_iter = chainer.iterators.SerialIterator(test, args.batchsize, repeat=False, shuffle=False)
    updater = training.StandardUpdater(train_iter, optimizer, device=device)
    trainer = training.Trainer(updater, (args.epoch, "epoch"), out=args.out)

    evaluator = extensions.Evaluator(test_iter, model, device=device)
    # 検証の数値はテストデータ全体（全プロセスの担当分）についてのもので、どのプロセスでも
    # 同じでなければなりません。
    # PUT YOUR CODE HERE
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
    # ログ、グラフ、スループットの行を書いてよいのは 1 つのプロセスだけです（そうしないと、
    # ほかのプロセスが同じ内容を繰り返し、同じファイルに同時に書き込みます）。
    # PUT YOUR CODE HERE
    for extension in reports:
        trainer.extend(extension)
    trainer.run()


if __name__ == "__main__":
    main()
