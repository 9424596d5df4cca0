"""The timeline of a profile as a Matplotlib figure: GPU rows per device and stream, NVTX rows.

Matplotlib is imported inside `timeline_figure`: the ``handson`` command line imports this package.
"""

from collections import defaultdict
from pathlib import Path

from handson_lib.profiling.model import ProfileData
from handson_lib.profiling.read import read_profile
from handson_lib.profiling.report import clip, ms
from handson_lib.profiling.summary import ProfileSummary, idle_gaps
from handson_lib.plotting import pyplot

_KERNEL_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#e377c2", "#17becf", "#bcbd22",
                  "#aec7e8", "#ffbb78", "#98df8a")
_OTHER_KERNELS_COLOR = "#7f7f7f"
_COPY_COLORS = {"HtoD": "#9467bd", "DtoH": "#8c564b", "DtoD": "#c5b0d5", "PtoP": "#c49c94"}
_OTHER_COPY_COLOR = "#c7c7c7"
_GAP_COLOR, _GAP_ALPHA = "#ff9896", 0.45
_NVTX_COLORS = ("#637939", "#8ca252", "#b5cf6b", "#8c6d31", "#bd9e39", "#e7ba52", "#843c39",
                "#ad494a", "#7b4173", "#a55194")
_BAR_HEIGHT = 0.8


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


def _nvtx_by_process(data):
    """{pid: that process's NVTX ranges sorted by start, outer ranges first}."""
    by_pid = defaultdict(list)
    for r in data.nvtx:
        by_pid[r.process].append(r)
    return {pid: sorted(ranges, key=lambda r: (r.start, -r.end)) for pid, ranges in by_pid.items()}


def timeline_rows(source):
    """Row labels of the timeline, top to bottom: one per (device, stream), then NVTX rows."""
    data = _data_of(source)
    multi = len({op.process for op in data.ops}) > 1
    rows = []
    for dev, stream, pid in sorted({(op.device, op.stream, op.process) for op in data.ops},
                                   key=lambda k: (k[0], k[1], k[2] or 0)):
        rows.append((("gpu", dev, stream, pid),
                     f"GPU {dev} stream {stream}" + (f" (pid {pid})" if multi and pid is not None else "")))
    by_pid = _nvtx_by_process(data)
    for pid in sorted(by_pid, key=lambda p: (p is None, p or 0)):
        for level in sorted(set(_nvtx_levels(by_pid[pid]))):
            rows.append((("nvtx", pid, level), f"NVTX pid {pid}" + (f" level {level}" if level else "")))
    return rows


def _data_of(source):
    if isinstance(source, ProfileData):
        return source
    if isinstance(source, ProfileSummary) and source.data is not None:
        return source.data
    return read_profile(source)


class _Canvas:
    """One axis with a row index: draws bars of (start, end) ns at a row, in ms from the origin."""

    def __init__(self, ax, data, rows):
        self.ax = ax
        self.origin = data.origin_ns
        self.row_of = {key: i for i, (key, _) in enumerate(rows)}

    def bars(self, items, row, color, **kw):
        spans = [(ms(a - self.origin), ms(b - a)) for a, b in items]
        if spans:
            self.ax.broken_barh(spans, (row - _BAR_HEIGHT / 2, _BAR_HEIGHT), facecolors=color, **kw)


