#!/usr/bin/env python
"""タスク#1: MultiprocessParallelUpdater を使って、1 ノードの複数の GPU で学習します。

    python train_cifar_multi_gpu.py --gpus 0 1     # 2 つのデバイスで並列に学習
    python train_cifar_multi_gpu.py --gpus 0       # 1 つのデバイス: 比較の基準（ベースライン）

`# PUT YOUR CODE HERE` をすべて埋めてから、
`handson check multi-gpu train_cifar_multi_gpu.py` で確認してください。GPU と NCCL のないホストでは、
同じコードがこのコースの CPU 代替実装（デバイスごとに 1 つのワーカープロセス）で動きます。そのことは画面に
表示されます。
"""

import argparse

import chainer
from chainer import training
from chainer.training import extensions

from handson_lib import runtime  # このコースの CPU 代替実装、オフラインのデータ、モデル、スループットの行

# GPU と NCCL がある環境では Chainer のアップデータを、それ以外では CPU 代替実装を使います
# （どちらを使うかは画面に表示されます）。
runtime.install_parallel_updater()


def main():
    parser = argparse.ArgumentParser(description="タスク#1: マルチGPUでの学習（シード資料 002）")
    parser.add_argument("--gpus", "-g", type=int, nargs="+", default=[0, 1],
                        help="デバイスの ID。最初のものがメインのデバイス。ID が 1 つならベースライン")
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

        # （1）学習データをデバイスの数だけランダムに分割し、分割したそれぞれについて
        # イテレータを作ります（chainer.datasets.split_dataset_n_random）。
        # PUT YOUR CODE HERE

        # （2）devices の dict: デバイス名 -> GPU ID。メインのデバイスの名前は 'main'
        # にする必要があります。
        # PUT YOUR CODE HERE
        runtime.require_done("Task #1", train_iters=train_iters, devices=devices)
        print(devices)

        # （3）アップデータ: MultiprocessParallelUpdater（chainer.training.updaters）を
        # 使います。
        # PUT YOUR CODE HERE
        runtime.require_done("Task #1", updater=updater)
        device = runtime.evaluation_device(devices["main"])
    else:
        device = runtime.single_device(args.gpus[0])
        model.to_device(device)
        device.use()
        train_iter = chainer.iterators.SerialIterator(train, args.batchsize)
        updater = training.StandardUpdater(train_iter, optimizer, device=device)

    # HANDSON_PHASES=1 のとき（プロファイル用のジョブスクリプトが設定します）、
    # フェーズごとの時間と NVTX の範囲を記録します。複数のデバイスではアップデータ自身が
    # forward と backward を実行するので、分けて測れるのは `update` だけです。
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
