"""Keep the memory of one training step in the process (glibc's allocator), on the CPU.

A CPU training step of the course's CNN allocates and frees arrays of 1-40 MB (im2col buffers,
activations, gradients). With glibc's defaults those come from fresh `mmap`s and go back to the
kernel when freed, so every step faults its pages in again and the kernel zeroes them: at batch
128 that was ~400k page faults and a fifth of the run in system time, and two processes doing it
at once slow each other down through the memory bus (issue 18). Raising the allocator's
thresholds lets freed buffers be reused by the next step instead.

The numbers: arrays up to 32 MiB (the most glibc accepts) come from the heap instead of mmap,
the heap is never trimmed, and it grows 256 MiB at a time so that the larger buffers fit too.
`prefault()`, called when training starts (the throughput extension, the stand-in's workers),
touches that much heap once, so that the first timed steps do not pay for the faults either:
256 MiB resident per training process, none in a notebook that only imports the runtime.

HANDSON_MALLOC=0 leaves glibc's defaults (to measure the difference).
"""

import ctypes
import os

# mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

SETTINGS = ((M_MMAP_THRESHOLD, 32 * 2**20), (M_TRIM_THRESHOLD, 2**31 - 1), (M_TOP_PAD, 256 * 2**20))
ENV_VAR = "HANDSON_MALLOC"

#: what keep_freed_memory() did in this process: None (not called), True, or why not;
#: the pid that prefaulted its heap (a forked worker has its own copy to touch)
STATE = {"applied": None, "prefaulted_pid": None}
BLOCK = 16 * 2**20


def _libc():
    """The C library this process runs on (its own symbols: no ldconfig or compiler spawned)."""
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def keep_freed_memory(environ=None):
    """Apply SETTINGS with mallopt; True when applied, else a string that says why not."""
    env = os.environ if environ is None else environ
    if env.get(ENV_VAR, "1").strip().lower() in ("0", "off", "no", "false"):
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


def prefault(size=SETTINGS[2][1]):
    """Touch `size` bytes of heap and free them again (kept: the heap is never trimmed), once per
    process; True when done."""
    if STATE["applied"] is not True or STATE["prefaulted_pid"] == os.getpid():
        return False
    libc = _libc()
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = (ctypes.c_size_t,)
    libc.free.argtypes = (ctypes.c_void_p,)
    # Blocks under the mmap threshold come from the heap, and freed they merge into its top.
    blocks = [libc.malloc(BLOCK) for _ in range(size // BLOCK)]
    for block in blocks:
        if block:
            ctypes.memset(block, 0, BLOCK)
    for block in blocks:
        libc.free(block)
    STATE["prefaulted_pid"] = os.getpid()
    return True
