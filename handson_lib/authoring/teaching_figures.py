"""The course's teaching figures: diagrams and curves the notebooks show as images.

One function per figure draws it on a new matplotlib Figure (Agg canvas, no pyplot, so a
notebook's backend is left alone); FIGURES maps each file name to its function. `handson build`
writes them as solutions/figures/<name>.svg (and copies them, like every source file, to
notebooks/figures/); `handson build --check` compares them with a fresh rendering (`stale`).

The SVG files are byte-for-byte reproducible with one matplotlib version: a fixed style (STYLE,
on top of matplotlib's defaults, so no matplotlibrc changes them), a fixed `svg.hashsalt` for
the ids, and no date or creator in the metadata.

What each figure is drawn from is said in its docstring; numbers come from the seeds or from the
same arithmetic the notebooks teach, computed here (nothing is imported from the instructor's
answer helpers, and nothing here ships to students but the SVG files).
"""

import io
from pathlib import Path

from handson_lib.authoring.figure_drawing import (ALLREDUCE_COLOR, COLORS, COMPUTE_COLOR, DARK, FALLBACK_FONTS, GREY,
                                                  SUB, _fonts, _t, arrow, blank_axes, box, drawing_in, new_figure)

FOLDER = Path("solutions") / "figures"

STYLE = {
    "font.family": "DejaVu Sans",       # bundled with matplotlib: the same glyphs everywhere
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "svg.fonttype": "path",             # text as paths: looks the same without the font
    "svg.hashsalt": "handson-teaching-figures",
    "figure.dpi": 100,
    "savefig.bbox": None,               # keep the figure size as drawn (tight boxes jitter)
}
METADATA = {"Date": None, "Creator": None}

# seed 001: ResNet-50's gradients and the measured allreduce times (hierarchical communicator,
# one MPI process per node: p = nodes), in seconds per iteration.
SEED_L = 102228384
SEED_ALLREDUCE_S = {2: 0.15, 4: 0.22}
SEED_GPUS_PER_NODE = 4
# seed 004: ResNet-50, batch 32, one V100 with cuDNN: 8.3241 iterations/s. Seed 001 gives no
# compute time; this stands in for it (same model and batch per GPU).
SEED_COMPUTE_S = 1 / 8.3241


def folder(lang="en"):
    """Where a language's figures are written: solutions/figures/, solutions/i18n/<lang>/figures/."""
    return FOLDER if lang == "en" else Path("solutions") / "i18n" / lang / "figures"


# ----------------------------------------------------------------------------- 01: the updater

