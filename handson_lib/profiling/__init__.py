"""`handson profile summarize FILE [--plot PNG]`: where the GPU time went, read from a real profile.

    handson profile summarize prof_0.sqlite                    # Nsight Systems SQLite export
    handson profile summarize prof_0_12345.nvvp --plot t.png   # nvprof -o file, timeline to PNG
    handson profile summarize sample --json                    # the shipped A100 sample, as JSON

Two formats, both SQLite, one summary:

- **Nsight Systems** exports (`nsys export --type sqlite report.nsys-rep`, or `nsys profile
  --export=sqlite`): kernels in CUPTI_ACTIVITY_KIND_KERNEL named through StringIds (shortName,
  demangledName), copies in CUPTI_ACTIVITY_KIND_MEMCPY (copyKind, bytes), NVTX_EVENTS (text or
  textId), processes from globalPid / globalTid, PROCESSES and ThreadNames for their names.
- **nvprof** output files (`nvprof -o prof.nvvp ...`): kernels in
  CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (or ..._KERNEL) whose name is an id into StringTable,
  copies in ..._MEMCPY (and ..._MEMCPY2 for peer copies), the process of a kernel from the CUDA
  runtime call with the same correlationId (..._RUNTIME), NVTX ranges as start / end rows of
  ..._MARKER joined on their id.

The format is told by the tables present. Files are opened read-only (`file:...?mode=ro`).

Definitions, per device (a deviceId of the file; ranks that each see their GPU as device 0
through CUDA_VISIBLE_DEVICES belong in separate files, one per rank, as the job scripts write):

- span: from the first to the last GPU activity (kernel, memcpy or memset) on the device;
- busy fraction: the union of the kernel intervals (kernels overlapping on several streams count
  once) divided by the span;
- idle gap: a stretch inside the span with no kernel, memcpy nor memset on the device. Gaps longer
  than the threshold (1 ms by default) are listed: there the GPU waits for the host, the CPU
  bottleneck of the seed's Visual Profiler slides (data loading, Python overhead, MPI calls);
  the NVTX ranges open during the gaps say what the host was doing;
- communication share: the time of kernels whose name contains "nccl" (any case) over all
  kernel time.
"""

import json
import sqlite3
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path

SAMPLE_NAME = "saxpy-mpi-cuda_nsys_a100.sqlite"
SQLITE_MAGIC = b"SQLite format 3\x00"

# CUpti_ActivityMemcpyKind, used by nvprof and by Nsight Systems exports alike.
COPY_KINDS = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD",
              7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP"}
# CUPTI_ACTIVITY_FLAG_MARKER_START / _END in nvprof's marker rows.
MARKER_START, MARKER_END = 2, 4

HOW_TO_EXPORT = ("`handson profile summarize` reads Nsight Systems SQLite exports "
                 "(`nsys export --type sqlite report.nsys-rep`, or `nsys profile --export=sqlite ...`) "
                 "and nvprof output files (`nvprof -o prof.nvvp ...`)")


class ProfileFormatError(ValueError):
    """The file is missing, not SQLite, or an SQLite file of neither profiler."""


def sample_profile():
    """The real Nsight Systems export shipped with the course (an MPI + CUDA SAXPY run on one A100)."""
    path = Path(__file__).resolve().parent / "sample_profiles" / SAMPLE_NAME
    if not path.is_file():
        raise FileNotFoundError(f"the sample profile {path} is missing: reinstall the course "
                                "(`make setup`), it ships in handson_lib/profiling/sample_profiles/")
    return path


# ============================================================================================
# Reading

@dataclass
class GpuOp:
    """One kernel, memcpy or memset on a device. Times in ns, as in the file."""
    kind: str              # "kernel", "memcpy" or "memset"
    name: str              # kernel short name, copy direction ("HtoD") or "memset"
    start: int
    end: int
    device: int
    stream: int
    process: int = None    # OS process id when the file tells it
    bytes: int = 0
    full_name: str = ""    # demangled (nsys) or as stored (nvprof) kernel name

    @property
    def duration(self):
        return self.end - self.start


@dataclass
class NvtxRange:
    name: str
    start: int
    end: int
    process: int = None

    @property
    def duration(self):
        return self.end - self.start


@dataclass
class ProfileData:
    path: str
    format: str                      # "nsys" or "nvprof"
    tool: str
    origin_ns: int                   # time zero of the report
    ops: list = field(default_factory=list)
    nvtx: list = field(default_factory=list)
    device_names: dict = field(default_factory=dict)
    process_names: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    @property
    def kernels(self):
        return [op for op in self.ops if op.kind == "kernel"]


