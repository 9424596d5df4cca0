"""`mpiexec -n P python -m handson_lib.experiments.allreduce --worker ...`: one rank of the
benchmark (what `measure` launches; run by hand it prints the table with algbw only)."""

import sys

from handson_lib.experiments.allreduce.worker import run_worker

if __name__ == "__main__":
    sys.exit(run_worker())
