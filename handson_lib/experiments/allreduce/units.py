"""The benchmark's paths and units: message sizes as written on the command line, algbw, and
GB/s against the seed's Gibit/s."""

PATHS = ("chainermn", "mpi4py", "p2p")


#: Measured with --in-place only: nccl-tests reports in-place beside out-of-place too.
IN_PLACE_PATH = "mpi4py-inplace"


PATH_LABELS = {
    "chainermn": "ChainerMN naive multi_node_mean_grad",
    "mpi4py": "mpi4py Allreduce (one buffer)",
    IN_PLACE_PATH: "mpi4py Allreduce IN_PLACE (one buffer)",
    "p2p": "point-to-point, rank 0 <-> a rank on another node (else rank 1)",
}

DEFAULT_MODEL = "resnet50"

DEFAULT_SWEEP = "1K:64M"

_UNITS = {"K": 2 ** 10, "KI": 2 ** 10, "KIB": 2 ** 10, "M": 2 ** 20, "MI": 2 ** 20, "MIB": 2 ** 20,
          "G": 2 ** 30, "GI": 2 ** 30, "GIB": 2 ** 30, "B": 1, "": 1}


def algbw(nbytes, seconds):
    """Algorithm bandwidth S / t in GB/s (1e9 bytes per second), as nccl-tests reports it."""
    if seconds <= 0:
        raise ValueError(f"time must be positive, got {seconds!r} s")
    return nbytes / seconds / 1e9


def gbps_to_gibitps(gbps):
    """GB/s (1e9 bytes/s) to Gibit/s (2**30 bits/s), the unit of seed 001's figures."""
    return gbps * 1e9 * 8 / 2 ** 30


def parse_size(text):
    """'1048576', '1M', '1MiB', '64K' -> bytes (binary units). Must be a positive multiple of 4
    because the buffers hold float32 gradients."""
    raw = str(text).strip()
    upper = raw.upper()
    digits = upper.rstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    unit = upper[len(digits):]
    if not digits or unit not in _UNITS:
        raise ValueError(f"cannot read the size {raw!r}: give bytes, e.g. 1048576, 64K, 1M or 1MiB")
    try:
        value = float(digits) * _UNITS[unit]
    except ValueError:
        raise ValueError(f"cannot read the size {raw!r}: give bytes, e.g. 1048576, 64K, 1M or 1MiB") \
            from None
    nbytes = int(value)
    if nbytes != value or nbytes <= 0 or nbytes % 4:
        raise ValueError(f"size {raw!r} = {value:g} bytes: need a positive whole number of float32 "
                         f"elements (a multiple of 4 bytes)")
    return nbytes


def parse_sizes(spec):
    """'1K:64M' (powers of 4 from 1 KiB to 64 MiB), '1K:64M:2' (factor 2) or '1M,4M,100M'."""
    if isinstance(spec, (list, tuple)):
        sizes = [parse_size(s) for s in spec]
    elif ":" in str(spec):
        parts = str(spec).split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"--sizes {spec!r}: write FIRST:LAST[:FACTOR], e.g. 1K:64M or 1K:64M:2")
        first, last = parse_size(parts[0]), parse_size(parts[1])
        factor = int(parts[2]) if len(parts) == 3 else 4
        if factor < 2 or last < first:
            raise ValueError(f"--sizes {spec!r}: need FIRST <= LAST and a FACTOR of at least 2")
        sizes, size = [], first
        while size <= last:
            sizes.append(size)
            size *= factor
    else:
        sizes = [parse_size(s) for s in str(spec).split(",") if s.strip()]
    if not sizes:
        raise ValueError(f"--sizes {spec!r} names no size")
    return sizes


def human_bytes(nbytes):
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.4g} {unit}"
    return f"{nbytes} B"