def _open_readonly(path):
    path = Path(path)
    if not path.exists():
        raise ProfileFormatError(f"{path}: no such file. {HOW_TO_EXPORT}.")
    if not path.is_file():
        raise ProfileFormatError(f"{path} is a directory, not a profile. {HOW_TO_EXPORT}.")
    with open(path, "rb") as handle:
        head = handle.read(len(SQLITE_MAGIC))
    if head != SQLITE_MAGIC:
        if path.suffix in (".nsys-rep", ".qdrep"):
            raise ProfileFormatError(
                f"{path} is an Nsight Systems report, not its SQLite export: run "
                f"`nsys export --type sqlite -o {path.with_suffix('.sqlite').name} {path.name}` "
                f"and summarize the .sqlite file.")
        what = "an empty file" if not head else "not an SQLite file"
        raise ProfileFormatError(f"{path} is {what}. {HOW_TO_EXPORT}.")
    try:
        con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as error:
        raise ProfileFormatError(f"{path}: SQLite cannot read it ({error}). {HOW_TO_EXPORT}.") from None
    return con


def _tables(con):
    return {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(con, table):
    return {row[1] for row in con.execute(f'PRAGMA table_info("{table}")')}


def detect_format(tables):
    """'nsys' or 'nvprof' from the table names of an SQLite file; ProfileFormatError otherwise."""
    if "StringIds" in tables and tables & {"CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS",
                                            "TARGET_INFO_GPU", "EXPORT_META_DATA", "META_DATA_EXPORT",
                                            "TARGET_INFO_SESSION_START_TIME",
                                            "CUPTI_ACTIVITY_KIND_RUNTIME"}:
        return "nsys"
    if "StringTable" in tables and any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in tables):
        return "nvprof"
    shown = ", ".join(sorted(tables)[:8]) or "none"
    raise ProfileFormatError(
        "an SQLite file, but neither profiler wrote it: expected an Nsight Systems export "
        "(tables StringIds, CUPTI_ACTIVITY_KIND_KERNEL, NVTX_EVENTS) or an nvprof file (tables "
        f"StringTable, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MARKER); it has: "
        f"{shown}. {HOW_TO_EXPORT}.")


def short_kernel_name(name):
    """A readable kernel name from a mangled (`_Z5saxpyidPfS_` -> `saxpy`) or demangled one.

    nvprof stores mangled names; best effort, the name as stored when it cannot be parsed."""
    if not name:
        return name or "?"
    if not name.startswith("_Z"):
        return name.split("(")[0].strip() or name
    text, i, last = name, 2, None
    nested = text[i:i + 1] == "N"
    if nested:
        i += 1
    while i < len(text):
        while i < len(text) and text[i] in "rVKL":  # cv-qualifiers before a nested name
            i += 1
        j = i
        while j < len(text) and text[j].isdigit():
            j += 1
        if j == i:
            break
        length = int(text[i:j])
        last = text[j:j + length]
        i = j + length
        if not nested:
            break
    return last or name


def _pid_of(global_id):
    # Nsight Systems serialises ids as (hardware << 56) | (pid << 24) | tid.
    return None if global_id is None else (int(global_id) >> 24) & 0xFFFFFF


