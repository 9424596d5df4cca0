#!/bin/bash
# Task #2 job script for Reedbush-H (2 x P100 per node, PBS Pro). Submit with:
#     qsub -j oe run_multi_node_training.sh
# (1) Complete the queue and resource lines: the h-debug queue, 2 nodes with 2 MPI processes each
#     (one per GPU) and one OpenMP thread per process: 4 ranks in all.
# PUT YOUR CODE HERE
#PBS -W group_list=gt00
#PBS -l walltime=00:15:00
#PBS -N multi_node
# (2) Replace gt00 above with your own group (`id -ng`); `handson jobscript lint` refuses it otherwise.

set -eu
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

# Compute nodes do not see HOME on Reedbush: Lustre serves as HOME (seed: env.sh).
if [ -d "/lustre/$(id -ng)/${USER:-$(id -un)}" ]; then
  export HOME="/lustre/$(id -ng)/${USER:-$(id -un)}"
fi
if [ -f "${HOME}/env.sh" ]; then . "${HOME}/env.sh"; fi
export PYTHONUSERBASE=${PYTHONUSERBASE:-${HOME}/.local}
PYTHON=${PYTHON:-python}
DATASET=${DATASET:-synthetic}
# EXTRA_ARGS: more flags for the training script, e.g. "--epoch 1" for a quick try.

# One rank per line of the node file (select x mpiprocs); NP elsewhere (default 2).
if [ -n "${PBS_NODEFILE:-}" ] && [ -f "${PBS_NODEFILE}" ]; then NP=$(wc -l < "${PBS_NODEFILE}"); fi
NP=${NP:-2}

# Versions first, as the seed's job.sh does.
"$PYTHON" -c "import chainer; print('chainer', chainer.__version__)"
GPU_FLAG=""
if "$PYTHON" -c "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 and cupy.cuda.nccl.available else 1)" 2>/dev/null; then
  "$PYTHON" -c "import cupy; print('cupy', cupy.__version__, 'nccl', cupy.cuda.nccl.get_version())"
  GPU_FLAG="--gpu"
else
  echo "no usable GPU/NCCL here: CPU ranks with the naive communicator"
fi

mpiexec -n "$NP" -x PYTHONUSERBASE -x PATH -x OMP_NUM_THREADS=1 \
  "$PYTHON" train_cifar_multi_node.py $GPU_FLAG --dataset "$DATASET" --no-progress --out result/multi_node ${EXTRA_ARGS:-}