def updater_reduce_broadcast():
    """Chainer 7.8.1's MultiprocessParallelUpdater.update_core, one iteration on three devices:
    each device's forward + backward, NCCL reduce (sum) of the gradients to the main device,
    the optimizer's update there, NCCL bcast of the parameters back to the workers."""
    fig = new_figure(10.5, 3.6)
    names = ["main (GPU 0)", "gpu1 (GPU 1)", "gpu2 (GPU 2)"]
    steps = [
        (_t("1. forward + backward"), _t("every device, its own\nminibatch: gradient gᵢ")),
        (_t("2. NCCL reduce (sum)"), _t("gradients summed onto\n'main': g = g₀ + g₁ + g₂")),
        (_t("3. update"), _t("the optimizer runs on\n'main' only: W ← W − lr·g")),
        (_t("4. NCCL bcast"), _t("'main' sends the new W;\nevery copy is identical")),
    ]
    axes = fig.subplots(1, 4)
    ys = [2.2, 1.1, 0.0]
    for k, (ax, (title, note)) in enumerate(zip(axes, steps)):
        blank_axes(ax, (-0.1, 2.7), (-1.45, 3.0))
        ax.set_title(title, fontsize=10, fontweight="bold")
        for i, (name, y) in enumerate(zip(names, ys)):
            if k == 0:
                label = f"{name}\ng{SUB[i]}"
            elif k == 1:
                label = _t("{name}\ng (sum)", name=name) if i == 0 else f"{name}\ng{SUB[i]}"
            elif k == 2:
                label = _t("{name}\nnew W", name=name) if i == 0 else _t("{name}\nold W (waits)", name=name)
            else:
                label = _t("{name}\nnew W", name=name)
            faded = k == 2 and i > 0
            box(ax, 0.45, y, 1.6, 0.75, label, COLORS[i], fontsize=8.5, alpha=0.35 if faded else 0.95,
                 text_color=DARK if faded else "white")
        if k == 1:
            arrow(ax, (2.1, ys[1] + 0.375), (2.1, ys[0] + 0.25), rad=0.5)
            arrow(ax, (2.1, ys[2] + 0.375), (2.1, ys[0] + 0.5), rad=0.45)
        if k == 3:
            arrow(ax, (2.1, ys[0] + 0.25), (2.1, ys[1] + 0.375), rad=-0.5)
            arrow(ax, (2.1, ys[0] + 0.5), (2.1, ys[2] + 0.375), rad=-0.45)
        ax.text(1.25, -0.75, note, ha="center", va="center", fontsize=8.5, color=DARK)
    fig.suptitle(_t("MultiprocessParallelUpdater, one iteration (devices = {'main': 0, 'gpu1': 1, "
                    "'gpu2': 2}): the sum is not divided, so the updater sets lr /= 3"),
                 fontsize=10, y=0.98)
    fig.subplots_adjust(left=0.01, right=0.99, top=0.84, bottom=0.02, wspace=0.08)
    return fig


# ----------------------------------------------------------------------------- 02: ranks

def rank_table(nodes=2, gpus=2):
    """[(rank, intra_rank, inter_rank)] when ranks fill a node before the next (Open MPI's
    default placement with select=N:mpiprocs=G)."""
    return [(node * gpus + local, local, node) for node in range(nodes) for local in range(gpus)]


def ranks_2x2():
    """The four ranks of a 2 nodes x 2 GPUs job and what ChainerMN's communicator tells each."""
    fig = new_figure(9.0, 3.9)
    ax = fig.add_subplot()
    blank_axes(ax, (0, 9.0), (-0.6, 3.4))
    nodes, gpus = 2, 2
    for node in range(nodes):
        x0 = 0.25 + node * 4.5
        from matplotlib.patches import FancyBboxPatch
        ax.add_patch(FancyBboxPatch((x0, 0.0), 4.0, 2.7, boxstyle="round,pad=0.02,rounding_size=0.1",
                                    fc="#F2F2F2", ec=DARK, lw=1.0))
        ax.text(x0 + 2.0, 2.45, _t("node {n}: comm.inter_rank = {node}", n=node + 1, node=node), ha="center", va="center",
                fontsize=10, fontweight="bold")
    for rank, intra, inter in rank_table(nodes, gpus):
        x = 0.45 + inter * 4.5 + intra * 1.85
        box(ax, x, 0.2, 1.75, 1.95,
             _t("rank {rank}\n\nintra_rank {intra}\ninter_rank {inter}\n\n→ GPU {intra}", rank=rank,
                intra=intra, inter=inter), COLORS[rank],
             fontsize=9.5)
    ax.text(4.5, 3.15, _t("#PBS -l select=2:mpiprocs=2   →   mpiexec -n 4: ranks fill node 1, then node 2"),
            ha="center", va="center", fontsize=10, family=_fonts("DejaVu Sans Mono"))
    ax.text(4.5, -0.35, _t("comm.rank: 0..size-1 over the job;  comm.intra_rank: the number within the "
                           "node (device = comm.intra_rank);  comm.inter_rank: the node"),
            ha="center", va="center", fontsize=8.5, color=DARK)
    fig.subplots_adjust(left=0.01, right=0.99, top=0.99, bottom=0.01)
    return fig


# ----------------------------------------------------------------------------- 02: scatter_dataset

