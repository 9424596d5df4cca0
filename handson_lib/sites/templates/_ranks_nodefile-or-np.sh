# One rank per line of the node file (select x mpiprocs); NP elsewhere (default 2).
if [ -n "${PBS_NODEFILE:-}" ] && [ -f "$PBS_NODEFILE" ]; then NP=$(wc -l < "$PBS_NODEFILE"); fi
NP=${NP:-2}
