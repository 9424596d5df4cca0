"""The text report of a ProfileSummary (`handson profile summarize FILE`), and its number formats."""


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
    threshold = s.gap_threshold_ms
    zero = "the start of the capture" if s.format == "nsys" else "the first event"
    kind = "Nsight Systems SQLite export" if s.format == "nsys" else "nvprof output file"
    tool = f" ({s.tool})" if s.tool and s.tool != "nvprof" else ""
    lines = [f"Profile: {s.path}",
             f"  format: {kind}{tool}; times in ms from {zero}",
             f"  {len(s.processes)} process(es), {s.device_count} device(s), {s.kernel_count} kernel launches, "
             f"{s.memcpy_count} memcpy, {s.nvtx_count} NVTX ranges, events from "
             f"{ms(s.start_ns):.1f} to {ms(s.end_ns):.1f} ms"]
    for note in s.notes:
        lines.append(f"  note: {note}")
    for d in s.devices:
        title = f"GPU {d.device}" + (f" ({d.name})" if d.name else "")
        procs = ", ".join(str(p) for p in d.processes) or "unknown"
        lines += ["", f"{title}: process {procs}; streams {', '.join(str(x) for x in d.streams)}",
                  f"  GPU activity from {ms(d.start_ns):.1f} to {ms(d.end_ns):.1f} ms: span {ms(d.span_ns):.1f} ms",
                  f"  busy fraction (kernels)  : {d.busy_fraction:.3f}  ({ms(d.busy_ns):.1f} ms of the span; "
                  f"kernels + copies: {d.active_fraction:.3f})",
                  f"  kernels                  : {d.kernel_count} launches of {d.kernel_names} kernel(s), "
                  f"{ms(d.kernel_time_ns):.3f} ms in total",
                  f"  communication (NCCL)     : {d.nccl_share:.1%} of kernel time ({ms(d.nccl_time_ns):.3f} ms)"]
        if d.top_kernels:
            lines += ["  top kernels by total time:"] + _kernel_table(d.top_kernels)
        if d.memcpy:
            lines += ["  copies by direction:"] + _memcpy_table(d.memcpy)
        if d.gaps:
            share = d.gap_total_ns / d.span_ns if d.span_ns else 0.0
            lines.append(f"  idle gaps > {threshold:g} ms: {len(d.gaps)}, {ms(d.gap_total_ns):.1f} ms in total "
                         f"({share:.0%} of the span)  <-- the GPU waits for the host")
            for g in sorted(d.gaps, key=lambda g: -g.duration_ns)[:5]:
                lines.append(f"    {ms(g.duration_ns):9.3f} ms from {ms(g.start_ns):.1f} ms "
                             f"(after {g.after}, before {g.before})")
            if d.host_during_gaps or d.gaps_outside_nvtx_ns:
                parts = [f"{name} {ms(ns):.1f} ms" for name, ns in d.host_during_gaps[:5]]
                if d.gaps_outside_nvtx_ns:
                    parts.append(f"no NVTX range {ms(d.gaps_outside_nvtx_ns):.1f} ms")
                lines.append("    host during the gaps (NVTX): " + ", ".join(parts))
        else:
            lines.append(f"  idle gaps > {threshold:g} ms: none")
        if d.longest_gap:
            lines.append(f"  longest idle gap: {ms(d.longest_gap.duration_ns):.3f} ms")
    if s.device_count > 1:
        lines += ["", f"All devices: busy fraction {s.busy_fraction:.3f}"]
        if s.top_kernels:
            lines += ["  top kernels by total time:"] + _kernel_table(s.top_kernels)
    for p in s.processes:
        label = "unknown process" if p.process is None else f"process {p.process}"
        lines += ["", f"{label}" + (f": {p.name}" if p.name else "") +
                  f"; devices {', '.join(str(x) for x in p.devices) or 'none'}; {p.kernel_count} kernels, "
                  f"{ms(p.kernel_time_ns):.3f} ms; {size_text(p.memcpy_bytes)} copied"]
        if p.nvtx:
            lines.append(f"  {'NVTX range':<40} {'count':>7} {'total ms':>10}")
            for r in p.nvtx[:s.top or None]:
                lines.append(f"  {clip(r.name, 40):<40} {r.count:>7} {ms(r.total_ns):>10.3f}")
    return "\n".join(lines)
