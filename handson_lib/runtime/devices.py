"""GPU detection, written once: how many CUDA devices CuPy sees, and whether NCCL can be used.

Every answer comes with the reason when it is "no" (CuPy does not import, CUDA fails, no device,
no NCCL library), so that the course can say on screen why it runs on the CPU.

CuPy is imported inside the functions, never when this module is imported: a CUDA context made
before MultiprocessParallelUpdater forks its workers breaks them (Chainer issue 4709).
"""

import importlib
import subprocess
import sys
from typing import NamedTuple

from handson_lib.messages import tr

#: What `nccl_library()` says when cupy.cuda.nccl imports without its library (BRIEF section 5).
NCCL_NOT_LOADED = ("cupy.cuda.nccl imports but cupy.cuda.nccl.available is False (libnccl not "
                   "loaded; `pip install nvidia-nccl-cu12` for CuPy >= 13.5)")


class GpuCount(NamedTuple):
    count: int
    reason: str          # why there is no GPU; "" when count > 0


class NcclLibrary(NamedTuple):
    available: bool
    reason: str          # why NCCL cannot be used; "" when available
    version: int = None  # NCCL's version code (21803 is 2.18.3) when available and readable
    version_error: str = ""


def describe_error(exc, limit=160):
    """`Type: first line of the message`, shortened to `limit` characters."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def import_cupy():
    """(the cupy module, "") or (None, why it does not import). Never raises."""
    try:
        return importlib.import_module("cupy"), ""
    except Exception as err:  # ImportError, or a CUDA library that fails to load
        return None, describe_error(err)


def gpu_count():
    """GpuCount: the CUDA devices CuPy sees, and why there are none. Never raises."""
    cupy, error = import_cupy()
    if cupy is None:
        return GpuCount(0, tr("CuPy is not available ({error})", error=error))
    try:
        count = int(importlib.import_module("cupy.cuda.runtime").getDeviceCount())
    except Exception as err:  # no driver, driver too old, no device node: CUDA fails
        return GpuCount(0, tr("CUDA fails ({error})", error=describe_error(err)))
    if count < 1:
        return GpuCount(0, "no CUDA device (getDeviceCount() == 0)")
    return GpuCount(count, "")


#: Run in a child process by `gpu_count_apart`: prints the device count, or the error.
_COUNT_IN_CHILD = """
try:
    import cupy.cuda.runtime as runtime
    print(int(runtime.getDeviceCount()))
except Exception as err:
    print("error", type(err).__name__ + ": " + (str(err).strip().splitlines() or [""])[0])
"""


def gpu_count_apart(timeout=120):
    """GpuCount as gpu_count(), counted in a child process, so that CUDA stays uninitialised here.

    cudaGetDeviceCount initialises the driver, after which Chainer's MultiprocessParallelUpdater
    (multiprocess_parallel_updater.py:130-137: ctxGetCurrent no longer raises) refuses to fork its
    workers. Never raises."""
    cupy, error = import_cupy()     # importing CuPy initialises nothing
    if cupy is None:
        return GpuCount(0, tr("CuPy is not available ({error})", error=error))
    try:
        out = subprocess.run([sys.executable, "-c", _COUNT_IN_CHILD], capture_output=True, text=True,
                             timeout=timeout, stdin=subprocess.DEVNULL).stdout.strip().splitlines()
    except (OSError, subprocess.TimeoutExpired) as err:
        return GpuCount(0, tr("CUDA fails (counting GPUs: {error})", error=describe_error(err)))
    last = out[-1] if out else "error no answer"
    if last.startswith("error"):
        return GpuCount(0, tr("CUDA fails ({error})", error=last[len('error '):]))
    count = int(last)
    return GpuCount(count, "") if count > 0 else GpuCount(0, "no CUDA device (getDeviceCount() == 0)")


def nccl_library():
    """NcclLibrary: whether CuPy's NCCL binding has its library. Never raises.

    `import cupy.cuda.nccl` succeeds even without libnccl, and Chainer's updater then fails with
    `AttributeError: ... get_unique_id`: only `cupy.cuda.nccl.available` tells."""
    cupy, error = import_cupy()
    if cupy is None:
        return NcclLibrary(False, tr("CuPy is not available ({error})", error=error))
    try:
        nccl = importlib.import_module("cupy.cuda.nccl")
    except Exception as err:
        return NcclLibrary(False, tr("cupy.cuda.nccl does not import ({error})", error=describe_error(err)))
    if not getattr(nccl, "available", False):
        return NcclLibrary(False, NCCL_NOT_LOADED)
    try:
        return NcclLibrary(True, "", version=int(nccl.get_version()))
    except Exception as err:
        return NcclLibrary(True, "", version_error=describe_error(err))


def nccl_status(count=gpu_count):
    """(usable, reason): what Chainer's MultiprocessParallelUpdater needs: a GPU and NCCL. `count`:
    how the GPUs are counted (`gpu_count_apart` where CUDA must stay uninitialised)."""
    nccl = nccl_library()
    if not nccl.available:
        return False, nccl.reason
    gpus = count()
    if gpus.count < 1:
        return False, gpus.reason
    return True, tr("{n} GPU(s), NCCL available", n=gpus.count)
