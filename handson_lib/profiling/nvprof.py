"""Reading nvprof output files (`nvprof -o prof.nvvp ...`), SQLite too.

Kernels in CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (or ..._KERNEL) whose name is an id into
StringTable, copies in ..._MEMCPY (and ..._MEMCPY2 for peer copies), the process of a kernel from
the CUDA runtime call with the same correlationId (..._RUNTIME), NVTX ranges as start / end rows of
..._MARKER joined on their id.
"""

from handson_lib.profiling.model import COPY_KINDS, GpuOp, NvtxRange, short_kernel_name
from handson_lib.profiling.sqlite_file import column_names

# CUPTI_ACTIVITY_FLAG_MARKER_START / _END in nvprof's marker rows.
MARKER_START, MARKER_END = 2, 4


def read_nvprof(con, tables, data):
    data.tool = "nvprof"
    if "Version" in tables:
        row = con.execute("SELECT * FROM Version").fetchone()
        if row:
            data.tool = f"nvprof database version {row[0]}"
    strings = dict(con.execute("SELECT _id_, value FROM StringTable"))

    process_of_call = {}
    for table in ("CUPTI_ACTIVITY_KIND_DRIVER", "CUPTI_ACTIVITY_KIND_RUNTIME"):
        if table in tables:
            process_of_call.update(con.execute(f"SELECT correlationId, processId FROM {table}"))

    kernel_tables = [t for t in ("CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL", "CUPTI_ACTIVITY_KIND_KERNEL")
                     if t in tables]
    if not kernel_tables:
        data.notes.append("no CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL table: no kernel was recorded")
    for table in kernel_tables:
        for start, end, device, stream, corr, name_id in con.execute(
                f"SELECT start, end, deviceId, streamId, correlationId, name FROM {table}"):
            full = strings.get(name_id, f"kernel {name_id}")
            data.ops.append(GpuOp("kernel", short_kernel_name(full), start, end, device, stream,
                                  process_of_call.get(corr), 0, full))

    for table, kind in (("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"), ("CUPTI_ACTIVITY_KIND_MEMCPY2", "memcpy"),
                        ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
        if table not in tables:
            continue
        copy_kind = "copyKind" if kind == "memcpy" else "NULL"
        for start, end, device, stream, corr, nbytes, ck in con.execute(
                f"SELECT start, end, deviceId, streamId, correlationId, bytes, {copy_kind} FROM {table}"):
            name = COPY_KINDS.get(ck, f"kind {ck}") if kind == "memcpy" else "memset"
            data.ops.append(GpuOp(kind, name, start, end, device, stream, process_of_call.get(corr),
                                  nbytes or 0))

    if "CUPTI_ACTIVITY_KIND_MARKER" in tables:
        starts, ends = {}, {}
        for flags, stamp, marker_id, object_kind, object_id, name_id in con.execute(
                "SELECT flags, timestamp, id, objectKind, objectId, name FROM CUPTI_ACTIVITY_KIND_MARKER"):
            if flags & MARKER_START:
                pid = None
                # objectId of a process (1) or thread (2) object starts with the uint32 process id.
                if object_kind in (1, 2) and isinstance(object_id, bytes) and len(object_id) >= 4:
                    pid = int.from_bytes(object_id[:4], "little")
                starts[marker_id] = (stamp, strings.get(name_id, "(unnamed)"), pid)
            elif flags & MARKER_END:
                ends[marker_id] = stamp
        for marker_id, (start, name, pid) in starts.items():
            if marker_id in ends and ends[marker_id] >= start:
                data.nvtx.append(NvtxRange(name, start, ends[marker_id], pid))

    if "CUPTI_ACTIVITY_KIND_DEVICE" in tables and {"id", "name"} <= column_names(con, "CUPTI_ACTIVITY_KIND_DEVICE"):
        data.device_names = {dev: strings.get(name_id, str(name_id))
                             for dev, name_id in con.execute("SELECT id, name FROM CUPTI_ACTIVITY_KIND_DEVICE")}
    starts = [op.start for op in data.ops] + [r.start for r in data.nvtx]
    data.origin_ns = min(starts) if starts else 0  # nvprof stamps are absolute: count from the first event
