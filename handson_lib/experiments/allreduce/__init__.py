"""`handson bench allreduce`: how close the ChainerMN gradient allreduce comes to the wire.

Seed 001 measured 8-9 Gibit/s point-to-point between two nodes but only ~5 Gibit/s inside the
allreduce of ResNet-50's L = 102,228,384 gradient bytes, counting the traffic of one rank as
2L(p-1)/p. This benchmark takes the same three measurements on the same ranks in one run:

- ``chainermn``: ``comm.multi_node_mean_grad(link)`` of the ``naive`` communicator (the only one
  that runs on NumPy) on a Chainer link whose gradients fill L bytes; for a model that is the
  model itself, so one ``MPI_Allreduce`` per parameter array, as in training;
- ``mpi4py``: one ``comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)`` over a float32 buffer of L bytes;
- ``mpi4py-inplace`` (with ``--in-place``): the same with ``MPI.IN_PLACE``, as ChainerMN calls it;
- ``p2p``: ping-pong ``Send`` / ``Recv`` of L bytes between rank 0 and the first rank on another
  node (rank 1 when all share one host), bandwidth
  L / (round trip / 2): the limit the allreduce is compared with.

Conventions of nccl-tests (doc/PERFORMANCE.md): algbw = S / t and, for allreduce, busbw = the bytes
one rank sends divided by the time, so that it can be set beside the point-to-point bandwidth. The
bytes one rank sends (seed 001's 2L(p-1)/p) are the caller's `traffic_rule(nbytes, p)`: notebook 04
asks the student for that rule, so this package has none of its own; the ranks measure times and
algbw, and `add_bus_bandwidth` turns them into busbw with the rule it is given (the instructor's
`handson bench allreduce` passes handson_lib.autograder.answers'). GB/s means 1e9 bytes/s; Gibit/s (the seed's "Gibps")
means 2**30 bits/s. Warm-up iterations are excluded; each timed iteration starts after a barrier
and its time is the slowest rank's; the paths take turns, one iteration each per round. Every
iteration (warm-up too) is checked against the known sum or mean of rank-dependent values, and
the check is reported beside the timing.

Test hook: ``HANDSON_BENCH_CORRUPT_RANK=R`` makes rank R add 1000 to the first element of each
array it contributes, so that the checks can be seen to fail.

Worker mode (what ``measure`` launches under the watchdog; run by hand it prints algbw only):
``mpiexec -n P python -m handson_lib.experiments.allreduce --worker [--model M | --bytes N | --sizes S]``.

The package: `units` (sizes, algbw, Gibit/s), `buffers` (what is allreduced and its checks),
`worker` (the ranks), `launcher` (`measure`), `bandwidth` (busbw, ratios), `report` (table,
figure), `command` (`handson bench allreduce`'s arguments and run), `model` (a cost model fitted
on the measurements, its intervals and residuals, and the training step it predicts: its terms are
the caller's, as the traffic rule is), `seed_link` (seed 001's allreduce as its text gives it). The
names below are the ones the notebooks, the autograder and the reports use.
"""

from handson_lib.experiments.allreduce.bandwidth import (add_bus_bandwidth, busbw_over_link,
                                                         link_bandwidth, link_rate_GBps, ratios)
from handson_lib.experiments.allreduce.buffers import (COURSE_INPUT_SHAPE, RTOL, build_gradient_link,
                                                       check_buffer, expected_mean, expected_sum)
from handson_lib.experiments.allreduce.command import add_arguments, run_command
from handson_lib.experiments.allreduce.launcher import measure
from handson_lib.experiments.allreduce.report import bandwidth_figure, format_table, report_title
from handson_lib.experiments.allreduce.units import (DEFAULT_MODEL, DEFAULT_SWEEP, IN_PLACE_PATH, PATH_LABELS,
                                                     PATHS, algbw, gbps_to_gibitps, human_bytes, parse_size,
                                                     parse_sizes)
from handson_lib.experiments.allreduce.worker import CORRUPT_ENV, p2p_partner, run_worker

__all__ = [
    "COURSE_INPUT_SHAPE", "CORRUPT_ENV", "DEFAULT_MODEL", "DEFAULT_SWEEP", "IN_PLACE_PATH", "PATHS",
    "PATH_LABELS", "RTOL", "add_arguments", "add_bus_bandwidth", "algbw", "bandwidth_figure",
    "build_gradient_link", "busbw_over_link", "check_buffer", "expected_mean", "expected_sum",
    "format_table", "gbps_to_gibitps", "human_bytes", "link_bandwidth", "link_rate_GBps", "measure",
    "p2p_partner", "parse_size", "parse_sizes", "ratios", "report_title", "run_command", "run_worker",
]
