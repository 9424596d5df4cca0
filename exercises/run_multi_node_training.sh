#!/bin/bash
# Task #2 job script for Reedbush-H (2 x P100 per node, PBS Pro). Submit with:
#     qsub -j oe run_multi_node_training.sh
# (1) Complete the queue and resource lines: the h-debug queue, 2 nodes with 2 MPI processes each
#     (one per GPU) and one OpenMP thread per process: 4 ranks in all.
# PUT YOUR CODE HERE
#PBS -W group_list=gt00
#PBS -l walltime=00:15:00
#PBS -N multi_node
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

TASK=train_cifar_multi_node.py
# Your script, in the folder you submit from: yours is what runs, never a copy of the course's.
[ -f "$TASK" ] || { echo "no $TASK in $PWD: submit from the folder that holds your $TASK (or copy it here)"; exit 2; }

# One rank per line of the node file (select x mpiprocs); NP elsewhere (default 2).
if [ -n "${PBS_NODEFILE:-}" ] && [ -f "$PBS_NODEFILE" ]; then NP=$(wc -l < "$PBS_NODEFILE"); fi
NP=${NP:-2}

# Versions first, as the seed's job.sh does.
"$PYTHON" -c "import chainer; print('chainer', chainer.__version__)"
GPU_FLAG=""
if "$PYTHON" -c "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 and cupy.cuda.nccl.available else 1)" 2>/dev/null; then
  GPU_FLAG="--gpu"
else
  echo "no usable GPU/NCCL here: CPU ranks with the naive communicator"
fi

# -x passes the variables to the ranks on the other node (seed 000's job.sh); Reedbush's
# Open MPI reads the nodes from PBS itself.
mpiexec -n "$NP" \
  -x PATH -x LD_LIBRARY_PATH -x PYTHONUSERBASE -x PYTHONPATH -x OMP_NUM_THREADS \
  "$PYTHON" "$TASK" $GPU_FLAG --dataset "$DATASET" --no-progress --out result/multi_node ${EXTRA_ARGS:-}
