#!/bin/bash
# Task #1 job script for Reedbush-H (2 x P100 per node, PBS Pro). Submit with:
#     qsub -j oe run_multi_gpu_training.sh
# (1) Complete the queue and resource lines: the h-debug queue, one node, one MPI process with one
#     OpenMP thread (MultiprocessParallelUpdater starts its own worker processes, one per GPU).
### BEGIN SOLUTION
#PBS -q h-debug
#PBS -l select=1:mpiprocs=1:ompthreads=1
### END SOLUTION
#PBS -W group_list=gt00
#PBS -l walltime=00:10:00
#PBS -N multi_gpu
# (2) Replace gt00 above with your own group (`id -ng`): left in, the placeholder group is an
#     error before qsub but costs no point in the graded check.

set -eu
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

# The site's environment (HOME the compute nodes see, PYTHONUSERBASE, modules, COURSE): env.sh.
ENV_SH=${ENV_SH:-/lustre/$(id -ng)/${USER:-$(id -un)}/env.sh}
if [ -f "$ENV_SH" ]; then . "$ENV_SH"; else echo "note: no $ENV_SH; using the environment as it is"; fi
export PYTHONUSERBASE=${PYTHONUSERBASE:-$HOME/.local} PYTHONPATH=${PYTHONPATH:-} LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
# One OpenMP thread per process unless the request says otherwise (PBS Pro sets it from ompthreads).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
PYTHON=${PYTHON:-python}
DATASET=${DATASET:-synthetic}
# EXTRA_ARGS: more flags for the training script, e.g. "--epoch 1" for a quick try.
# GPUs of the second run (the first uses GPU 0 alone): all of the node's by default.
GPUS=${GPUS:-0 1}

TASK=train_cifar_multi_gpu.py
# Your script, in the folder you submit from: yours is what runs, never a copy of the course's.
[ -f "$TASK" ] || { echo "no $TASK in $PWD: submit from the folder that holds your $TASK (or copy it here)"; exit 2; }

# Versions first, as the seed's job.sh does.
"$PYTHON" -c "import chainer; print('chainer', chainer.__version__)"
"$PYTHON" -c "import cupy; print('cupy', cupy.__version__, 'nccl', cupy.cuda.nccl.get_version() if cupy.cuda.nccl.available else 'not available')" 2>/dev/null \
  || echo "cupy: not importable here (the CPU stand-in will run)"

"$PYTHON" "$TASK" --gpus 0 --dataset "$DATASET" --no-progress --out result/single ${EXTRA_ARGS:-}
# A node with one GPU (Miyabi-G) has nothing to split: the 1-GPU run is all there is.
if [ "$(echo $GPUS | wc -w)" -gt 1 ]; then
  "$PYTHON" "$TASK" --gpus $GPUS --dataset "$DATASET" --no-progress --out result/multi ${EXTRA_ARGS:-}
fi
