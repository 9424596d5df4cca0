"""Reading Nsight Systems SQLite exports (`nsys export --type sqlite`, `nsys profile --export=sqlite`).

Kernels in CUPTI_ACTIVITY_KIND_KERNEL named through StringIds (shortName, demangledName), copies
in CUPTI_ACTIVITY_KIND_MEMCPY (copyKind, bytes), NVTX_EVENTS (text or textId), processes from
globalPid / globalTid, PROCESSES and ThreadNames for their names.
"""

from handson_lib.profiling.model import COPY_KINDS, GpuOp, NvtxRange, short_kernel_name
from handson_lib.profiling.sqlite_file import column_names


def _pid_of(global_id):
    # Nsight Systems serialises ids as (hardware << 56) | (pid << 24) | tid.
    return None if global_id is None else (int(global_id) >> 24) & 0xFFFFFF


def read_nsys(con, tables, data):
    """Fill `data` (ProfileData) from the export open on `con`, whose tables are `tables`."""
    _read_meta(con, tables, data)
    _read_kernels(con, tables, data)
    _read_copies(con, tables, data)
    _read_nvtx(con, tables, data)
    _read_names(con, tables, data)


def _read_meta(con, tables, data):
    """The tool and its version; the time origin."""
    meta = {}
    for table in ("EXPORT_META_DATA", "META_DATA_EXPORT"):  # the older and the newer schema's name
        if table in tables and {"name", "value"} <= column_names(con, table):
            meta.update(con.execute(f"SELECT name, value FROM {table}"))
    version = meta.get("EXPORT_PRODUCT_VERSION") or meta.get("NSIGHT_SYSTEMS_VERSION")
    data.tool = " ".join(v for v in (meta.get("EXPORT_PRODUCT_NAME", "Nsight Systems"), version) if v)
    data.origin_ns = 0  # nsys timestamps already count from the start of the capture


def _read_kernels(con, tables, data):
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        data.notes.append("no CUPTI_ACTIVITY_KIND_KERNEL table: no kernel was recorded "
                          "(profile with `nsys profile --trace=cuda,...`)")
        return
    cols = column_names(con, "CUPTI_ACTIVITY_KIND_KERNEL")
    pid = "k.globalPid" if "globalPid" in cols else "NULL"
    short = "k.shortName" if "shortName" in cols else "k.demangledName"
    rows = con.execute(
        f"SELECT k.start, k.end, k.deviceId, k.streamId, {pid}, s.value, d.value "
        f"FROM CUPTI_ACTIVITY_KIND_KERNEL AS k "
        f"LEFT JOIN StringIds AS s ON s.id = {short} "
        f"LEFT JOIN StringIds AS d ON d.id = k.demangledName")
    for start, end, device, stream, gpid, short_name, full in rows:
        data.ops.append(GpuOp("kernel", short_name or short_kernel_name(full), start, end,
                              device, stream, _pid_of(gpid), 0, full or short_name or "?"))


def _read_copies(con, tables, data):
    for table, kind in (("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"), ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
        if table not in tables:
            continue
        cols = column_names(con, table)
        pid = "globalPid" if "globalPid" in cols else "NULL"
        copy_kind = "copyKind" if "copyKind" in cols else "NULL"
        for start, end, device, stream, gpid, nbytes, ck in con.execute(
                f"SELECT start, end, deviceId, streamId, {pid}, bytes, {copy_kind} FROM {table}"):
            name = COPY_KINDS.get(ck, f"kind {ck}") if kind == "memcpy" else "memset"
            data.ops.append(GpuOp(kind, name, start, end, device, stream, _pid_of(gpid), nbytes or 0))


def _read_nvtx(con, tables, data):
    if "NVTX_EVENTS" not in tables:
        return
    # Ranges (push/pop, start/end) have an end; marks, domain and thread names do not.
    for start, end, name, gtid in con.execute(
            "SELECT n.start, n.end, COALESCE(n.text, s.value), n.globalTid FROM NVTX_EVENTS AS n "
            "LEFT JOIN StringIds AS s ON s.id = n.textId "
            "WHERE n.end IS NOT NULL AND n.end >= n.start"):
        data.nvtx.append(NvtxRange(name or "(unnamed)", start, end, _pid_of(gtid)))


def _read_names(con, tables, data):
    """The devices' names, and the names of the processes that ran something."""
    if "TARGET_INFO_GPU" in tables and {"id", "name"} <= column_names(con, "TARGET_INFO_GPU"):
        data.device_names = {dev: name for dev, name in con.execute("SELECT id, name FROM TARGET_INFO_GPU")}
    pids = {op.process for op in data.ops} | {r.process for r in data.nvtx}
    if "PROCESSES" in tables and {"pid", "name"} <= column_names(con, "PROCESSES"):
        for pid, name in con.execute("SELECT pid, name FROM PROCESSES"):
            if pid in pids and name:
                data.process_names[pid] = name
    if "ThreadNames" in tables:
        # The main thread's NVTX name ("MPI Rank 0" under nsys --trace=mpi) labels its process.
        main_thread = {}
        for gtid, name in con.execute("SELECT t.globalTid, s.value FROM ThreadNames AS t "
                                      "JOIN StringIds AS s ON s.id = t.nameId"):
            pid = _pid_of(gtid)
            if pid in pids and gtid is not None and int(gtid) & 0xFFFFFF == pid and name:
                main_thread[pid] = name
        for pid, name in main_thread.items():
            data.process_names[pid] = f"{data.process_names.get(pid, 'process')} ({name})"
