"""`mpiexec -n P python -m handson_lib.experiments.breakdown --worker ...`: one rank of `measure`;
without --worker it points at `handson profile breakdown`."""

import sys

from handson_lib.experiments.breakdown.worker import _worker

if __name__ == "__main__":
    if "--worker" in sys.argv[1:]:
        sys.exit(_worker(sys.argv[1:]))
    sys.exit("run `handson profile breakdown` (this module's entry point for ranks is --worker)")
