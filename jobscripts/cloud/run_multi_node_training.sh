#!/bin/bash
# handson-site: cloud   (the rules `handson jobscript lint` applies; see jobscripts/README.md)
# Task #2 (ChainerMN) on a hostfile cloud cluster (seed 001): 2 nodes x 4 GPUs, one MPI process
# per GPU: 8 ranks. No scheduler there: write the hostfile (see env.sh), then on the head node
#     bash run_multi_node_training.sh          # HOSTFILE=... to use another one
# in the folder with your train_cifar_multi_node.py (else $COURSE/solutions/). Under PBS
# (`qsub`, or `handson jobscript run`) the node file is the hostfile.
#PBS -q workq
#PBS -l select=2:mpiprocs=4
#PBS -l walltime=00:15:00
#PBS -N multi_node
#PBS -j oe

set -eu
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

ENV_SH=${ENV_SH:-$HOME/env.sh}
if [ -f "$ENV_SH" ]; then . "$ENV_SH"; else echo "note: no $ENV_SH; using the environment as it is"; fi
export PYTHONUSERBASE=${PYTHONUSERBASE:-$HOME/.local} PYTHONPATH=${PYTHONPATH:-} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
PYTHON=${PYTHON:-python}
DATASET=${DATASET:-synthetic}

TASK=train_cifar_multi_node.py
if [ ! -f "$TASK" ] && [ -n "${COURSE:-}" ]; then TASK=$COURSE/solutions/$TASK; fi
[ -f "$TASK" ] || { echo "no train_cifar_multi_node.py in $PWD nor in \$COURSE/solutions"; exit 2; }

# The hostfile: PBS's node file inside a job, else $HOSTFILE (default ./hostfile).
if [ -n "${PBS_NODEFILE:-}" ]; then HOSTFILE=$PBS_NODEFILE; else HOSTFILE=${HOSTFILE:-hostfile}; fi
[ -f "$HOSTFILE" ] || { echo "no hostfile $HOSTFILE: one line per node, e.g. '192.168.0.1 slots=4'"; exit 2; }
# Ranks: the slots of all nodes (a line without slots= is one); per node: PPN.
NP=${NP:-$(awk '!/^#/ && NF {n += ($2 ~ /^slots=/) ? substr($2, 7) : 1} END {print n}' "$HOSTFILE")}
NNODES=$(awk '!/^#/ && NF {print $1}' "$HOSTFILE" | sort -u | wc -l)
PPN=${PPN:-$(( (NP + NNODES - 1) / NNODES ))}

"$PYTHON" -c "import chainer; print('chainer', chainer.__version__)"
GPU_FLAG=""
if "$PYTHON" -c "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 and cupy.cuda.nccl.available else 1)" 2>/dev/null; then
  GPU_FLAG="--gpu"
else
  echo "no usable GPU/NCCL here: CPU ranks with the naive communicator"
fi

# seed 001: --map-by ppr:4:node, or Open MPI may start one process per node only.
mpiexec -n "$NP" --hostfile "$HOSTFILE" --map-by ppr:${PPN}:node \
  -x PATH -x LD_LIBRARY_PATH -x PYTHONUSERBASE -x PYTHONPATH -x OMP_NUM_THREADS \
  "$PYTHON" "$TASK" $GPU_FLAG --dataset "$DATASET" --no-progress --out result/multi_node ${EXTRA_ARGS:-}
