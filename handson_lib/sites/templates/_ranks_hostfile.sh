# The hostfile: PBS's node file inside a job, else $HOSTFILE (default ./hostfile).
if [ -n "${PBS_NODEFILE:-}" ]; then HOSTFILE=$PBS_NODEFILE; else HOSTFILE=${HOSTFILE:-hostfile}; fi
[ -f "$HOSTFILE" ] || { echo "no hostfile $HOSTFILE: one line per node, e.g. '192.168.0.1 slots=4'"; exit 2; }
# Ranks: the slots of all nodes (a line without slots= is one); per node: PPN.
NP=${NP:-$(awk '!/^#/ && NF {n += ($2 ~ /^slots=/) ? substr($2, 7) : 1} END {print n}' "$HOSTFILE")}
NNODES=$(awk '!/^#/ && NF {print $1}' "$HOSTFILE" | sort -u | wc -l)
PPN=${PPN:-$(( (NP + NNODES - 1) / NNODES ))}
