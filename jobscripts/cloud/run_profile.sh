#!/bin/bash
# handson-site: cloud   (the rules `handson jobscript lint` applies; see jobscripts/README.md)
# Profiling run on hostfile cloud cluster (seed 001) with nsys, only when PROFILE=1: Task #2 on
# 1 node x 4 TITAN X (Pascal): 4 ranks, or Task #1 on the GPUs of one node.
#     PROFILE=1 bash run_profile.sh                         # profile Task #2
#     PROFILE=1 PROFILE_TASK=multi-gpu bash run_profile.sh  # profile Task #1
#     bash run_profile.sh                                   # same run, no profiler
# Nsight Systems: nvprof refuses GPUs of compute capability 8.0 and newer; nsys covers all.
# One report per rank: prof_<rank>.nsys-rep plus its SQLite export prof_<rank>.sqlite
# (%q{OMPI_COMM_WORLD_RANK}; Task #1: prof_multi_gpu.*); read it with:
#     handson profile summarize prof_0.sqlite --plot prof_0.png
# Without the .sqlite (export failed, or an older report), export by hand:
#     nsys export --type sqlite -o prof_0.sqlite prof_0.nsys-rep
#PBS -q workq
#PBS -l select=1:mpiprocs=4:ompthreads=1
#PBS -l walltime=00:20:00
#PBS -N profile
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
PROFILE_TASK=${PROFILE_TASK:-multi-node}

case "$PROFILE_TASK" in
  multi-node) TASK=train_cifar_multi_node.py ;;
  multi-gpu) TASK=train_cifar_multi_gpu.py ;;
  *) echo "PROFILE_TASK must be multi-node or multi-gpu, not $PROFILE_TASK"; exit 2 ;;
esac
# Your script, in the folder you submit from: yours is what runs, never a copy of the course's.
[ -f "$TASK" ] || { echo "no $TASK in $PWD: submit from the folder that holds your $TASK (or copy it here)"; exit 2; }

# The hostfile: PBS's node file inside a job, else $HOSTFILE (default ./hostfile).
if [ -n "${PBS_NODEFILE:-}" ]; then HOSTFILE=$PBS_NODEFILE; else HOSTFILE=${HOSTFILE:-hostfile}; fi
[ -f "$HOSTFILE" ] || { echo "no hostfile $HOSTFILE: one line per node, e.g. '192.168.0.1 slots=4'"; exit 2; }
# Ranks: the slots of all nodes (a line without slots= is one); per node: PPN.
NP=${NP:-$(awk '!/^#/ && NF {n += ($2 ~ /^slots=/) ? substr($2, 7) : 1} END {print n}' "$HOSTFILE")}
NNODES=$(awk '!/^#/ && NF {print $1}' "$HOSTFILE" | sort -u | wc -l)
PPN=${PPN:-$(( (NP + NNODES - 1) / NNODES ))}

PROFILER=()
if [ "${PROFILE:-0}" = 1 ]; then
  if ! command -v nsys > /dev/null 2>&1; then
    echo "PROFILE=1 but nsys is not on PATH (install Nsight Systems, see env.sh): no profile taken"
    exit 3
  fi
  if [ "$PROFILE_TASK" = multi-node ]; then
    PROFILER=(nsys profile -o "prof_%q{OMPI_COMM_WORLD_RANK}" --trace=cuda,nvtx,osrt,mpi
              --mpi-impl=openmpi --export=sqlite --force-overwrite=true)
  else
    # MultiprocessParallelUpdater forks its workers without exec: without
    # --trace-fork-before-exec their kernels are missing from the report.
    PROFILER=(nsys profile -o prof_multi_gpu --trace=cuda,nvtx,osrt --trace-fork-before-exec=true
              --export=sqlite --force-overwrite=true)
  fi
  echo "profiling with: ${PROFILER[*]}"
  # NVTX ranges forward / backward / allreduce / update on the timeline and their times in the
  # log (handson_lib.experiments.breakdown). 1 synchronises the GPU at each phase boundary; nvtx: ranges only.
  export HANDSON_PHASES=${HANDSON_PHASES:-1}
else
  echo "PROFILE is not 1: plain run (PROFILE=1 to profile)"
  export HANDSON_PHASES=${HANDSON_PHASES:-0}
fi

GPU_FLAG=""
if "$PYTHON" -c "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 and cupy.cuda.nccl.available else 1)" 2>/dev/null; then
  GPU_FLAG="--gpu"
else
  echo "no usable GPU/NCCL here: CPU ranks with the naive communicator"
fi

if [ "$PROFILE_TASK" = multi-gpu ]; then
  ${PROFILER[@]+"${PROFILER[@]}"} "$PYTHON" "$TASK" --gpus 0 1 2 3 --dataset "$DATASET" --no-progress \
    --out result/profile_multi_gpu ${EXTRA_ARGS:-}
else
  mpiexec -n "$NP" --hostfile "$HOSTFILE" --map-by ppr:${PPN}:node \
    -x PATH -x LD_LIBRARY_PATH -x PYTHONUSERBASE -x PYTHONPATH -x OMP_NUM_THREADS -x HANDSON_PHASES \
    ${PROFILER[@]+"${PROFILER[@]}"} "$PYTHON" "$TASK" $GPU_FLAG --dataset "$DATASET" --no-progress \
    --out result/profile_multi_node ${EXTRA_ARGS:-}
fi