def _draw_gpu_ops(canvas, data, max_kernel_names, patch):
    """Kernels coloured by name (the `max_kernel_names` longest in total), copies by direction.

    Returns the legend entries."""
    kernel_total = defaultdict(int)
    for k in data.kernels:
        kernel_total[k.name] += k.duration
    named = sorted(kernel_total, key=lambda n: -kernel_total[n])[:max_kernel_names]
    colors = {n: _KERNEL_COLORS[i % len(_KERNEL_COLORS)] for i, n in enumerate(named)}
    handles = [patch(color=colors[n], label=clip(n, 32)) for n in named]
    if len(kernel_total) > len(named):
        handles.append(patch(color=_OTHER_KERNELS_COLOR, label="other kernels"))

    groups = defaultdict(list)
    for op in data.ops:
        if op.kind == "kernel":
            color = colors.get(op.name, _OTHER_KERNELS_COLOR)
        else:
            color = _COPY_COLORS.get(op.name, _OTHER_COPY_COLOR)
        groups[(canvas.row_of[("gpu", op.device, op.stream, op.process)], color)].append((op.start, op.end))
    for (row, color), items in groups.items():
        canvas.bars(items, row, color)
    for name in sorted({op.name for op in data.ops if op.kind != "kernel"}):
        handles.append(patch(color=_COPY_COLORS.get(name, _OTHER_COPY_COLOR),
                             label=f"memcpy {name}" if name != "memset" else "memset"))
    return handles


def _shade_idle_gaps(canvas, data, gap_threshold_ms, patch):
    """Idle gaps longer than the threshold, shaded on every row of their device."""
    threshold_ns = gap_threshold_ms * 1e6
    shaded = False
    for dev in sorted({op.device for op in data.ops}):
        ops = [op for op in data.ops if op.device == dev]
        gaps = [g for g in idle_gaps(ops, 0) if g.duration_ns > threshold_ns]
        for key, row in canvas.row_of.items():
            if key[0] == "gpu" and key[1] == dev:
                canvas.bars([(g.start_ns, g.end_ns) for g in gaps], row, _GAP_COLOR, alpha=_GAP_ALPHA,
                            zorder=0)
        shaded = shaded or bool(gaps)
    if not shaded:
        return []
    return [patch(color=_GAP_COLOR, alpha=_GAP_ALPHA, label=f"GPU idle > {gap_threshold_ms:g} ms")]


def _draw_nvtx(canvas, data, patch):
    """NVTX ranges per process and nesting level, labelled where they are wide enough."""
    nvtx_names = sorted({r.name for r in data.nvtx})
    nvtx_color = {n: _NVTX_COLORS[i % len(_NVTX_COLORS)] for i, n in enumerate(nvtx_names)}
    stamps = [t for op in data.ops for t in (op.start, op.end)] + [t for r in data.nvtx for t in (r.start, r.end)]
    extent = ms(max(stamps) - min(stamps)) if stamps else 1.0
    for pid, ranges in _nvtx_by_process(data).items():
        for r, level in zip(ranges, _nvtx_levels(ranges)):
            row = canvas.row_of[("nvtx", pid, level)]
            canvas.bars([(r.start, r.end)], row, nvtx_color[r.name], edgecolor="white", linewidth=0.3)
            if ms(r.duration) > 0.04 * extent and len(ranges) < 300:
                canvas.ax.text(ms(r.start - canvas.origin + r.duration / 2), row, clip(r.name, 18),
                               ha="center", va="center", fontsize=7, color="white", clip_on=True)
    return [patch(color=nvtx_color[n], label=f"NVTX {clip(n, 27)}") for n in nvtx_names[:len(_NVTX_COLORS)]]


def timeline_figure(source, gap_threshold_ms=1.0, max_kernel_names=8, title=None, width=12):
    """Matplotlib timeline of a profile (path, ProfileData or ProfileSummary).

    One row per device and stream (kernels coloured by name, copies by direction, idle gaps
    longer than the threshold shaded red), then the NVTX ranges of each process by nesting level."""
    plt = pyplot()
    from matplotlib.patches import Patch

    data = _data_of(source)
    rows = timeline_rows(data)
    fig, ax = plt.subplots(figsize=(width, 1.2 + 0.55 * max(1, len(rows))))
    canvas = _Canvas(ax, data, rows)
    handles = _draw_gpu_ops(canvas, data, max_kernel_names, Patch)
    handles += _shade_idle_gaps(canvas, data, gap_threshold_ms, Patch)
    handles += _draw_nvtx(canvas, data, Patch)

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
