#!/bin/bash
# Task #1 job script for Reedbush-H (2 x P100 per node, PBS Pro). Submit with:
#     qsub -j oe run_multi_gpu_training.sh
# (1) Complete the queue and resource lines: the h-debug queue, one node, one MPI process
#     (MultiprocessParallelUpdater starts its own worker processes, one per GPU).
### BEGIN SOLUTION
#PBS -q h-debug
#PBS -l select=1:mpiprocs=1
### END SOLUTION
#PBS -W group_list=gt00
#PBS -l walltime=00:10:00
#PBS -N multi_gpu
# (2) Replace gt00 above with your own group (`id -ng`); `handson jobscript lint` refuses it otherwise.

set -eu
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

# Compute nodes do not see HOME on Reedbush: Lustre serves as HOME (seed: env.sh).
if [ -d "/lustre/$(id -ng)/${USER:-$(id -un)}" ]; then
  export HOME="/lustre/$(id -ng)/${USER:-$(id -un)}"
fi
if [ -f "${HOME}/env.sh" ]; then . "${HOME}/env.sh"; fi
PYTHON=${PYTHON:-python}
DATASET=${DATASET:-synthetic}
# EXTRA_ARGS: more flags for the training script, e.g. "--epoch 1" for a quick try.

# Versions first, as the seed's job.sh does.
"$PYTHON" -c "import chainer; print('chainer', chainer.__version__)"
"$PYTHON" -c "import cupy; print('cupy', cupy.__version__, 'nccl', cupy.cuda.nccl.get_version() if cupy.cuda.nccl.available else 'not available')" \
  || echo "cupy: not importable here (the CPU stand-in will run)"

"$PYTHON" train_cifar_multi_gpu.py --gpus 0 --dataset "$DATASET" --no-progress --out result/single ${EXTRA_ARGS:-}
"$PYTHON" train_cifar_multi_gpu.py --gpus 0 1 --dataset "$DATASET" --no-progress --out result/multi ${EXTRA_ARGS:-}
