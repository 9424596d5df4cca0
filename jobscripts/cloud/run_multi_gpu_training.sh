#!/bin/bash
# handson-site: cloud   (the rules `handson jobscript lint` applies; see jobscripts/README.md)
# Task #1 on a cloud GPU server (seed 001: 4 GPUs per node): MultiprocessParallelUpdater on its
# 4 GPUs (GPUS="0 1" for the seed's 2-GPU comparison). No scheduler there: run it on the node,
#     bash run_multi_gpu_training.sh
# in the folder with your train_cifar_multi_gpu.py (else $COURSE/solutions/); the #PBS lines
# serve `handson jobscript run` and an OpenPBS, if the cluster has one (qsub run_...sh).
#PBS -q workq
#PBS -l select=1:mpiprocs=1
#PBS -l walltime=00:10:00
#PBS -N multi_gpu
#PBS -j oe

set -eu
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

ENV_SH=${ENV_SH:-$HOME/env.sh}
if [ -f "$ENV_SH" ]; then . "$ENV_SH"; else echo "note: no $ENV_SH; using the environment as it is"; fi
PYTHON=${PYTHON:-python}
DATASET=${DATASET:-synthetic}
GPUS=${GPUS:-0 1 2 3}

TASK=train_cifar_multi_gpu.py
if [ ! -f "$TASK" ] && [ -n "${COURSE:-}" ]; then TASK=$COURSE/solutions/$TASK; fi
[ -f "$TASK" ] || { echo "no train_cifar_multi_gpu.py in $PWD nor in \$COURSE/solutions"; exit 2; }

"$PYTHON" -c "import chainer; print('chainer', chainer.__version__)"
"$PYTHON" -c "import cupy; print('cupy', cupy.__version__, 'nccl', cupy.cuda.nccl.get_version() if cupy.cuda.nccl.available else 'not available')" \
  || echo "cupy: not importable here (the CPU stand-in will run)"

"$PYTHON" "$TASK" --gpus 0 --dataset "$DATASET" --no-progress --out result/single ${EXTRA_ARGS:-}
"$PYTHON" "$TASK" --gpus $GPUS --dataset "$DATASET" --no-progress --out result/multi ${EXTRA_ARGS:-}