def _read_nsys(con, tables, data):
    meta = {}
    for table in ("EXPORT_META_DATA", "META_DATA_EXPORT"):  # the older and the newer schema's name
        if table in tables and {"name", "value"} <= _columns(con, table):
            meta.update(con.execute(f"SELECT name, value FROM {table}"))
    version = meta.get("EXPORT_PRODUCT_VERSION") or meta.get("NSIGHT_SYSTEMS_VERSION")
    data.tool = " ".join(v for v in (meta.get("EXPORT_PRODUCT_NAME", "Nsight Systems"), version) if v)
    data.origin_ns = 0  # nsys timestamps already count from the start of the capture

    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        cols = _columns(con, "CUPTI_ACTIVITY_KIND_KERNEL")
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
    else:
        data.notes.append("no CUPTI_ACTIVITY_KIND_KERNEL table: no kernel was recorded "
                          "(profile with `nsys profile --trace=cuda,...`)")

    for table, kind in (("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"), ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
        if table not in tables:
            continue
        cols = _columns(con, table)
        pid = "globalPid" if "globalPid" in cols else "NULL"
        copy_kind = "copyKind" if "copyKind" in cols else "NULL"
        for start, end, device, stream, gpid, nbytes, ck in con.execute(
                f"SELECT start, end, deviceId, streamId, {pid}, bytes, {copy_kind} FROM {table}"):
            name = COPY_KINDS.get(ck, f"kind {ck}") if kind == "memcpy" else "memset"
            data.ops.append(GpuOp(kind, name, start, end, device, stream, _pid_of(gpid), nbytes or 0))

    if "NVTX_EVENTS" in tables:
        # Ranges (push/pop, start/end) have an end; marks, domain and thread names do not.
        for start, end, name, gtid in con.execute(
                "SELECT n.start, n.end, COALESCE(n.text, s.value), n.globalTid FROM NVTX_EVENTS AS n "
                "LEFT JOIN StringIds AS s ON s.id = n.textId "
                "WHERE n.end IS NOT NULL AND n.end >= n.start"):
            data.nvtx.append(NvtxRange(name or "(unnamed)", start, end, _pid_of(gtid)))

    if "TARGET_INFO_GPU" in tables and {"id", "name"} <= _columns(con, "TARGET_INFO_GPU"):
        data.device_names = {dev: name for dev, name in con.execute("SELECT id, name FROM TARGET_INFO_GPU")}
    pids = {op.process for op in data.ops} | {r.process for r in data.nvtx}
    if "PROCESSES" in tables and {"pid", "name"} <= _columns(con, "PROCESSES"):
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


def _read_nvprof(con, tables, data):
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

    if "CUPTI_ACTIVITY_KIND_DEVICE" in tables and {"id", "name"} <= _columns(con, "CUPTI_ACTIVITY_KIND_DEVICE"):
        data.device_names = {dev: strings.get(name_id, str(name_id))
                             for dev, name_id in con.execute("SELECT id, name FROM CUPTI_ACTIVITY_KIND_DEVICE")}
    starts = [op.start for op in data.ops] + [r.start for r in data.nvtx]
    data.origin_ns = min(starts) if starts else 0  # nvprof stamps are absolute: count from the first event


def read_profile(path):
    """All kernels, copies and NVTX ranges of an nsys export or nvprof file (ProfileData)."""
    con = _open_readonly(path)
    try:
        tables = _tables(con)
        fmt = detect_format(tables)
        data = ProfileData(path=str(path), format=fmt, tool="", origin_ns=0)
        try:
            (_read_nsys if fmt == "nsys" else _read_nvprof)(con, tables, data)
        except sqlite3.DatabaseError as error:
            raise ProfileFormatError(f"{path}: looks like a {fmt} file but a table lacks what it "
                                     f"should hold ({error}). {HOW_TO_EXPORT}.") from None
    finally:
        con.close()
    data.ops.sort(key=lambda op: (op.start, op.end))
    data.nvtx.sort(key=lambda r: (r.start, -r.end))
    return data


# ============================================================================================
# Interval arithmetic

def merge_intervals(intervals):
    """Union of (start, end) pairs as sorted, disjoint (start, end) pairs."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1][1] = end
        else:
            merged.append([start, end])
    return [tuple(m) for m in merged]


def _length(merged):
    return sum(end - start for start, end in merged)


def _intersection_length(a, b):
    """Total overlap of two merged interval lists."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


# ============================================================================================
# The summary

@dataclass
class KernelStat:
    name: str
    count: int
    total_ns: int
    mean_ns: float
    share: float             # of all kernel time in its scope (a device, or the whole file)
    nccl: bool


@dataclass
class MemcpyStat:
    direction: str
    count: int
    bytes: int
    total_ns: int

    @property
    def gb_per_s(self):
        return self.bytes / self.total_ns if self.total_ns else 0.0   # bytes/ns == GB/s


@dataclass
class Gap:
    start_ns: int            # from the report's time zero
    end_ns: int
    after: str               # the GPU activity that ended just before
    before: str              # the one that started just after

    @property
    def duration_ns(self):
        return self.end_ns - self.start_ns


@dataclass
class NvtxStat:
    name: str
    count: int
    total_ns: int


@dataclass
class DeviceSummary:
    device: int
    name: str
    processes: list
    streams: list
    start_ns: int
    end_ns: int
    span_ns: int
    kernel_count: int
    kernel_names: int
    kernel_time_ns: int      # sum of kernel durations (overlaps counted twice)
    busy_ns: int             # union of kernel intervals
    busy_fraction: float
    active_fraction: float   # union of kernels, copies and memsets over the span
    nccl_time_ns: int
    nccl_share: float
    top_kernels: list
    memcpy: list
    gaps: list               # idle gaps longer than the threshold, in time order
    gap_total_ns: int
    longest_gap: Gap         # the longest idle gap of any length (None without one)
    host_during_gaps: list   # [name, ns]: NVTX ranges open during the listed gaps
    gaps_outside_nvtx_ns: int


@dataclass
class ProcessSummary:
    process: int
    name: str
    devices: list
    kernel_count: int
    kernel_time_ns: int
    memcpy_bytes: int
    nvtx: list


@dataclass
class ProfileSummary:
    path: str
    format: str
    tool: str
    origin_ns: int
    start_ns: int
    end_ns: int
    gap_threshold_ms: float
    top: int
    kernel_count: int
    memcpy_count: int
    nvtx_count: int
    devices: list
    processes: list
    top_kernels: list
    memcpy: list
    nvtx: list
    notes: list
    data: ProfileData = field(default=None, repr=False, compare=False)

    # -- one-number answers
    @property
    def device_count(self):
        return len(self.devices)

    @property
    def busy_fraction(self):
        """Over all devices: kernel-busy time over the sum of the spans."""
        span = sum(d.span_ns for d in self.devices)
        return sum(d.busy_ns for d in self.devices) / span if span else 0.0

    @property
    def top_kernel(self):
        return self.top_kernels[0].name if self.top_kernels else None

    @property
    def longest_gap(self):
        gaps = [d.longest_gap for d in self.devices if d.longest_gap]
        return max(gaps, key=lambda g: g.duration_ns) if gaps else None

    def memcpy_bytes(self, direction):
        return sum(m.bytes for m in self.memcpy if m.direction == direction)

    # -- output
    def to_dict(self):
        # Field by field: asdict(self) would deep-copy every event of `data` first.
        out = {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name != "data"}
        out.update(device_count=self.device_count, busy_fraction=self.busy_fraction,
                   top_kernel=self.top_kernel)
        return out

    def to_json(self, indent=2):
        return json.dumps(self.to_dict(), indent=indent)

    def text(self):
        return _report_text(self)


def _plain(value):
    if is_dataclass(value):
        return asdict(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _kernel_stats(kernels, top):
    total = sum(k.duration for k in kernels)
    by_name = defaultdict(list)
    for k in kernels:
        by_name[k.name].append(k.duration)
    stats = [KernelStat(name, len(d), sum(d), sum(d) / len(d), sum(d) / total if total else 0.0,
                        "nccl" in name.lower())
             for name, d in by_name.items()]
    stats.sort(key=lambda s: (-s.total_ns, s.name))
    return stats[:top] if top else stats


def _memcpy_stats(copies):
    by_dir = defaultdict(list)
    for c in copies:
        by_dir[c.name].append(c)
    return sorted((MemcpyStat(d, len(cs), sum(c.bytes for c in cs), sum(c.duration for c in cs))
                   for d, cs in by_dir.items()), key=lambda m: (-m.bytes, m.direction))


def _nvtx_stats(ranges):
    by_name = defaultdict(list)
    for r in ranges:
        by_name[r.name].append(r.duration)
    return sorted((NvtxStat(n, len(d), sum(d)) for n, d in by_name.items()),
                  key=lambda s: (-s.total_ns, s.name))


def _idle_gaps(ops, origin):
    """Every stretch between GPU activities of one device, as Gap (times from origin)."""
    gaps = []
    current_end, last_name = None, None
    for op in sorted(ops, key=lambda o: (o.start, o.end)):
        if current_end is not None and op.start > current_end:
            gaps.append(Gap(current_end - origin, op.start - origin, last_name, op.name))
        if current_end is None or op.end >= current_end:
            current_end, last_name = op.end, op.name
    return gaps


def _device_summary(device, ops, nvtx, origin, threshold_ns, top, device_name):
    kernels = [op for op in ops if op.kind == "kernel"]
    start, end = min(op.start for op in ops), max(op.end for op in ops)
    span = end - start
    busy = _length(merge_intervals((k.start, k.end) for k in kernels))
    active = _length(merge_intervals((op.start, op.end) for op in ops))
    kernel_time = sum(k.duration for k in kernels)
    nccl_time = sum(k.duration for k in kernels if "nccl" in k.name.lower())
    all_gaps = _idle_gaps(ops, origin)
    long_gaps = [g for g in all_gaps if g.duration_ns > threshold_ns]
    gap_union = [(g.start_ns + origin, g.end_ns + origin) for g in long_gaps]

    processes = sorted({op.process for op in ops if op.process is not None})
    host = [r for r in nvtx if not processes or r.process in processes or r.process is None]
    by_name = defaultdict(list)
    for r in host:
        by_name[r.name].append((r.start, r.end))
    during = sorted(([name, _intersection_length(merge_intervals(iv), gap_union)]
                     for name, iv in by_name.items()), key=lambda x: (-x[1], x[0]))
    during = [d for d in during if d[1] > 0]
    covered = _intersection_length(merge_intervals((r.start, r.end) for r in host), gap_union)

    return DeviceSummary(
        device=device, name=device_name or "", processes=processes,
        streams=sorted({op.stream for op in ops}),
        start_ns=start - origin, end_ns=end - origin, span_ns=span,
        kernel_count=len(kernels), kernel_names=len({k.name for k in kernels}),
        kernel_time_ns=kernel_time, busy_ns=busy, busy_fraction=busy / span if span else 0.0,
        active_fraction=active / span if span else 0.0,
        nccl_time_ns=nccl_time, nccl_share=nccl_time / kernel_time if kernel_time else 0.0,
        top_kernels=_kernel_stats(kernels, top), memcpy=_memcpy_stats([o for o in ops if o.kind == "memcpy"]),
        gaps=long_gaps, gap_total_ns=sum(g.duration_ns for g in long_gaps),
        longest_gap=max(all_gaps, key=lambda g: g.duration_ns) if all_gaps else None,
        host_during_gaps=during, gaps_outside_nvtx_ns=_length(gap_union) - covered)


def summarize(source, gap_threshold_ms=1.0, top=10):
    """ProfileSummary of a profile file (nsys SQLite export or nvprof -o file) or of ProfileData."""
    data = source if isinstance(source, ProfileData) else read_profile(source)
    origin = data.origin_ns
    threshold_ns = int(round(gap_threshold_ms * 1e6))
    ops_by_device = defaultdict(list)
    for op in data.ops:
        ops_by_device[op.device].append(op)
    devices = [_device_summary(dev, ops, data.nvtx, origin, threshold_ns, top, data.device_names.get(dev))
               for dev, ops in sorted(ops_by_device.items())]

    processes = []
    pids = sorted({op.process for op in data.ops} | {r.process for r in data.nvtx},
                  key=lambda p: (p is None, p or 0))
    for pid in pids:
        ops = [op for op in data.ops if op.process == pid]
        kernels = [op for op in ops if op.kind == "kernel"]
        processes.append(ProcessSummary(
            process=pid, name=data.process_names.get(pid, ""),
            devices=sorted({op.device for op in ops}), kernel_count=len(kernels),
            kernel_time_ns=sum(k.duration for k in kernels),
            memcpy_bytes=sum(op.bytes for op in ops if op.kind == "memcpy"),
            nvtx=_nvtx_stats([r for r in data.nvtx if r.process == pid])))

    stamps = [t for op in data.ops for t in (op.start, op.end)] + \
             [t for r in data.nvtx for t in (r.start, r.end)]
    notes = list(data.notes)
    if data.ops and not data.kernels:
        notes.append("copies but no kernel: the busy fraction is 0")
    if not data.ops:
        notes.append("no GPU activity in this file: nothing to summarise per device")
    return ProfileSummary(
        path=str(data.path), format=data.format, tool=data.tool, origin_ns=origin,
        start_ns=(min(stamps) - origin) if stamps else 0, end_ns=(max(stamps) - origin) if stamps else 0,
        gap_threshold_ms=gap_threshold_ms, top=top,
        kernel_count=len(data.kernels), memcpy_count=sum(op.kind == "memcpy" for op in data.ops),
        nvtx_count=len(data.nvtx), devices=devices, processes=processes,
        top_kernels=_kernel_stats(data.kernels, top),
        memcpy=_memcpy_stats([op for op in data.ops if op.kind == "memcpy"]),
        nvtx=_nvtx_stats(data.nvtx), notes=notes, data=data)


# ============================================================================================
# Text report

def _ms(ns):
    return ns / 1e6


def _size(nbytes):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


def _clip(name, width=48):
    return name if len(name) <= width else name[:width - 3] + "..."


def _kernel_table(stats, indent="    "):
    lines = [f"{indent}{'kernel':<48} {'count':>7} {'total ms':>10} {'mean ms':>9} {'share':>7}"]
    for s in stats:
        lines.append(f"{indent}{_clip(s.name):<48} {s.count:>7} {_ms(s.total_ns):>10.3f} "
                     f"{_ms(s.mean_ns):>9.3f} {s.share:>6.1%}" + ("  (NCCL)" if s.nccl else ""))
    return lines


def _memcpy_table(stats, indent="    "):
    lines = [f"{indent}{'memcpy':<8} {'count':>7} {'bytes':>14} {'':>9} {'total ms':>10} {'GB/s':>7}"]
    for m in stats:
        lines.append(f"{indent}{m.direction:<8} {m.count:>7} {m.bytes:>14} {_size(m.bytes):>9} "
                     f"{_ms(m.total_ns):>10.3f} {m.gb_per_s:>7.2f}")
    return lines


def _report_text(s):
    threshold = s.gap_threshold_ms
    zero = "the start of the capture" if s.format == "nsys" else "the first event"
    kind = "Nsight Systems SQLite export" if s.format == "nsys" else "nvprof output file"
    tool = f" ({s.tool})" if s.tool and s.tool != "nvprof" else ""
    lines = [f"Profile: {s.path}",
             f"  format: {kind}{tool}; times in ms from {zero}",
             f"  {len(s.processes)} process(es), {s.device_count} device(s), {s.kernel_count} kernel launches, "
             f"{s.memcpy_count} memcpy, {s.nvtx_count} NVTX ranges, events from "
             f"{_ms(s.start_ns):.1f} to {_ms(s.end_ns):.1f} ms"]
    for note in s.notes:
        lines.append(f"  note: {note}")
    for d in s.devices:
        title = f"GPU {d.device}" + (f" ({d.name})" if d.name else "")
        procs = ", ".join(str(p) for p in d.processes) or "unknown"
        lines += ["", f"{title}: process {procs}; streams {', '.join(str(x) for x in d.streams)}",
                  f"  GPU activity from {_ms(d.start_ns):.1f} to {_ms(d.end_ns):.1f} ms: span {_ms(d.span_ns):.1f} ms",
                  f"  busy fraction (kernels)  : {d.busy_fraction:.3f}  ({_ms(d.busy_ns):.1f} ms of the span; "
                  f"kernels + copies: {d.active_fraction:.3f})",
                  f"  kernels                  : {d.kernel_count} launches of {d.kernel_names} kernel(s), "
                  f"{_ms(d.kernel_time_ns):.3f} ms in total",
                  f"  communication (NCCL)     : {d.nccl_share:.1%} of kernel time ({_ms(d.nccl_time_ns):.3f} ms)"]
        if d.top_kernels:
            lines += [f"  top kernels by total time:"] + _kernel_table(d.top_kernels)
        if d.memcpy:
            lines += [f"  copies by direction:"] + _memcpy_table(d.memcpy)
        if d.gaps:
            share = d.gap_total_ns / d.span_ns if d.span_ns else 0.0
            lines.append(f"  idle gaps > {threshold:g} ms: {len(d.gaps)}, {_ms(d.gap_total_ns):.1f} ms in total "
                         f"({share:.0%} of the span)  <-- the GPU waits for the host")
            for g in sorted(d.gaps, key=lambda g: -g.duration_ns)[:5]:
                lines.append(f"    {_ms(g.duration_ns):9.3f} ms from {_ms(g.start_ns):.1f} ms "
                             f"(after {g.after}, before {g.before})")
            if d.host_during_gaps or d.gaps_outside_nvtx_ns:
                parts = [f"{name} {_ms(ns):.1f} ms" for name, ns in d.host_during_gaps[:5]]
                if d.gaps_outside_nvtx_ns:
                    parts.append(f"no NVTX range {_ms(d.gaps_outside_nvtx_ns):.1f} ms")
                lines.append("    host during the gaps (NVTX): " + ", ".join(parts))
        else:
            lines.append(f"  idle gaps > {threshold:g} ms: none")
        if d.longest_gap:
            lines.append(f"  longest idle gap: {_ms(d.longest_gap.duration_ns):.3f} ms")
    if s.device_count > 1:
        lines += ["", f"All devices: busy fraction {s.busy_fraction:.3f}"]
        if s.top_kernels:
            lines += ["  top kernels by total time:"] + _kernel_table(s.top_kernels)
    for p in s.processes:
        label = "unknown process" if p.process is None else f"process {p.process}"
        lines += ["", f"{label}" + (f": {p.name}" if p.name else "") +
                  f"; devices {', '.join(str(x) for x in p.devices) or 'none'}; {p.kernel_count} kernels, "
                  f"{_ms(p.kernel_time_ns):.3f} ms; {_size(p.memcpy_bytes)} copied"]
        if p.nvtx:
            lines.append(f"  {'NVTX range':<40} {'count':>7} {'total ms':>10}")
            for r in p.nvtx[:s.top or None]:
                lines.append(f"  {_clip(r.name, 40):<40} {r.count:>7} {_ms(r.total_ns):>10.3f}")
    return "\n".join(lines)


def print_query(con, sql, params=(), limit=20):
    """Run one SQL query and print its rows under their column names (at most `limit` rows)."""
    cursor = con.execute(sql, params)
    headers = [d[0] for d in cursor.description]
    rows = cursor.fetchmany(limit + 1)
    shown = [[str(v) for v in row] for row in rows[:limit]]
    widths = [max([len(h)] + [len(r[i]) for r in shown]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
    for row in shown:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))
    if len(rows) > limit:
        print(f"... (more rows; first {limit} shown)")


# ============================================================================================
# Timeline

_KERNEL_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#e377c2", "#17becf", "#bcbd22",
                  "#aec7e8", "#ffbb78", "#98df8a")
_COPY_COLORS = {"HtoD": "#9467bd", "DtoH": "#8c564b", "DtoD": "#c5b0d5", "PtoP": "#c49c94"}
_NVTX_COLORS = ("#637939", "#8ca252", "#b5cf6b", "#8c6d31", "#bd9e39", "#e7ba52", "#843c39",
                "#ad494a", "#7b4173", "#a55194")


def _nvtx_levels(ranges):
    """Nesting depth of each range (0 = outermost), ranges sorted by start."""
    levels, open_ends = [], []
    for r in ranges:
        while open_ends and open_ends[-1] <= r.start:
            open_ends.pop()
        levels.append(len(open_ends))
        open_ends.append(r.end)
        open_ends.sort(reverse=True)
    return levels


def timeline_rows(source):
    """Row labels of the timeline, top to bottom: one per (device, stream), then NVTX rows."""
    data = _data_of(source)
    multi = len({op.process for op in data.ops}) > 1
    rows = []
    for dev, stream, pid in sorted({(op.device, op.stream, op.process) for op in data.ops},
                                   key=lambda k: (k[0], k[1], k[2] or 0)):
        rows.append((("gpu", dev, stream, pid),
                     f"GPU {dev} stream {stream}" + (f" (pid {pid})" if multi and pid is not None else "")))
    by_pid = defaultdict(list)
    for r in data.nvtx:
        by_pid[r.process].append(r)
    for pid in sorted(by_pid, key=lambda p: (p is None, p or 0)):
        ranges = sorted(by_pid[pid], key=lambda r: (r.start, -r.end))
        for level in sorted(set(_nvtx_levels(ranges))):
            rows.append((("nvtx", pid, level), f"NVTX pid {pid}" + (f" level {level}" if level else "")))
    return rows


def _data_of(source):
    if isinstance(source, ProfileData):
        return source
    if isinstance(source, ProfileSummary) and source.data is not None:
        return source.data
    return read_profile(source)


def timeline_figure(source, gap_threshold_ms=1.0, max_kernel_names=8, title=None, width=12):
    """Matplotlib timeline of a profile (path, ProfileData or ProfileSummary).

    One row per device and stream (kernels coloured by name, copies by direction, idle gaps
    longer than the threshold shaded red), then the NVTX ranges of each process by nesting level."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    data = _data_of(source)
    origin = data.origin_ns
    rows = timeline_rows(data)
    index = {key: i for i, (key, _) in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(width, 1.2 + 0.55 * max(1, len(rows))))
    height = 0.8

    def bars(items, y, color, **kw):
        spans = [(_ms(a - origin), _ms(b - a)) for a, b in items]
        if spans:
            ax.broken_barh(spans, (y - height / 2, height), facecolors=color, **kw)

    kernel_total = defaultdict(int)
    for k in data.kernels:
        kernel_total[k.name] += k.duration
    named = sorted(kernel_total, key=lambda n: -kernel_total[n])[:max_kernel_names]
    colors = {n: _KERNEL_COLORS[i % len(_KERNEL_COLORS)] for i, n in enumerate(named)}
    handles = [Patch(color=colors[n], label=_clip(n, 32)) for n in named]
    if len(kernel_total) > len(named):
        handles.append(Patch(color="#7f7f7f", label="other kernels"))

    groups = defaultdict(list)
    for op in data.ops:
        row = index[("gpu", op.device, op.stream, op.process)]
        if op.kind == "kernel":
            color = colors.get(op.name, "#7f7f7f")
        else:
            color = _COPY_COLORS.get(op.name, "#c7c7c7")
        groups[(row, color)].append((op.start, op.end))
    for (row, color), items in groups.items():
        bars(items, row, color)
    for name in sorted({op.name for op in data.ops if op.kind != "kernel"}):
        handles.append(Patch(color=_COPY_COLORS.get(name, "#c7c7c7"),
                             label=f"memcpy {name}" if name != "memset" else "memset"))

    threshold_ns = gap_threshold_ms * 1e6
    shaded = False
    for dev in sorted({op.device for op in data.ops}):
        ops = [op for op in data.ops if op.device == dev]
        gaps = [g for g in _idle_gaps(ops, 0) if g.duration_ns > threshold_ns]
        dev_rows = [i for (key, _), i in zip(rows, range(len(rows))) if key[0] == "gpu" and key[1] == dev]
        for row in dev_rows:
            bars([(g.start_ns, g.end_ns) for g in gaps], row, "#ff9896", alpha=0.45, zorder=0)
        shaded = shaded or bool(gaps)
    if shaded:
        handles.append(Patch(color="#ff9896", alpha=0.45, label=f"GPU idle > {gap_threshold_ms:g} ms"))

    by_pid = defaultdict(list)
    for r in data.nvtx:
        by_pid[r.process].append(r)
    nvtx_names = sorted({r.name for r in data.nvtx})
    nvtx_color = {n: _NVTX_COLORS[i % len(_NVTX_COLORS)] for i, n in enumerate(nvtx_names)}
    handles += [Patch(color=nvtx_color[n], label=f"NVTX {_clip(n, 27)}") for n in nvtx_names[:len(_NVTX_COLORS)]]
    stamps = [t for op in data.ops for t in (op.start, op.end)] + [t for r in data.nvtx for t in (r.start, r.end)]
    extent = _ms(max(stamps) - min(stamps)) if stamps else 1.0
    for pid, ranges in by_pid.items():
        ranges = sorted(ranges, key=lambda r: (r.start, -r.end))
        for r, level in zip(ranges, _nvtx_levels(ranges)):
            row = index[("nvtx", pid, level)]
            bars([(r.start, r.end)], row, nvtx_color[r.name], edgecolor="white", linewidth=0.3)
            if _ms(r.duration) > 0.04 * extent and len(ranges) < 300:
                ax.text(_ms(r.start - origin + r.duration / 2), row, _clip(r.name, 18), ha="center",
                        va="center", fontsize=7, color="white", clip_on=True)

    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([label for _, label in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("time [ms] from " + ("the start of the capture" if data.format == "nsys" else "the first event"))
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title or f"{Path(data.path).name}: GPU timeline")
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


# ============================================================================================
# CLI

def add_arguments(parser):
    parser.add_argument("file", help="an Nsight Systems SQLite export (nsys export --type sqlite "
                        "report.nsys-rep) or an nvprof -o file; the word 'sample' reads the shipped "
                        "A100 sample")
    parser.add_argument("--plot", metavar="PNG", help="write the timeline to this PNG file")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--gap-threshold-ms", type=float, default=1.0,
                        help="list GPU idle gaps longer than this (default: 1 ms)")
    parser.add_argument("--top", type=int, default=10, help="kernels / NVTX ranges listed (default: 10)")


def main(args):
    path = args.file
    if path == "sample" and not Path(path).exists():
        path = sample_profile()
    if args.gap_threshold_ms < 0 or args.top < 0:
        print("error: --gap-threshold-ms and --top must not be negative", file=sys.stderr)
        return 2
    try:
        summary = summarize(path, gap_threshold_ms=args.gap_threshold_ms, top=args.top)
    except ProfileFormatError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(summary.to_json() if args.json else summary.text())
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig = timeline_figure(summary, gap_threshold_ms=args.gap_threshold_ms)
        fig.savefig(args.plot, dpi=120, bbox_inches="tight")
        plt.close(fig)
        print(f"timeline written to {args.plot}", file=sys.stderr if args.json else sys.stdout)
    return 0
