#!/bin/bash
# handson-site: cloud   (the rules `handson jobscript lint` applies; see jobscripts/README.md)
# Task #1 on hostfile cloud cluster (seed 001): one node, MultiprocessParallelUpdater on its 4 x TITAN X (Pascal) (one MPI
# process: the updater starts one worker process per GPU). Submit from the folder that holds
# your train_cifar_multi_gpu.py:
#     bash run_multi_gpu_training.sh
#PBS -q workq
#PBS -l select=1:mpiprocs=1:ompthreads=1
#PBS -l walltime=00:10:00
#PBS -N multi_gpu
#PBS -j oe

set -eu
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

# The site's environment (HOME the compute nodes see, PYTHONUSERBASE, modules, COURSE): env.sh.
ENV_SH=${ENV_SH:-$HOME/env.sh}
if [ -f "$ENV_SH" ]; then . "$ENV_SH"; else echo "note: no $ENV_SH; using the environment as it is"; fi
export PYTHONUSERBASE=${PYTHONUSERBASE:-$HOME/.local} PYTHONPATH=${PYTHONPATH:-} LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
# One OpenMP thread per process unless the request says otherwise (PBS Pro sets it from ompthreads).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
PYTHON=${PYTHON:-python}
DATASET=${DATASET:-synthetic}
# EXTRA_ARGS: more flags for the training script, e.g. "--epoch 1" for a quick try.
# GPUs of the second run (the first uses GPU 0 alone): all of the node's by default.
GPUS=${GPUS:-0 1 2 3}

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
