#% One way to find the site's environment: ENV_SH, by default where the site's env.sh lives.
#% env.sh is the one place that sets HOME for the compute nodes (Lustre on Reedbush-H, /work on
#% Miyabi-G); a job script that guesses HOME itself drifts from it (solutions/ once did), and
#% ENV_SH moves with `qsub -v ENV_SH=...`.
# The site's environment (HOME the compute nodes see, PYTHONUSERBASE, modules, COURSE): env.sh.
ENV_SH=${ENV_SH:-{{ENV_SH}}}
if [ -f "$ENV_SH" ]; then . "$ENV_SH"; else echo "note: no $ENV_SH; using the environment as it is"; fi
#% Every variable passed with `mpiexec -x` must be set. PYTHONPATH goes to the ranks on every site:
#% env.sh puts $COURSE on it, and ranks on the other nodes import handson_lib from there (one copy
#% once left it out).
export PYTHONUSERBASE=${PYTHONUSERBASE:-$HOME/.local} PYTHONPATH=${PYTHONPATH:-} LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
#% OMP_NUM_THREADS is passed through with 1 as the default, never forced: PBS Pro sets it from the
#% request's ompthreads, so a job that asks for ompthreads=4 gets 4; unset, every process would
#% start one thread per core of the node (one copy once forced `-x OMP_NUM_THREADS=1`).
# One OpenMP thread per process unless the request says otherwise (PBS Pro sets it from ompthreads).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
PYTHON=${PYTHON:-python}
DATASET=${DATASET:-synthetic}
# EXTRA_ARGS: more flags for the training script, e.g. "--epoch 1" for a quick try.
