"""A large-batch result shown: mean test accuracy per batch and schedule as a table, and against
the total batch as a figure."""

from handson_lib.messages import tr
from handson_lib.plotting import pyplot

def format_table(result):
    """Mean test accuracy (%) per batch and schedule, the spread over seeds, as text."""
    schedules = result["schedules"]
    lines = [f"{'total batch':>11s} " + " ".join(f"{s:>22s}" for s in schedules)]
    for i, batch in enumerate(result["batches"]):
        cells = []
        for s in schedules:
            low, high = result["spread"][s][i]
            note = f" ({low * 100:.1f}-{high * 100:.1f})" if high > low else ""
            diverged = "!" if result["diverged"][s][i] else ""
            cells.append(f"{result['accuracy'][s][i] * 100:.1f}{diverged}{note}")
        lines.append(f"{batch:11d} " + " ".join(f"{c:>22s}" for c in cells))
    seeds = result["config"]["seeds"]
    lines.append((tr("test accuracy in %, mean over {n} seed(s) (min-max)", n=len(seeds)) if len(seeds) > 1
                  else tr("test accuracy in %, mean over {n} seed(s)", n=len(seeds)))
                 + (tr("; ! = some runs diverged (NaN weights count as 0 %)")
                    if any(any(v) for v in result["diverged"].values()) else ""))
    return "\n".join(lines)


def accuracy_figure(result, title=None):
    """Test accuracy vs total batch (log2 axis), one line per schedule, the seed spread shaded."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    styles = {"fixed": ("#C44E52", "o"), "scaled": ("#4C72B0", "s"), "scaled+warmup": ("#55A868", "^")}
    batches = result["batches"]
    for schedule in result["schedules"]:
        color, marker = styles.get(schedule, (None, "o"))
        acc = [a * 100 for a in result["accuracy"][schedule]]
        label = {"fixed": "fixed lr", "scaled": "linear scaling rule",
                 "scaled+warmup": "scaling + gradual warmup"}.get(schedule, schedule)
        ax.plot(batches, acc, marker=marker, color=color, label=label)
        low = [s[0] * 100 for s in result["spread"][schedule]]
        high = [s[1] * 100 for s in result["spread"][schedule]]
        if low != high:
            ax.fill_between(batches, low, high, color=color, alpha=0.15)
    ax.set_xscale("log", base=2)
    ax.set_xticks(batches)
    ax.set_xticklabels([str(b) for b in batches])
    ax.set_xlabel("total batch size (workers x batch per worker)")
    ax.set_ylabel("test accuracy [%]")
    cfg = result["config"]
    ax.set_title(title or f"{cfg['model']}, {cfg['epochs']} epochs, "
                          f"base lr {cfg['base_lr']} at batch {cfg['base_batch']}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig
