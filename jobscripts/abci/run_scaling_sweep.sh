#!/bin/bash
# handson-site: abci   (the rules `handson jobscript lint` applies; see jobscripts/README.md)
# Scaling sweep on ABCI 3.0 (seed 001's measurement): Task #2 on 1, 2, 4, ... ranks
# within this allocation (4 nodes x 8 H200: 32 ranks), one run each, every run's `Throughput:` line
# collected into result/scaling_<job>/throughput.tsv:
#     ranks  images_per_sec  images  seconds
# plus each run's log; a table with the speed-up is printed at the end.
#     qsub run_scaling_sweep.sh
# Ranks fill a node before the next, so the smaller runs stay within one node.
# Replace the group grpname below with your ABCI group first: `handson jobscript lint` checks.
#PBS -q rt_HF
#PBS -l select=4:mpiprocs=8:ompthreads=1
#PBS -P grpname
#PBS -l walltime=01:00:00
#PBS -N scaling
#PBS -j oe

set -eu -o pipefail
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

TASK=train_cifar_multi_node.py
# Your script, in the folder you submit from: yours is what runs, never a copy of the course's.
[ -f "$TASK" ] || { echo "no $TASK in $PWD: submit from the folder that holds your $TASK (or copy it here)"; exit 2; }

# Ranks: one per line of the node file (select x mpiprocs); per node: PPN.
NODEFILE=${PBS_NODEFILE:?run me with qsub, or with handson jobscript run}
NP=$(wc -l < "$NODEFILE")
PPN=$(( NP / $(sort -u "$NODEFILE" | wc -l) ))
JOB=${PBS_JOBID:-manual}
OUT=${SWEEP_DIR:-result/scaling_${JOB%%.*}}
mkdir -p "$OUT"
TSV=$OUT/throughput.tsv
printf 'ranks\timages_per_sec\timages\tseconds\n' > "$TSV"

GPU_FLAG=""
if "$PYTHON" -c "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 and cupy.cuda.nccl.available else 1)" 2>/dev/null; then
  GPU_FLAG="--gpu"
else
  echo "no usable GPU/NCCL here: CPU ranks with the naive communicator"
fi

SIZES=""
p=1
while [ "$p" -lt "$NP" ]; do SIZES="$SIZES $p"; p=$((p * 2)); done
SIZES="$SIZES $NP"

# HANDSON_PHASES=1 (qsub -v HANDSON_PHASES=1 run_scaling_sweep.sh): every rank also times forward / backward /
# allreduce / update into $OUT/p<ranks>/phases_rank<r>.json (seed 001's breakdown), read by
# handson_lib.experiments.breakdown.load_sweep("$OUT"); it synchronises the GPU at each phase boundary.
export HANDSON_PHASES=${HANDSON_PHASES:-0}

for p in $SIZES; do
  echo "=== $p rank(s) of $NP"
  LOG=$OUT/p$p.log
  if mpirun -np "$p" -hostfile "$NODEFILE" --map-by ppr:${PPN}:node \
      -x PATH -x LD_LIBRARY_PATH -x PYTHONUSERBASE -x PYTHONPATH -x OMP_NUM_THREADS -x HANDSON_PHASES \
      "$PYTHON" "$TASK" $GPU_FLAG --dataset "$DATASET" --no-progress --out "$OUT/p$p" \
      ${EXTRA_ARGS:-} 2>&1 | tee "$LOG"; then
    :
  else
    echo "run on $p rank(s) failed: see $LOG"
  fi
  # Throughput: X [images/sec.] (N / T)
  awk -v p="$p" '/^Throughput:/ {gsub(/[()]/, ""); line = p "\t" $2 "\t" $4 "\t" $6}
                 END {if (!line) line = p "\tNA\tNA\tNA"; print line}' "$LOG" >> "$TSV"
done

echo "=== throughput ($TSV)"
awk -F'\t' 'NR == 1 {print $0 "\tspeedup"; next}
            NR == 2 {base = $2}
            {printf "%s\t%s\n", $0, ($2 != "NA" && base != "NA" && base > 0) ? sprintf("%.2f", $2 / base) : "NA"}' "$TSV"
