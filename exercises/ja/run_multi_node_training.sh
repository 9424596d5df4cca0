#!/bin/bash
# Reedbush-H（1 ノードに P100 × 2、PBS Pro）用の、タスク#2 のジョブスクリプトです。
# 投入方法:
# qsub -j oe run_multi_node_training.sh
# （1）実行環境指定を完成させます: キューは h-debug、2 ノードで、ノードごとに MPI プロセス
# 2 つ（GPU ごとに 1 つ）、プロセスあたり OpenMP スレッド 1 つです。全部で 4
# ランクになります。
# PUT YOUR CODE HERE
#PBS -W group_list=gt00
#PBS -l walltime=00:15:00
#PBS -N multi_node
# （2）上の gt00 を自分のグループ名（`id -ng`）に置き換えます。残したままの
# プレースホルダーのグループは、qsub の前にはエラーですが、採点のチェックでは
# 減点されません。

set -eu
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

# サイトの環境設定（計算ノードから見える HOME、PYTHONUSERBASE、モジュール、COURSE）は
# env.sh で行います。
ENV_SH=${ENV_SH:-/lustre/$(id -ng)/${USER:-$(id -un)}/env.sh}
if [ -f "$ENV_SH" ]; then . "$ENV_SH"; else echo "注意: $ENV_SH がありません。今の環境のまま実行します"; fi
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
[ -f "$TASK" ] || { echo "$PWD に $TASK がありません: あなたの $TASK があるフォルダーから投入してください（またはここにコピーしてください）"; exit 2; }

# ノードファイルの 1 行につき 1 ランクです（select × mpiprocs 個）。
# ノードファイルがなければ NP を使います（既定は 2）。
if [ -n "${PBS_NODEFILE:-}" ] && [ -f "$PBS_NODEFILE" ]; then NP=$(wc -l < "$PBS_NODEFILE"); fi
NP=${NP:-2}

# シード資料の job.sh と同じく、最初にバージョンを表示します。
"$PYTHON" -c "import chainer; print('chainer', chainer.__version__)"
GPU_FLAG=""
if "$PYTHON" -c "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 and cupy.cuda.nccl.available else 1)" 2>/dev/null; then
  GPU_FLAG="--gpu"
else
  echo "使える GPU/NCCL がありません: naive コミュニケータと CPU のランクで実行します"
fi

# -x は環境変数を別のノードのランクに渡します（シード資料 000 の job.sh と同じ）。Reedbush
# の Open MPI は、使うノードを PBS から自分で読み取ります。
mpiexec -n "$NP" \
  -x PATH -x LD_LIBRARY_PATH -x PYTHONUSERBASE -x PYTHONPATH -x OMP_NUM_THREADS \
  "$PYTHON" "$TASK" $GPU_FLAG --dataset "$DATASET" --no-progress --out result/multi_node ${EXTRA_ARGS:-}
