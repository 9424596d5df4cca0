# Ranks: one per line of the node file (select x mpiprocs); per node: PPN.
NODEFILE=${PBS_NODEFILE:?run me with qsub, or with handson jobscript run}
NP=$(wc -l < "$NODEFILE")
PPN=$(( NP / $(sort -u "$NODEFILE" | wc -l) ))
