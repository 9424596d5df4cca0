#!/bin/bash
# handson-site: abci   (your site: lint, `handson check` and the grader apply its rules)
# ABCI 3.0（1 ノードに H200 × 8、PBS Pro）用の、タスク#2 のジョブスクリプトです。投入方法:
# qsub -j oe run_multi_node_training.sh
# （1）実行環境指定を完成させます: キューは rt_HF、2 ノードで、ノードごとに MPI プロセス 8
# つ（GPU ごとに 1 つ）、プロセスあたり OpenMP スレッド 1 つです。全部で 16
# ランクになります。
# PUT YOUR CODE HERE
#PBS -P grpname
#PBS -l walltime=00:15:00
#PBS -N multi_node
# （2）上の grpname を自分の ABCI グループ名（ログインノードで `groups` を実行すると
# 表示されます）に置き換えます。残したままのプレースホルダーのグループは、qsub の前には
# エラーですが、採点のチェックでは減点されません。

set -eu
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

# サイトの環境設定（計算ノードから見える HOME、PYTHONUSERBASE、モジュール、COURSE）は
# env.sh で行います。
ENV_SH=${ENV_SH:-$HOME/env.sh}
if [ -f "$ENV_SH" ]; then . "$ENV_SH"; else echo "note: no $ENV_SH; using the environment as it is"; fi
export PYTHONUSERBASE=${PYTHONUSERBASE:-$HOME/.local} PYTHONPATH=${PYTHONPATH:-} LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
# リソース要求で別の指定がなければ、OpenMP のスレッドはプロセスあたり 1 つです（PBS Pro は
# ompthreads からこの値を設定します）。
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
PYTHON=${PYTHON:-python}
DATASET=${DATASET:-synthetic}
# EXTRA_ARGS: 学習スクリプトに渡す追加のオプションです（例: 手早く試すなら "--epoch 1"）。

TASK=train_cifar_multi_node.py
# ジョブを投入したフォルダーにあるあなたのスクリプトを実行します。実行するのはあなたの
# スクリプトで、コースの別のコピーを実行することはありません。
[ -f "$TASK" ] || { echo "no $TASK in $PWD: submit from the folder that holds your $TASK (or copy it here)"; exit 2; }

# ランク数: ノードファイルの 1 行につき 1 つです（select × mpiprocs）。ノードあたりの数:
# PPN。
NODEFILE=${PBS_NODEFILE:?run me with qsub, or with handson jobscript run}
NP=$(wc -l < "$NODEFILE")
PPN=$(( NP / $(sort -u "$NODEFILE" | wc -l) ))

# シード資料の job.sh と同じく、最初にバージョンを表示します。
"$PYTHON" -c "import chainer; print('chainer', chainer.__version__)"
GPU_FLAG=""
if "$PYTHON" -c "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 and cupy.cuda.nccl.available else 1)" 2>/dev/null; then
  GPU_FLAG="--gpu"
else
  echo "no usable GPU/NCCL here: CPU ranks with the naive communicator"
fi

# ABCI: ノードファイルとランク数を明示して渡します。
mpirun -np "$NP" -hostfile "$NODEFILE" --map-by ppr:${PPN}:node \
  -x PATH -x LD_LIBRARY_PATH -x PYTHONUSERBASE -x PYTHONPATH -x OMP_NUM_THREADS \
  "$PYTHON" "$TASK" $GPU_FLAG --dataset "$DATASET" --no-progress --out result/multi_node ${EXTRA_ARGS:-}
