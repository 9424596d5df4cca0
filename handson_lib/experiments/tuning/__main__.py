"""`python -m handson_lib.experiments.tuning`: the training script that `run_levers` starts for
every run of every step."""

import sys

from handson_lib.experiments.tuning.worker import worker_main

if __name__ == "__main__":
    sys.exit(worker_main())
