#!/bin/bash
# handson-site: reedbush   (the rules `handson jobscript lint` applies; see jobscripts/README.md)
# Task #1 on Reedbush-H: one node, MultiprocessParallelUpdater on its 2 P100s (one MPI process:
# the updater starts one worker process per GPU). Submit from the folder that holds your
# train_cifar_multi_gpu.py (else $COURSE/solutions/ is used):
#     qsub -j oe run_multi_gpu_training.sh
# Replace the group gt00 below with yours (`id -ng`) first: `handson jobscript lint` checks.
#PBS -q h-debug
#PBS -l select=1:mpiprocs=1:ompthreads=1
#PBS -W group_list=gt00
#PBS -l walltime=00:10:00
#PBS -N multi_gpu
#PBS -j oe

set -eu
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

# HOME on Lustre, PYTHONUSERBASE, modules, COURSE: env.sh (see README.md).
ENV_SH=${ENV_SH:-/lustre/$(id -ng)/${USER:-$(id -un)}/env.sh}
if [ -f "$ENV_SH" ]; then . "$ENV_SH"; else echo "note: no $ENV_SH; using the environment as it is"; fi
PYTHON=${PYTHON:-python}
DATASET=${DATASET:-synthetic}
GPUS=${GPUS:-0 1}
# EXTRA_ARGS: more flags for the training script, e.g. "--epoch 1" for a quick try.

TASK=train_cifar_multi_gpu.py
if [ ! -f "$TASK" ] && [ -n "${COURSE:-}" ]; then TASK=$COURSE/solutions/$TASK; fi
[ -f "$TASK" ] || { echo "no train_cifar_multi_gpu.py in $PWD nor in \$COURSE/solutions"; exit 2; }

# Versions first, as the seed's job.sh does.
"$PYTHON" -c "import chainer; print('chainer', chainer.__version__)"
"$PYTHON" -c "import cupy; print('cupy', cupy.__version__, 'nccl', cupy.cuda.nccl.get_version() if cupy.cuda.nccl.available else 'not available')" \
  || echo "cupy: not importable here (the CPU stand-in will run)"

"$PYTHON" "$TASK" --gpus 0 --dataset "$DATASET" --no-progress --out result/single ${EXTRA_ARGS:-}
"$PYTHON" "$TASK" --gpus $GPUS --dataset "$DATASET" --no-progress --out result/multi ${EXTRA_ARGS:-}
