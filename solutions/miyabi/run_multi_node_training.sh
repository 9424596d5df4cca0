#!/bin/bash
# handson-site: miyabi   (your site: lint, `handson check` and the grader apply its rules)
# Task #2 job script for Miyabi-G (one GH200 per node, PBS Pro). Submit with:
#     qsub -j oe run_multi_node_training.sh
# (1) Complete the queue and resource lines: the debug-g queue, 4 nodes with 1 MPI process each
#     (one per GPU) and one OpenMP thread per process: 4 ranks in all.
### BEGIN SOLUTION
#PBS -q debug-g
#PBS -l select=4:mpiprocs=1:ompthreads=1
### END SOLUTION
#PBS -W group_list=xx00
#PBS -l walltime=00:15:00
#PBS -N multi_node
# (2) Replace xx00 above with your own group (`id -ng`): left in, the placeholder group is an
#     error before qsub but costs no point in the graded check.

set -eu
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

# The site's environment (HOME the compute nodes see, PYTHONUSERBASE, modules, COURSE): env.sh.
ENV_SH=${ENV_SH:-/work/$(id -ng)/${USER:-$(id -un)}/env.sh}
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

# Ranks: one per line of the node file (select x mpiprocs); per node: PPN.
NODEFILE=${PBS_NODEFILE:?run me with qsub, or with handson jobscript run}
NP=$(wc -l < "$NODEFILE")
PPN=$(( NP / $(sort -u "$NODEFILE" | wc -l) ))

# Versions first, as the seed's job.sh does.
"$PYTHON" -c "import chainer; print('chainer', chainer.__version__)"
GPU_FLAG=""
if "$PYTHON" -c "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 and cupy.cuda.nccl.available else 1)" 2>/dev/null; then
  GPU_FLAG="--gpu"
else
  echo "no usable GPU/NCCL here: CPU ranks with the naive communicator"
fi

# HPC-X's Open MPI reads the nodes from PBS; the node file and ppr say it explicitly.
mpirun -n "$NP" --hostfile "$NODEFILE" --map-by ppr:${PPN}:node \
  -x PATH -x LD_LIBRARY_PATH -x PYTHONUSERBASE -x PYTHONPATH -x OMP_NUM_THREADS \
  "$PYTHON" "$TASK" $GPU_FLAG --dataset "$DATASET" --no-progress --out result/multi_node ${EXTRA_ARGS:-}
