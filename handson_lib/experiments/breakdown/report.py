"""Breakdown results shown: the phase table, rank 0's TimerHook table, the stacked phase bars and
the scaling figure; the JSON form `--json` writes and `handson bench report` reads."""

from handson_lib.experiments.figures import scaling_plot
from handson_lib.messages import tr
from handson_lib.plotting import pyplot
from handson_lib.runtime.phases import OTHER, PHASE_COLORS, PHASES

def link_text(result):
    """Where the ranks' bytes went: 'one host' or the shaped link's profile and rate."""
    link = result.get("link") or {}
    if not link.get("rate_bps"):
        return "one host (shared memory, no network)"
    return f"{link['profile']} link, {link['rate_bps'] / 1e9:g} Gbit/s per node"


def _label(result):
    if result.get("model") and result.get("batchsize"):
        return f"{result['model']}, batch {result['batchsize']} per rank"
    return "training script"


def phase_figure(results_by_np, title=None):
    """Stacked bars: ms per iteration in each phase, one bar per rank count (mean over ranks)."""
    plt = pyplot()
    counts = sorted(results_by_np)
    fig, ax = plt.subplots(figsize=(1.6 * len(counts) + 4.5, 4))
    names = list(PHASES) + [OTHER]
    bottoms = [0.0] * len(counts)
    for name in names:
        values = [max(0.0, results_by_np[p]["phases_s"].get(name, 0.0)) * 1e3 for p in counts]
        ax.bar([str(p) for p in counts], values, bottom=bottoms, label=name,
               color=PHASE_COLORS.get(name), width=0.6)
        bottoms = [b + v for b, v in zip(bottoms, values)]
    for i, p in enumerate(counts):
        ax.text(i, bottoms[i], f"{results_by_np[p]['iteration_s'] * 1e3:.1f} ms", ha="center",
                va="bottom", fontsize=8)
    first = results_by_np[counts[0]]
    ax.set_xlabel("ranks (p)")
    ax.set_ylabel("ms per iteration (median)")
    ax.set_title(title or f"{_label(first)}, {link_text(first)}: time per iteration")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    return fig


def scaling_figure(results_by_np, title=None):
    """Throughput vs ranks with the linear ideal, and the efficiency (figures.scaling_plot)."""
    first = results_by_np[min(results_by_np)]
    return scaling_plot({p: r["throughput"] for p, r in results_by_np.items()},
                        title=title or f"{_label(first)}: throughput vs ranks (phase-timed runs)")


def format_phase_table(results_by_np, efficiency=None):
    """Median ms per phase and rank count, the images/s; with `efficiency` ({p: value}, e.g. the
    notebook's own) an efficiency column too."""
    names = list(PHASES) + [OTHER]
    eff = efficiency or {}
    head = (f"{'ranks':>5s} " + " ".join(f"{n:>9s}" for n in names)
            + f" {'iteration':>9s}   {'images/s':>9s}" + (f" {'efficiency':>10s}" if eff else ""))
    lines = [tr("median ms per iteration (mean over ranks)"), head]
    for p in sorted(results_by_np):
        r = results_by_np[p]
        cells = " ".join(f"{r['phases_s'].get(n, 0.0) * 1e3:9.2f}" for n in names)
        rate = f"{r['throughput']:9.1f}" if r.get("throughput") else f"{'-':>9s}"
        e = "" if not eff else f" {eff[p]:10.2f}" if eff.get(p) is not None else f" {'-':>10s}"
        lines.append(f"{p:5d} {cells} {r['iteration_s'] * 1e3:9.2f}   {rate}{e}")
    return "\n".join(lines)


def format_timer_table(result, top=10):
    hook = result["timer_hook"]
    lines = [tr("TimerHook on rank 0 of {np}, {iterations} iterations, {total:.1f} ms in functions "
                "(forward and backward; a backward's inner functions count in their own row too, so "
                "shares may add up to more than 100%):", np=result['np'], iterations=hook['iterations'],
                total=hook['total_ms']),
             f"{'function':32s} {'count':>7s} {'total ms':>10s} {'ms/iter':>9s} {'share':>7s}"]
    for row in hook["rows"][:top]:
        lines.append(f"{row['function']:32s} {row['count']:7d} {row['total_ms']:10.2f} "
                     f"{row['ms_per_iteration']:9.3f} {row['share'] * 100:6.1f}%")
    return "\n".join(lines)


def as_json(results_by_np):
    """The file `--json` writes: {"benchmark": "breakdown", "results": {"<p>": result}}."""
    return {"benchmark": "breakdown", "results": {str(p): r for p, r in results_by_np.items()}}


def from_json(saved):
    """results_by_np from what `as_json` wrote."""
    return {int(p): r for p, r in saved["results"].items()}


def report_title(saved):
    results = from_json(saved)
    return f"phase breakdown on {', '.join(map(str, sorted(results)))} rank(s), {_label(results[min(results)])}"


def report_table(saved):
    return format_phase_table(from_json(saved))


def report_figure(saved):
    return phase_figure(from_json(saved))
