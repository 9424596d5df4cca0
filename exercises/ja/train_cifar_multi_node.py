#!/usr/bin/env python
"""タスク#2: ChainerMN で複数のノードを使って学習します。

    mpiexec -n 4 python train_cifar_multi_node.py --gpu    # ランクごとに GPU を 1 つ、pure_nccl
    mpiexec -n 2 python train_cifar_multi_node.py          # CPU のランク、naive コミュニケータ

`# PUT YOUR CODE HERE` をすべて埋めてから、
`handson check multi-node train_cifar_multi_node.py` で確認してください。
"""

import argparse

import chainer
import chainermn
from chainer import training
from chainer.training import extensions

from handson_lib import runtime  # このコースのランクの起動処理、オフラインのデータ、モデル、スループットの行


def main():
    parser = argparse.ArgumentParser(description="タスク#2: ChainerMN によるマルチノードでの学習（シード資料 002）")
    parser.add_argument("--gpu", "-g", action="store_true", help="ランクごとに GPU を 1 つ使う")
    parser.add_argument("--communicator", default=None,
                        help="ChainerMN のコミュニケータ（既定: --gpu ありなら pure_nccl、なしなら naive）")
    runtime.add_common_arguments(parser)
    args = parser.parse_args()
    communicator_name = args.communicator or ("pure_nccl" if args.gpu else "naive")
    # MPI の開始前に forkserver を用意し、Chainer 7 で削除されたコミュニケータには
    # 分かりやすいエラーを出します。また、1 つのランクで例外が起きたら、ほかのランクを
    # 待たせたままにせず全ランクを終了させます。
    runtime.prepare_rank(communicator_name, gpu=args.gpu)
    runtime.seed_everything(args.seed)

    comm = device = None
    # （1）`communicator_name` という名前のコミュニケータを作ります
    # （chainermn.create_communicator）。
    # PUT YOUR CODE HERE
    runtime.require_done("Task #2", comm=comm)

    # （2）このランクのデバイス: --gpu ありなら `comm.intra_rank` 番の GPU（同じノードの
    # ランクはそのノードの GPU を分け合います）、なしなら CPU（"@numpy"）です。
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
    # （3）毎回の更新の前に全ランクの勾配を平均するオプティマイザ（MomentumSGD(lr=args.lr)
    # を chainermn.create_multi_node_optimizer でラップします）。
    # PUT YOUR CODE HERE
    runtime.require_done("Task #2", optimizer=optimizer)
    optimizer.setup(model)

    # （4）学習データとテストデータを分割して、各ランクにそれぞれの担当分を配ります
    # （chainermn.scatter_dataset: ランク 0 のデータをシャッフルして分割し、各ランクに
    # 送ります）。
    # PUT YOUR CODE HERE

    train_iter = chainer.iterators.SerialIterator(train, args.batchsize)
    test_iter = chainer.iterators.SerialIterator(test, args.batchsize, repeat=False, shuffle=False)
    updater = training.StandardUpdater(train_iter, optimizer, device=device)
    # HANDSON_PHASES=1 のとき（プロファイル用のジョブスクリプトが設定します）、
    # フェーズごとの時間と NVTX の範囲を記録します。
    runtime.instrument_phases(updater, out=args.out, warmup=args.warmup_iterations)
    trainer = training.Trainer(updater, (args.epoch, "epoch"), out=args.out)

    evaluator = None
    # （5）結果を全ランクで平均するエバリュエータ（extensions.Evaluator を
    # chainermn.create_multi_node_evaluator でラップします）。
    # PUT YOUR CODE HERE
    runtime.require_done("Task #2", evaluator=evaluator)
    trainer.extend(evaluator)

    # （6）ログ、レポート、グラフ、プログレスバーはランク 0 だけで扱います（そうしないと
    # 全ランクが同じ内容を表示し、同じファイルに書き込みます）。
    # `if comm.rank == 0:` の下で、trainer に LogReport、PrintReport、2 つの PlotReport、
    # （--no-progress でなければ）ProgressBar を、train_cifar_multi_gpu.py と同じように
    # 追加します。
    # PUT YOUR CODE HERE

    trainer.extend(runtime.throughput_extension(args.batchsize * comm.size, warmup=args.warmup_iterations,
                                             out=args.out if comm.rank == 0 else None,
                                             print_fn=print if comm.rank == 0 else None))
    trainer.run()


if __name__ == "__main__":
    main()