def scatter_ranges(n, size, force_equal_length=True):
    """[(begin, end)] of each rank's SubDataset window over the (shuffled) order, as Chainer
    7.8.1's chainermn.datasets.scatter._scatter_index computes it."""
    if force_equal_length:
        length = (n + size - 1) // size
        return [(n * i // size, n * i // size + length) for i in range(size)]
    ranges, begin = [], 0
    for i in range(size):
        length = n // size + (1 if i < n % size else 0)
        ranges.append((begin, begin + length))
        begin += length
    return ranges


def scatter_shards(n=10, size=4, seed=0):
    """scatter_dataset(dataset, comm, shuffle=True, seed=0) of 10 examples over 4 ranks: the
    permutation, then each rank's window; with force_equal_length=True (the default) windows
    of ceil(n/size) overlap, so some examples are on two ranks."""
    import numpy
    order = numpy.random.RandomState(seed).permutation(n)
    fig = new_figure(10.0, 5.6)
    panels = fig.subplots(2, 1)
    for ax, equal in zip(panels, (True, False)):
        ranges = scatter_ranges(n, size, equal)
        blank_axes(ax, (-3.2, n + 0.3), (-size - 0.2, 1.55))
        ax.set_aspect("auto")
        ax.text(-3.1, 1.35, f"force_equal_length={equal}" + (_t("  (the default)") if equal else ""),
                fontsize=10.5, fontweight="bold", va="center")
        twice = sorted({int(order[j]) for j in range(n)
                        if sum(b <= j < e for b, e in ranges) > 1})
        note = (_t("every rank gets ceil({n}/{size}) = {length}: windows overlap, examples {twice} are on "
                   "two ranks", n=n, size=size, length=ranges[0][1] - ranges[0][0],
                   twice=", ".join(map(str, twice))) if equal else
                _t("no example twice, lengths differ (for strict test sets; updaters need equal lengths)"))
        ax.text(n + 0.2, 1.35, note, fontsize=9, va="center", ha="right", color=DARK)
        ax.text(-3.1, 0.45, _t("order[j]\n(example ids)"), fontsize=8.5, va="center")
        for j in range(n):
            _cell(ax, j, 0.1, str(order[j]), "#DDDDDD", DARK)
            ax.text(j + 0.45, 1.0, f"j={j}", ha="center", va="center", fontsize=7.5, color=GREY)
        for j in range(n):
            owners = [r for r, (b, e) in enumerate(ranges) if b <= j < e]
            for r in owners:
                twice = len(owners) > 1
                _cell(ax, j, -1.0 - r, str(order[j]), COLORS[r], "white", hatch="///" if twice else None)
        for r, (b, e) in enumerate(ranges):
            ax.text(-3.1, -0.55 - r, _t("rank {r}: [{b}, {e})", r=r, b=b, e=e), fontsize=9, va="center", color=COLORS[r])
            ax.text(n + 0.2, -0.55 - r, f"{e - b}", fontsize=9, va="center", ha="left")
        ax.text(n + 0.2, 0.55, _t("len"), fontsize=8.5, va="center", ha="left", color=GREY)
    fig.suptitle(_t("scatter_dataset(10 examples, 4 ranks, shuffle=True, seed=0): hatched examples are on "
                    "two ranks"), fontsize=10.5, y=0.995)
    fig.subplots_adjust(left=0.01, right=0.97, top=0.93, bottom=0.01, hspace=0.08)
    return fig


def _cell(ax, j, y, text, color, text_color, hatch=None):
    from matplotlib.patches import Rectangle
    ax.add_patch(Rectangle((j, y), 0.9, 0.8, fc=color, ec="black" if hatch else "white", lw=0.8,
                           hatch=hatch))
    ax.text(j + 0.45, y + 0.4, text, ha="center", va="center", fontsize=10, color=text_color,
            fontweight="bold", bbox={"fc": color, "ec": "none", "pad": 2} if hatch else None)


# ----------------------------------------------------------------------------- 04: ring allreduce

def ring_allreduce_steps(p):
    """Simulate a ring allreduce of p ranks, each buffer cut into p chunks.

    Returns (states, sent): states[s][rank][chunk] is the frozenset of ranks whose gradients that
    chunk holds after s steps (0 .. 2(p-1)); sent[rank] is how many chunks the rank sent in all.
    Reduce-scatter: in step s rank r sends chunk (r - s) mod p to rank r+1, which adds it.
    All-gather: rank r forwards the complete chunk (r + 1 - s) mod p, which rank r+1 copies."""
    state = [[frozenset([r]) for _ in range(p)] for r in range(p)]
    states, sent = [state], [0] * p
    for s in range(2 * (p - 1)):
        new = [row[:] for row in state]
        for r in range(p):
            right = (r + 1) % p
            if s < p - 1:
                chunk = (r - s) % p
                new[right][chunk] = state[right][chunk] | state[r][chunk]
            else:
                chunk = (r + 1 - (s - (p - 1))) % p
                new[right][chunk] = state[r][chunk]
            sent[r] += 1
        state = new
        states.append(state)
    return states, sent


def _chunk_label(ranks, p):
    return "Σ" if len(ranks) == p else "+".join(str(r) for r in sorted(ranks))


def ring_allreduce(p=4):
    """Ring allreduce of p = 4 ranks: the buffers at the start, after the reduce-scatter and after
    the all-gather (simulated by ring_allreduce_steps), and the bytes each rank sends,
    2(p-1) steps of L/p = 2L(p-1)/p, against p."""
    from matplotlib.patches import Rectangle
    states, sent = ring_allreduce_steps(p)
    fig = new_figure(12.0, 6.0)
    grid = fig.add_gridspec(2, 4, height_ratios=[1.3, 1.0], hspace=0.3, wspace=0.12,
                            width_ratios=[0.8, 1, 1, 1])
    snapshots = [(0, _t("start: each rank's own gradients")),
                 (p - 1, _t("after reduce-scatter ({n} steps)", n=p - 1)),
                 (2 * (p - 1), _t("after all-gather ({n} more steps)", n=p - 1))]
    for col, (step, title) in enumerate(snapshots, start=1):
        ax = fig.add_subplot(grid[0, col])
        blank_axes(ax, (-1.05, p + 0.05), (-0.1, p + 0.55))
        ax.set_title(title, fontsize=10)
        for c in range(p):
            ax.text(c + 0.46, p + 0.25, _t("chunk {c}", c=c), ha="center", va="center", fontsize=7.5,
                    color=GREY)
        for r in range(p):
            y = p - 1 - r
            ax.text(-0.1, y + 0.45, _t("rank {r}", r=r), ha="right", va="center", fontsize=9, color=COLORS[r])
            for c in range(p):
                ranks = states[step][r][c]
                full = len(ranks) == p
                color = DARK if full else (COLORS[r] if len(ranks) == 1 else "#BBBBBB")
                ax.add_patch(Rectangle((c, y), 0.94, 0.92, fc=color, ec="white"))
                ax.text(c + 0.47, y + 0.46, _chunk_label(ranks, p), ha="center", va="center",
                        fontsize=10 if len(ranks) == 1 or full else 8.5,
                        color="white" if full or len(ranks) == 1 else "black")
    ring = fig.add_subplot(grid[0, 0])
    _draw_ring(ring, p)
    curve = fig.add_subplot(grid[1, :])
    ps = list(range(1, 33))
    curve.plot(ps, [2 * (q - 1) / q for q in ps], color=ALLREDUCE_COLOR, lw=2,
               label=_t("bytes each rank sends / L = 2(p-1)/p"))
    curve.axhline(2.0, color=GREY, ls="--", lw=1, label=_t("limit 2L: does not shrink with p"))
    done = sent[0] / p * 1.0
    curve.plot([p], [done], "o", color=DARK, label=_t("p = {p}: {steps} steps x L/{p} = {done} L", p=p, steps=sent[0],
                                                         done=f"{done:g}"))
    curve.set_xscale("log", base=2)
    curve.set_xlabel(_t("ranks p (log scale)"))
    curve.set_ylabel(_t("bytes sent per rank (in L)"))
    curve.set_xlim(0.9, 36)
    curve.set_ylim(0, 2.3)
    curve.set_xticks([1, 2, 4, 8, 16, 32])
    curve.set_xticklabels(["1", "2", "4", "8", "16", "32"])
    curve.grid(alpha=0.3)
    curve.legend(loc="lower right")
    fig.suptitle(_t("Ring allreduce of a gradient of L bytes, p = {p}: each step every rank sends one "
                    "chunk (L/{p}) to its right neighbour; Σ = sum of all {p}", p=p), fontsize=10.5, y=0.985)
    fig.subplots_adjust(left=0.06, right=0.98, top=0.9, bottom=0.08)
    return fig


def _draw_ring(ax, p):
    import math
    blank_axes(ax, (-1.6, 1.6), (-1.45, 1.45))
    ax.set_title(_t("the ring: rank r sends to r+1"), fontsize=10)
    points = [(math.sin(2 * math.pi * r / p), math.cos(2 * math.pi * r / p)) for r in range(p)]
    for r in range(p):
        a, b = points[r], points[(r + 1) % p]
        arrow(ax, a, b, rad=-0.35, color=DARK, shrink=16)
    for r, (x, y) in enumerate(points):
        from matplotlib.patches import Circle
        ax.add_patch(Circle((x, y), 0.33, fc=COLORS[r], ec="black", lw=0.8))
        ax.text(x, y, str(r), ha="center", va="center", fontsize=11, color="white", fontweight="bold")


# ----------------------------------------------------------------------------- 04: compute vs allreduce

def allreduce_model(nodes, seconds_per_byte):
    """Seconds of one allreduce: 2L(p-1)/p bytes at the fitted rate (p = nodes)."""
    return 2 * SEED_L * (nodes - 1) / nodes * seconds_per_byte


def fitted_seconds_per_byte():
    """Least-squares rate through the origin of seed 001's measured allreduce times against
    the traffic 2L(p-1)/p."""
    traffic = {p: 2 * SEED_L * (p - 1) / p for p in SEED_ALLREDUCE_S}
    return (sum(traffic[p] * t for p, t in SEED_ALLREDUCE_S.items())
            / sum(traffic[p] ** 2 for p in SEED_ALLREDUCE_S))


def compute_vs_allreduce(nodes=(1, 2, 4, 8, 16)):
    """Time per iteration, compute + allreduce, against the node count: ResNet-50 at batch 32 per
    GPU, 4 GPUs per node (seed 001). Compute is constant (the batch per GPU is fixed):
    SEED_COMPUTE_S. Allreduce = 2L(p-1)/p at the bandwidth fitted to seed 001's two
    measurements; 8 and 16 nodes are the same model, extrapolated."""
    rate = fitted_seconds_per_byte()
    fig = new_figure(8.8, 4.6)
    ax = fig.add_subplot()
    labels = [_t("{n}\n({gpus} GPUs)", n=n, gpus=n * SEED_GPUS_PER_NODE) for n in nodes]
    xs = list(range(len(nodes)))
    comm = [allreduce_model(n, rate) for n in nodes]
    measured_max = max(SEED_ALLREDUCE_S)
    for x, n, a in zip(xs, nodes, comm):
        extrapolated = n > measured_max
        ax.bar(x, SEED_COMPUTE_S, color=COMPUTE_COLOR, width=0.6, alpha=0.55 if extrapolated else 1,
               label=_t("compute (forward + backward + update)") if x == 0 else None)
        ax.bar(x, a, bottom=SEED_COMPUTE_S, color=ALLREDUCE_COLOR, width=0.6,
               alpha=0.55 if extrapolated else 1, hatch="//" if extrapolated else None,
               label=_t("allreduce, model 2L(p-1)/p / bandwidth") if x == 0 else None)
        share = a / (SEED_COMPUTE_S + a)
        if a > 0:
            ax.text(x, SEED_COMPUTE_S + a / 2, f"allreduce\n{share:.0%}", ha="center", va="center",
                    fontsize=9, color="white" if not extrapolated else "black", fontweight="bold",
                    bbox={"fc": "white", "ec": "none", "pad": 1.5} if extrapolated else None)
        else:
            ax.text(x, SEED_COMPUTE_S + 0.008, _t("one node:\nno network traffic"), ha="center",
                    va="bottom", fontsize=9)
    seed_x = [xs[nodes.index(n)] for n in SEED_ALLREDUCE_S if n in nodes]
    seed_y = [SEED_COMPUTE_S + t for n, t in SEED_ALLREDUCE_S.items() if n in nodes]
    ax.plot(seed_x, seed_y, "D", color="black", ms=7, label=_t("seed 001: measured allreduce (0.15 s, 0.22 s)"))
    ax.axhline(SEED_COMPUTE_S, color=COMPUTE_COLOR, lw=0.8, ls=":")
    gbit = 1 / rate * 8 / 2 ** 30
    ax.set_xticks(xs)
    ax.set_xticklabels(labels)
    ax.set_xlabel(_t("nodes p ({gpus} GPUs each; hatched: extrapolated)", gpus=SEED_GPUS_PER_NODE))
    ax.set_ylabel(_t("seconds per iteration"))
    top = SEED_COMPUTE_S + max(comm)
    ax.set_ylim(0, top * 1.45)
    ax.set_title(_t("ResNet-50, batch 32 per GPU: L = {L} bytes, allreduce at {gbit} Gibit/s (fitted), "
                    "compute {compute} s (seed 004)", L=f"{SEED_L:,}", gbit=f"{gbit:.1f}",
                    compute=f"{SEED_COMPUTE_S:.2f}"), fontsize=10)
    ax.legend(loc="upper left", fontsize=8.5, ncol=1)
    ax.grid(axis="y", alpha=0.3)
    fig.subplots_adjust(left=0.09, right=0.98, top=0.92, bottom=0.17)
    return fig


# ----------------------------------------------------------------------------- 06: warmup

def warmup_rate(iteration, base_lr, base_batch, batch, warmup_iterations):
    """Goyal et al.'s gradual warmup: from base_lr, a constant step per update, to the linearly
    scaled rate base_lr * batch / base_batch after `warmup_iterations` updates; then that rate."""
    peak = base_lr * batch / base_batch
    if warmup_iterations == 0 or iteration >= warmup_iterations:
        return peak
    return base_lr + (peak - base_lr) * iteration / warmup_iterations


def warmup_curve(base_lr=0.1, base_batch=32, batch=256, warmup_iterations=10, iterations=16):
    """The learning rate of each update with the notebook's example (0.1 at batch 32, run at
    batch 256, W = 10), beside no warmup and no scaling."""
    fig = new_figure(8.0, 4.3)
    ax = fig.add_subplot()
    its = list(range(iterations))
    rates = [warmup_rate(i, base_lr, base_batch, batch, warmup_iterations) for i in its]
    peak = base_lr * batch / base_batch
    ax.step(its, [peak] * iterations, where="post", color=GREY, ls="--", lw=1.2,
            label=_t("scaled rate from the start, no warmup: {peak}", peak=f"{peak:g}"))
    ax.step(its, [base_lr] * iterations, where="post", color=COMPUTE_COLOR, ls=":", lw=1.5,
            label=_t("no scaling rule: {lr}", lr=f"{base_lr:g}"))
    ax.plot(its, rates, "o-", color=ALLREDUCE_COLOR, lw=2, ms=5,
            label=_t("gradual warmup over W = {w} updates", w=warmup_iterations))
    ax.axvline(warmup_iterations, color=DARK, lw=0.8, ls="-.")
    ax.annotate(f"i = W = {warmup_iterations}:\nlr = k·η = {peak:g}", (warmup_iterations, peak),
                xytext=(warmup_iterations + 1.0, peak - 0.22), fontsize=9,
                arrowprops={"arrowstyle": "->", "color": DARK})
    step = (peak - base_lr) / warmup_iterations
    ax.annotate(_t("+{step} per update", step=f"{step:g}"), (4, rates[4]), xytext=(4.8, rates[4] - 0.2), fontsize=9,
                arrowprops={"arrowstyle": "->", "color": DARK})
    ax.set_xlabel(_t("update i (trainer.updater.iteration before the update)"))
    ax.set_ylabel(_t("learning rate"))
    ax.set_title(_t("η = {lr} tuned at batch {base}, run at batch {batch}: k = {k}, k·η = {peak}",
                    lr=f"{base_lr:g}", base=base_batch, batch=batch, k=batch // base_batch, peak=f"{peak:g}"),
                 fontsize=10)
    ax.set_xlim(-0.5, iterations - 0.5)
    ax.set_ylim(0, peak * 1.2)
    ax.set_xticks(its)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", bbox_to_anchor=(1.0, 0.14), fontsize=8.5)
    fig.subplots_adjust(left=0.09, right=0.98, top=0.92, bottom=0.12)
    return fig


# ----------------------------------------------------------------------------- files

#: file name (without .svg) -> function drawing the figure
FIGURES = {
    "updater_reduce_broadcast": updater_reduce_broadcast,
    "ranks_2x2": ranks_2x2,
    "scatter_shards": scatter_shards,
    "ring_allreduce": ring_allreduce,
    "compute_vs_allreduce": compute_vs_allreduce,
    "warmup_lr": warmup_curve,
}


def render(name, fmt="svg", lang="en"):
    """The bytes of figure `name` as `fmt` (svg, or png to look at it), with the course's style,
    its words in `lang` (figure_drawing.FIGURE_TEXT)."""
    import matplotlib
    import matplotlib.style
    style = dict(STYLE, **{"font.family": _fonts_for(lang)})
    with drawing_in(lang), matplotlib.style.context("default"), matplotlib.rc_context(style):
        fig = FIGURES[name]()
        out = io.BytesIO()
        fig.savefig(out, format=fmt, metadata=METADATA if fmt == "svg" else None)
    return out.getvalue()


def _fonts_for(lang):
    return [STYLE["font.family"], *FALLBACK_FONTS.get(lang, [])]


def rendered():
    """{path relative to the course root: SVG bytes} of every figure, in every language."""
    from handson_lib.authoring.translations import LANGUAGES
    return {folder(lang) / f"{name}.svg": render(name, lang=lang)
            for lang in ("en", *LANGUAGES) for name in FIGURES}


def _extra(root, expected):
    from handson_lib.authoring.translations import LANGUAGES
    found = []
    for lang in ("en", *LANGUAGES):
        where = Path(root) / folder(lang)
        if where.is_dir():
            found += [path.relative_to(root) for path in sorted(where.glob("*.svg"))
                      if path.relative_to(root) not in expected]
    return found


def write(root):
    """Write every figure under `root` that differs, remove SVGs no function draws; the
    relative paths written and removed."""
    files = rendered()
    written = []
    for rel, data in files.items():
        path = Path(root) / rel
        if not path.exists() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            written.append(rel)
    removed = _extra(root, files)
    for rel in removed:
        (Path(root) / rel).unlink()
    return written, removed


def stale(root):
    """[(relative path, what is wrong)] for figures missing, edited or drawn by no function."""
    files = rendered()
    found = []
    for rel, data in files.items():
        path = Path(root) / rel
        if not path.exists():
            found.append((rel, "missing: run `handson build`"))
        elif path.read_bytes() != data:
            found.append((rel, "differs from its drawing in handson_lib/authoring/teaching_figures.py: "
                               "run `handson build` (edit the function, never the SVG)"))
    for rel in _extra(root, files):
        found.append((rel, "drawn by no function of handson_lib/authoring/teaching_figures.py: run "
                           "`handson build` (it removes it)"))
    return found
