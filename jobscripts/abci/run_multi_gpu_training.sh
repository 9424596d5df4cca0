#!/bin/bash
# handson-site: abci   (the rules `handson jobscript lint` applies; see jobscripts/README.md)
# Task #1 on ABCI 3.0: one full node (rt_HF), MultiprocessParallelUpdater on its 8 H200s (one
# MPI process: the updater starts one worker process per GPU; set GPUS="0 1" for the seed's
# 2-GPU comparison). Submit from the folder with your train_cifar_multi_gpu.py (else
# $COURSE/solutions/):
#     qsub run_multi_gpu_training.sh
# Replace the group grpname below with your ABCI group first: `handson jobscript lint` checks.
#PBS -q rt_HF
#PBS -l select=1:mpiprocs=1
#PBS -P grpname
#PBS -l walltime=00:10:00
#PBS -N multi_gpu
#PBS -j oe

set -eu
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

ENV_SH=${ENV_SH:-$HOME/env.sh}
if [ -f "$ENV_SH" ]; then . "$ENV_SH"; else echo "note: no $ENV_SH; using the environment as it is"; fi
PYTHON=${PYTHON:-python}
DATASET=${DATASET:-synthetic}
GPUS=${GPUS:-0 1 2 3 4 5 6 7}

TASK=train_cifar_multi_gpu.py
if [ ! -f "$TASK" ] && [ -n "${COURSE:-}" ]; then TASK=$COURSE/solutions/$TASK; fi
[ -f "$TASK" ] || { echo "no train_cifar_multi_gpu.py in $PWD nor in \$COURSE/solutions"; exit 2; }

"$PYTHON" -c "import chainer; print('chainer', chainer.__version__)"
"$PYTHON" -c "import cupy; print('cupy', cupy.__version__, 'nccl', cupy.cuda.nccl.get_version() if cupy.cuda.nccl.available else 'not available')" \
  || echo "cupy: not importable here (the CPU stand-in will run)"

"$PYTHON" "$TASK" --gpus 0 --dataset "$DATASET" --no-progress --out result/single ${EXTRA_ARGS:-}
"$PYTHON" "$TASK" --gpus $GPUS --dataset "$DATASET" --no-progress --out result/multi ${EXTRA_ARGS:-}
