"""What student scripts import: MPI start-up, the CPU stand-in of MultiprocessParallelUpdater,
flags, offline data, `require_done`, the throughput line, models, phase timing.

`__all__` is the contract: the names a student script may use as `runtime.NAME` after
`from handson_lib import runtime`. Importing it imports Chainer, never matplotlib nor CuPy
(MultiprocessParallelUpdater forks: see handson_lib.runtime.mpi).

Importing it also keeps freed training buffers in the process (handson_lib.runtime.memory):
it must happen before the first training step, and every script imports this first.
"""

from handson_lib.runtime import memory

from handson_lib.runtime.models import MLP, get_model
from handson_lib.runtime.mpi import prepare_rank
from handson_lib.runtime.multigpu import evaluation_device, install_parallel_updater, single_device
from handson_lib.runtime.throughput import throughput_extension
from handson_lib.runtime.training import (add_common_arguments, instrument_phases, load_data,
                                          print_banner, require_done, seed_everything)

memory.keep_freed_memory()

__all__ = [
    # flags, seeds and data (offline: synthetic, digits, CIFAR-10 files)
    "add_common_arguments", "seed_everything", "load_data",
    # models
    "get_model", "MLP",
    # Task #1: MultiprocessParallelUpdater where GPUs and NCCL exist, the CPU stand-in elsewhere
    "install_parallel_updater", "single_device", "evaluation_device",
    # Task #2: forkserver, refused communicators, abort of all ranks on one rank's exception
    "prepare_rank",
    # a clear message for an unfinished `# PUT YOUR CODE HERE`, the banner, the Throughput line
    "require_done", "print_banner", "throughput_extension",
    # phase times and NVTX ranges when HANDSON_PHASES is set (profiling job scripts)
    "instrument_phases",
]
