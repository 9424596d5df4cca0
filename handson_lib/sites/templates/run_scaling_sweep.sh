#% A scaling sweep (seed 001's measurement), rendered for every site into jobscripts/<site>/ by
#% `handson build`. Lines starting with #% stay here.
#!/bin/bash
# handson-site: {{SITE}}   (the rules `handson jobscript lint` applies; see jobscripts/README.md)
# Scaling sweep on {{TITLE}} (seed 001's measurement): Task #2 on 1, 2, 4, ... ranks
# within this allocation ({{REQUEST}}), one run each, every run's `Throughput:` line
# collected into result/scaling_<job>/throughput.tsv:
#     ranks  images_per_sec  images  seconds
# plus each run's log; a table with the speed-up is printed at the end.
{{USAGE}}
# Ranks fill a node before the next, so the smaller runs stay within one node.
{{GROUP_HINT}}
{{DIRECTIVES}}

set -eu -o pipefail
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

{{ENVIRONMENT}}

TASK={{MULTI_NODE_SCRIPT}}
{{FIND_TASK}}

{{RANKS}}
JOB=${PBS_JOBID:-manual}
OUT=${SWEEP_DIR:-result/scaling_${JOB%%.*}}
mkdir -p "$OUT"
TSV=$OUT/throughput.tsv
printf 'ranks\timages_per_sec\timages\tseconds\n' > "$TSV"

{{GPU_FLAG}}

SIZES=""
p=1
while [ "$p" -lt "$NP" ]; do SIZES="$SIZES $p"; p=$((p * 2)); done
SIZES="$SIZES $NP"

# HANDSON_PHASES=1 ({{PHASES_ON}}): every rank also times forward / backward /
# allreduce / update into $OUT/p<ranks>/phases_rank<r>.json (seed 001's breakdown), read by
# handson_lib.experiments.breakdown.load_sweep("$OUT"); it synchronises the GPU at each phase boundary.
export HANDSON_PHASES=${HANDSON_PHASES:-0}

for p in $SIZES; do
  echo "=== $p rank(s) of $NP"
  LOG=$OUT/p$p.log
  if {{LAUNCH_SWEEP}} \
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
