"""The summary of a profile, per device and per process: busy fraction, top kernels, copies,
NCCL share, idle gaps and what the host did during them (definitions in the package docstring).
"""

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field, fields, is_dataclass

from handson_lib.profiling.model import ProfileData
from handson_lib.profiling.read import read_profile
from handson_lib.profiling.report import report_text


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
        return report_text(self)


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


def idle_gaps(ops, origin):
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
    all_gaps = idle_gaps(ops, origin)
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
