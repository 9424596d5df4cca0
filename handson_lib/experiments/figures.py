"""Figures the notebooks show (kept here so that tests reach them). matplotlib is imported by each
function, so that importing this module (the benchmarks do) costs nothing. Their words are in the
reader's language (tr), as the notebook that shows them."""

from handson_lib.messages import tr
from handson_lib.plotting import pyplot

_GPU_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52")


def _box(ax, x, y, w, h, text, color, fontsize=9):
    from matplotlib.patches import FancyBboxPatch
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02", fc=color, ec="black",
                                alpha=0.85))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, color="white")


def _arrow(ax, start, end, text=None):
    from matplotlib.patches import FancyArrowPatch
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="black"))
    if text:
        ax.text((start[0] + end[0]) / 2 + 0.02, (start[1] + end[1]) / 2, text, fontsize=8)


def parallelism_diagram(n_workers=2):
    """Data parallelism (same model, split data, averaged gradients) beside model parallelism
    (the layers of one model split over devices, the same data flowing through all)."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax in (left, right):
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.axis("off")

    left.set_title(tr("Data parallelism\n(MultiprocessParallelUpdater, ChainerMN)"))
    width = 0.8 / n_workers
    for i in range(n_workers):
        x = 0.1 + i * width
        color = _GPU_COLORS[i % len(_GPU_COLORS)]
        _box(left, x + 0.02, 0.78, width - 0.04, 0.12, tr("data shard {i}", i=i), "#777777")
        _box(left, x + 0.02, 0.42, width - 0.04, 0.22, tr("GPU {i}\nfull model copy", i=i), color)
        _arrow(left, (x + width / 2, 0.78), (x + width / 2, 0.65))
        _arrow(left, (x + width / 2, 0.42), (x + width / 2, 0.27))
    _box(left, 0.1, 0.1, 0.8, 0.15, tr("allreduce: average the gradients, every copy updates alike"),
         "#333333")

    right.set_title(tr("Model parallelism\n(one model too large for one GPU)"))
    _box(right, 0.3, 0.8, 0.4, 0.12, tr("the whole minibatch"), "#777777")
    layers = [tr("layers {first}-{last}", first=n, last=n + 1) for n in (1, 3, 5)]
    for i, name in enumerate(layers):
        y = 0.58 - i * 0.22
        _box(right, 0.3, y, 0.4, 0.15, f"GPU {i}: {name}", _GPU_COLORS[i % len(_GPU_COLORS)])
        _arrow(right, (0.5, y + 0.22 if i else 0.8), (0.5, y + 0.155),
               tr("activations") if i else None)
    fig.tight_layout()
    return fig


def sample_grid(dataset, n=20, columns=10, title=None, class_names=None):
    """The first `n` images of a TupleDataset (C,H,W float in [0,1]) with their labels."""
    plt = pyplot()
    import numpy as np
    rows = (n + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(columns * 1.1, rows * 1.3))
    for ax, i in zip(np.ravel(axes), range(n)):
        image, label = dataset[i]
        image = np.asarray(image)
        if image.ndim == 1:
            side = int(round(image.size ** 0.5))
            image = image.reshape(1, side, side)
        picture = image[0] if image.shape[0] == 1 else image.transpose(1, 2, 0)
        ax.imshow(np.clip(picture, 0, 1), cmap="gray" if image.shape[0] == 1 else None)
        ax.set_title(class_names[label] if class_names else str(int(label)), fontsize=8)
    for ax in np.ravel(axes):
        ax.axis("off")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def throughput_bars(groups, title=None, ylabel="images/sec."):
    """Bar charts side by side, one per group: {group title: {label: images/s or None}}."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(groups), figsize=(5.5 * len(groups), 3.8), squeeze=False)
    for ax, (group, values) in zip(axes[0], groups.items()):
        labels = list(values)
        heights = [values[k] or 0 for k in labels]
        bars = ax.bar(range(len(labels)), heights, color=_GPU_COLORS[:len(labels)])
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_title(group, fontsize=10)
        ax.set_ylabel(ylabel)
        for bar, value in zip(bars, heights):
            ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(),
                    f"{value:.1f}" if value else "n/a", ha="center", va="bottom", fontsize=8)
    fig.suptitle(title or tr("Throughput"))
    fig.tight_layout()
    return fig


def scaling_plot(measured, seed_points=None, title=None):
    """Throughput and ideal linear scaling: measured = {workers: images/s}."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    workers = sorted(k for k, v in measured.items() if v)
    rates = [measured[k] for k in workers]
    if workers:
        left.plot(workers, rates, "o-", label=tr("measured here"))
        left.plot(workers, [rates[0] * k / workers[0] for k in workers], "k--", label=tr("linear (ideal)"))
        right.bar([str(k) for k in workers], [r / (rates[0] * k / workers[0]) for k, r in zip(workers, rates)],
                  color=_GPU_COLORS[0])
    left.set_xticks(sorted(set(workers) | set(seed_points or {})))
    left.set_xlabel(tr("ranks"))
    left.set_ylabel("images/sec.")
    left.set_title(tr("this machine"))
    left.legend()
    right.set_ylim(0, 1.1)
    right.set_xlabel(tr("ranks"))
    right.set_ylabel(tr("scaling efficiency"))
    right.set_title(tr("efficiency = measured / ideal"))
    if seed_points:
        ax = left.twinx()
        ax.plot(list(seed_points), list(seed_points.values()), "s:", color=_GPU_COLORS[1],
                label=tr("seed 002 (Reedbush P100)"))
        ax.set_ylabel(tr("images/sec. (seed)"))
        ax.legend(loc="lower right")
    fig.suptitle(title or tr("Throughput vs number of workers"))
    fig.tight_layout()
    return fig
