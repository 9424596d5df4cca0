"""Keep the memory of one training step in the process (glibc's allocator), on the CPU.

A CPU training step of the course's CNN allocates and frees arrays of 1-40 MB (im2col buffers,
activations, gradients). With glibc's defaults those come from fresh `mmap`s and go back to the
kernel when freed, so every step faults its pages in again and the kernel zeroes them: at batch
128 that was ~400k page faults and a fifth of the run in system time, and two processes doing it
at once slow each other down through the memory bus. Raising the allocator's
thresholds lets freed buffers be reused by the next step instead.

The numbers: arrays up to 32 MiB (the most glibc accepts) come from the heap instead of mmap,
the heap is never trimmed, and it grows 256 MiB at a time so that the larger buffers fit too.
Pages are still touched once, in the first steps, which the throughput meter leaves out as
warm-up: after two steps at batch 32 or 128 a step faults in a handful of pages, not thousands
(a test of the course). Touching the heap in advance would cost every short run (the grader's)
CPU and resident memory for nothing.

HANDSON_MALLOC=0 leaves glibc's defaults (to measure the difference).
"""

import ctypes

from handson_lib import settings

# mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

SETTINGS = ((M_MMAP_THRESHOLD, 32 * 2**20), (M_TRIM_THRESHOLD, 2**31 - 1), (M_TOP_PAD, 256 * 2**20))
ENV_VAR = settings.variable("malloc")

#: what keep_freed_memory() did in this process: None (not called), True, or why not
STATE = {"applied": None}


def _libc():
    """The C library this process runs on (its own symbols: no ldconfig or compiler spawned)."""
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def keep_freed_memory(environ=None):
    """Apply SETTINGS with mallopt; True when applied, else a string that says why not."""
    if (settings.read(environ).malloc or "1").strip().lower() in ("0", "off", "no", "false"):
        STATE["applied"] = f"{ENV_VAR}=0: glibc's default allocator settings"
        return STATE["applied"]
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        STATE["applied"] = "no glibc mallopt on this system (macOS, musl): allocator left as it is"
        return STATE["applied"]
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    refused = [param for param, value in SETTINGS if mallopt(param, value) != 1]
    STATE["applied"] = True if not refused else f"mallopt refused parameters {refused}"
    return STATE["applied"]
