#!/bin/bash
# handson-site: reedbush   (the rules `handson jobscript lint` applies; see jobscripts/README.md)
# Profiling run on Reedbush-H with nvprof, only when PROFILE=1: Task #2 on
# 1 node x 2 P100: 2 ranks, or Task #1 on the GPUs of one node.
#     qsub -v PROFILE=1 run_profile.sh                         # profile Task #2
#     qsub -v PROFILE=1,PROFILE_TASK=multi-gpu run_profile.sh  # profile Task #1
#     qsub run_profile.sh                                      # same run, no profiler
# One nvprof file per process: prof_<rank>_<pid>.nvvp (%q{OMPI_COMM_WORLD_RANK}, %p); with
# --profile-child-processes the updater's worker processes get their own files. Open them in
# NVIDIA Visual Profiler, or: handson profile summarize prof_0_<pid>.nvvp
# Replace the group gt00 below with yours (`id -ng`) first: `handson jobscript lint` checks.
#PBS -q h-short
#PBS -l select=1:mpiprocs=2:ompthreads=1
#PBS -W group_list=gt00
#PBS -l walltime=00:20:00
#PBS -N profile
#PBS -j oe

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
PROFILE_TASK=${PROFILE_TASK:-multi-node}

case "$PROFILE_TASK" in
  multi-node) TASK=train_cifar_multi_node.py ;;
  multi-gpu) TASK=train_cifar_multi_gpu.py ;;
  *) echo "PROFILE_TASK must be multi-node or multi-gpu, not $PROFILE_TASK"; exit 2 ;;
esac
# Your script, in the folder you submit from: yours is what runs, never a copy of the course's.
[ -f "$TASK" ] || { echo "no $TASK in $PWD: submit from the folder that holds your $TASK (or copy it here)"; exit 2; }

# One rank per line of the node file (select x mpiprocs); NP elsewhere (default 2).
if [ -n "${PBS_NODEFILE:-}" ] && [ -f "$PBS_NODEFILE" ]; then NP=$(wc -l < "$PBS_NODEFILE"); fi
NP=${NP:-2}

PROFILER=()
if [ "${PROFILE:-0}" = 1 ]; then
  if ! command -v nvprof > /dev/null 2>&1; then
    echo "PROFILE=1 but nvprof is not on PATH (module load cuda9/..., see env.sh): no profile taken"
    exit 3
  fi
  if [ "$PROFILE_TASK" = multi-node ]; then
    PROFILER=(nvprof --profile-child-processes -o "prof_%q{OMPI_COMM_WORLD_RANK}_%p.nvvp")
  else
    PROFILER=(nvprof --profile-child-processes -o "prof_%p.nvvp")
  fi
  echo "profiling with: ${PROFILER[*]}"
  # NVTX ranges forward / backward / allreduce / update on the timeline and their times in the
  # log (handson_lib.experiments.breakdown). 1 synchronises the GPU at each phase boundary; nvtx: ranges only.
  export HANDSON_PHASES=${HANDSON_PHASES:-1}
else
  echo "PROFILE is not 1: plain run (qsub -v PROFILE=1 to profile)"
  export HANDSON_PHASES=${HANDSON_PHASES:-0}
fi

GPU_FLAG=""
if "$PYTHON" -c "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 and cupy.cuda.nccl.available else 1)" 2>/dev/null; then
  GPU_FLAG="--gpu"
else
  echo "no usable GPU/NCCL here: CPU ranks with the naive communicator"
fi

if [ "$PROFILE_TASK" = multi-gpu ]; then
  ${PROFILER[@]+"${PROFILER[@]}"} "$PYTHON" "$TASK" --gpus 0 1 --dataset "$DATASET" --no-progress \
    --out result/profile_multi_gpu ${EXTRA_ARGS:-}
else
  mpiexec -n "$NP" \
    -x PATH -x LD_LIBRARY_PATH -x PYTHONUSERBASE -x PYTHONPATH -x OMP_NUM_THREADS -x HANDSON_PHASES \
    ${PROFILER[@]+"${PROFILER[@]}"} "$PYTHON" "$TASK" $GPU_FLAG --dataset "$DATASET" --no-progress \
    --out result/profile_multi_node ${EXTRA_ARGS:-}
fi
