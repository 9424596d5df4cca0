"""The text report of a ProfileSummary (`handson profile summarize FILE`), and its number formats."""

from handson_lib.messages import tr


def ms(ns):
    return ns / 1e6


def size_text(nbytes):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


def clip(name, width=48):
    return name if len(name) <= width else name[:width - 3] + "..."


def _kernel_table(stats, indent="    "):
    lines = [f"{indent}{'kernel':<48} {'count':>7} {'total ms':>10} {'mean ms':>9} {'share':>7}"]
    for s in stats:
        lines.append(f"{indent}{clip(s.name):<48} {s.count:>7} {ms(s.total_ns):>10.3f} "
                     f"{ms(s.mean_ns):>9.3f} {s.share:>6.1%}" + ("  (NCCL)" if s.nccl else ""))
    return lines


def _memcpy_table(stats, indent="    "):
    lines = [f"{indent}{'memcpy':<8} {'count':>7} {'bytes':>14} {'':>9} {'total ms':>10} {'GB/s':>7}"]
    for m in stats:
        lines.append(f"{indent}{m.direction:<8} {m.count:>7} {m.bytes:>14} {size_text(m.bytes):>9} "
                     f"{ms(m.total_ns):>10.3f} {m.gb_per_s:>7.2f}")
    return lines


def report_text(s):
    """The report in the reader's language (tr); the tables' column names stay as the tools name them."""
    threshold = s.gap_threshold_ms
    zero = tr("the start of the capture") if s.format == "nsys" else tr("the first event")
    kind = tr("Nsight Systems SQLite export") if s.format == "nsys" else tr("nvprof output file")
    tool = f" ({s.tool})" if s.tool and s.tool != "nvprof" else ""
    lines = [tr("Profile: {path}", path=s.path),
             "  " + tr("format: {kind}{tool}; times in ms from {zero}", kind=kind, tool=tool, zero=zero),
             "  " + tr("{processes} process(es), {devices} device(s), {kernels} kernel launches, {memcpy} memcpy, "
                       "{nvtx} NVTX ranges, events from {start:.1f} to {end:.1f} ms", processes=len(s.processes),
                       devices=s.device_count, kernels=s.kernel_count, memcpy=s.memcpy_count, nvtx=s.nvtx_count,
                       start=ms(s.start_ns), end=ms(s.end_ns))]
    for note in s.notes:
        lines.append(f"  note: {note}")
    for d in s.devices:
        lines += _device_lines(d, threshold)
    if s.device_count > 1:
        lines += ["", tr("All devices: busy fraction {busy:.3f}", busy=s.busy_fraction)]
        if s.top_kernels:
            lines += ["  " + tr("top kernels by total time:")] + _kernel_table(s.top_kernels)
    for p in s.processes:
        label = tr("unknown process") if p.process is None else tr("process {process}", process=p.process)
        lines += ["", tr("{process}; devices {devices}; {kernels} kernels, {ms:.3f} ms; {size} copied",
                         process=label + (f": {p.name}" if p.name else ""),
                         devices=", ".join(str(x) for x in p.devices) or "none", kernels=p.kernel_count,
                         ms=ms(p.kernel_time_ns), size=size_text(p.memcpy_bytes))]
        if p.nvtx:
            lines.append(f"  {'NVTX range':<40} {'count':>7} {'total ms':>10}")
            for r in p.nvtx[:s.top or None]:
                lines.append(f"  {clip(r.name, 40):<40} {r.count:>7} {ms(r.total_ns):>10.3f}")
    return "\n".join(lines)


def _device_lines(d, threshold):
    """The lines of one GPU: its span, busy fraction, kernels, copies and idle gaps."""
    title = f"GPU {d.device}" + (f" ({d.name})" if d.name else "")
    lines = ["", tr("{gpu}: process {processes}; streams {streams}", gpu=title,
                    processes=", ".join(str(p) for p in d.processes) or "unknown",
                    streams=", ".join(str(x) for x in d.streams)),
             "  " + tr("GPU activity from {start:.1f} to {end:.1f} ms: span {span:.1f} ms", start=ms(d.start_ns),
                       end=ms(d.end_ns), span=ms(d.span_ns)),
             "  " + tr("busy fraction (kernels)  : {busy:.3f}  ({busy_ms:.1f} ms of the span; kernels + copies: "
                       "{active:.3f})", busy=d.busy_fraction, busy_ms=ms(d.busy_ns), active=d.active_fraction),
             "  " + tr("kernels                  : {launches} launches of {kernels} kernel(s), {total:.3f} ms in total",
                       launches=d.kernel_count, kernels=d.kernel_names, total=ms(d.kernel_time_ns)),
             "  " + tr("communication (NCCL)     : {share:.1%} of kernel time ({nccl:.3f} ms)", share=d.nccl_share,
                       nccl=ms(d.nccl_time_ns))]
    if d.top_kernels:
        lines += ["  " + tr("top kernels by total time:")] + _kernel_table(d.top_kernels)
    if d.memcpy:
        lines += ["  " + tr("copies by direction:")] + _memcpy_table(d.memcpy)
    if d.gaps:
        share = d.gap_total_ns / d.span_ns if d.span_ns else 0.0
        lines.append("  " + tr("idle gaps > {threshold:g} ms: {n}, {total:.1f} ms in total ({share:.0%} of the span)  "
                               "<-- the GPU waits for the host", threshold=threshold, n=len(d.gaps),
                               total=ms(d.gap_total_ns), share=share))
        for g in sorted(d.gaps, key=lambda g: -g.duration_ns)[:5]:
            lines.append("    " + tr("{duration:9.3f} ms from {start:.1f} ms (after {after}, before {before})",
                                     duration=ms(g.duration_ns), start=ms(g.start_ns), after=g.after, before=g.before))
        if d.host_during_gaps or d.gaps_outside_nvtx_ns:
            parts = [f"{name} {ms(ns):.1f} ms" for name, ns in d.host_during_gaps[:5]]
            if d.gaps_outside_nvtx_ns:
                parts.append(tr("no NVTX range {ms:.1f} ms", ms=ms(d.gaps_outside_nvtx_ns)))
            lines.append("    " + tr("host during the gaps (NVTX): ") + ", ".join(parts))
    else:
        lines.append("  " + tr("idle gaps > {threshold:g} ms: none", threshold=threshold))
    if d.longest_gap:
        lines.append("  " + tr("longest idle gap: {ms:.3f} ms", ms=ms(d.longest_gap.duration_ns)))
    return lines
