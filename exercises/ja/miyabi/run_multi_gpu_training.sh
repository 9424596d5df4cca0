#!/bin/bash
# handson-site: miyabi   (your site: lint, `handson check` and the grader apply its rules)
# Miyabi-G（1 ノードに GH200 × 1、PBS Pro）用の、タスク#1 のジョブスクリプトです。投入方法:
# qsub -j oe run_multi_gpu_training.sh
# （1）実行環境指定を完成させます: キューは debug-g、1 ノード、MPI プロセス 1 つ、OpenMP
# スレッド 1 つです（MultiprocessParallelUpdater が GPU ごとに 1 つずつ、自分で
# ワーカープロセスを起動します）。
# PUT YOUR CODE HERE
#PBS -W group_list=xx00
#PBS -l walltime=00:10:00
#PBS -N multi_gpu
# （2）上の xx00 を自分のグループ名（`id -ng`）に置き換えます。残したままの
# プレースホルダーのグループは、qsub の前にはエラーですが、採点のチェックでは
# 減点されません。

set -eu
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

# サイトの環境設定（計算ノードから見える HOME、PYTHONUSERBASE、モジュール、COURSE）は
# env.sh で行います。
ENV_SH=${ENV_SH:-/work/$(id -ng)/${USER:-$(id -un)}/env.sh}
if [ -f "$ENV_SH" ]; then . "$ENV_SH"; else echo "note: no $ENV_SH; using the environment as it is"; fi
export PYTHONUSERBASE=${PYTHONUSERBASE:-$HOME/.local} PYTHONPATH=${PYTHONPATH:-} LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
# リソース要求で別の指定がなければ、OpenMP のスレッドはプロセスあたり 1 つです（PBS Pro は
# ompthreads からこの値を設定します）。
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
PYTHON=${PYTHON:-python}
DATASET=${DATASET:-synthetic}
# EXTRA_ARGS: 学習スクリプトに渡す追加のオプションです（例: 手早く試すなら "--epoch 1"）。
# 2 回目の実行で使う GPU（1 回目は GPU 0 だけを使います）: 既定ではノードのすべての GPU
# です。
GPUS=${GPUS:-0}

TASK=train_cifar_multi_gpu.py
# ジョブを投入したフォルダーにあるあなたのスクリプトを実行します。実行するのはあなたの
# スクリプトで、コースの別のコピーを実行することはありません。
[ -f "$TASK" ] || { echo "no $TASK in $PWD: submit from the folder that holds your $TASK (or copy it here)"; exit 2; }

# シード資料の job.sh と同じく、最初にバージョンを表示します。
"$PYTHON" -c "import chainer; print('chainer', chainer.__version__)"
"$PYTHON" -c "import cupy; print('cupy', cupy.__version__, 'nccl', cupy.cuda.nccl.get_version() if cupy.cuda.nccl.available else 'not available')" 2>/dev/null \
  || echo "cupy: not importable here (the CPU stand-in will run)"

"$PYTHON" "$TASK" --gpus 0 --dataset "$DATASET" --no-progress --out result/single ${EXTRA_ARGS:-}
# GPU が 1 つのノード（Miyabi-G）では分割するものがないので、GPU 1 枚での実行だけを
# 行います。
if [ "$(echo $GPUS | wc -w)" -gt 1 ]; then
  "$PYTHON" "$TASK" --gpus $GPUS --dataset "$DATASET" --no-progress --out result/multi ${EXTRA_ARGS:-}
fi
