"""What every teaching figure is drawn with (handson_lib.authoring.teaching_figures): the colours,
the figure and its shapes (boxes, arrows, blank axes), and the figures' words in other languages
(`_t`, like gettext's `_`: a template in the language being drawn)."""

import contextlib

COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52")
GREY = "#777777"
DARK = "#333333"
COMPUTE_COLOR = "#4C72B0"
SUB = "₀₁₂₃₄₅₆₇₈₉"   # subscript digits: plain text, no mathtext
ALLREDUCE_COLOR = "#C44E52"


# ----------------------------------------------------------------------------- languages

#: The language a figure is being drawn in (drawing_in sets it; the drawing functions read it via _t).
_DRAWING = {"lang": "en"}
#: A figure's words in another language: {lang: {English template: translation}}. Code, API names
#: and formulas stay as they are; the fields ({n}) are filled in after the lookup.
FIGURE_TEXT = {"ja": {
    "1. forward + backward": "1. forward と backward",
    "every device, its own\nminibatch: gradient gᵢ": "各デバイスが自分の\nミニバッチで: 勾配 gᵢ",
    "2. NCCL reduce (sum)": "2. NCCL の reduce（和）",
    "gradients summed onto\n'main': g = g₀ + g₁ + g₂": "勾配の和を 'main' に:\ng = g₀ + g₁ + g₂",
    "3. update": "3. 更新",
    "the optimizer runs on\n'main' only: W ← W − lr·g": "オプティマイザは 'main'\nだけで動く: W ← W − lr·g",
    "4. NCCL bcast": "4. NCCL の bcast",
    "'main' sends the new W;\nevery copy is identical": "'main' が新しい W を送る。\nどの複製も同じになる",
    "{name}\ng (sum)": "{name}\ng（和）",
    "{name}\nnew W": "{name}\n新しい W",
    "{name}\nold W (waits)": "{name}\n古い W（待つ）",
    "MultiprocessParallelUpdater, one iteration (devices = {'main': 0, 'gpu1': 1, 'gpu2': 2}): the sum is "
    "not divided, so the updater sets lr /= 3":
        "MultiprocessParallelUpdater の 1 イテレーション（devices = {'main': 0, 'gpu1': 1, 'gpu2': 2}）: "
        "和は割られないので、アップデータが lr /= 3 とする",
    "node {n}: comm.inter_rank = {node}": "ノード {n}: comm.inter_rank = {node}",
    "rank {rank}\n\nintra_rank {intra}\ninter_rank {inter}\n\n→ GPU {intra}":
        "ランク {rank}\n\nintra_rank {intra}\ninter_rank {inter}\n\n→ GPU {intra}",
    "#PBS -l select=2:mpiprocs=2   →   mpiexec -n 4: ranks fill node 1, then node 2":
        "#PBS -l select=2:mpiprocs=2   →   mpiexec -n 4: ランクはノード 1、次にノード 2 を埋める",
    "comm.rank: 0..size-1 over the job;  comm.intra_rank: the number within the node (device = "
    "comm.intra_rank);  comm.inter_rank: the node":
        "comm.rank: ジョブ全体で 0..size-1。comm.intra_rank: ノード内の番号（device = comm.intra_rank）。"
        "comm.inter_rank: ノードの番号",
    "  (the default)": "（既定）",
    "every rank gets ceil({n}/{size}) = {length}: windows overlap, examples {twice} are on two ranks":
        "どのランクも ceil({n}/{size}) = {length} 個: 窓が重なり、サンプル {twice} は 2 つのランクにある",
    "no example twice, lengths differ (for strict test sets; updaters need equal lengths)":
        "重複はないが長さが違う（厳密なテストセット向け。アップデータには同じ長さが必要）",
    "order[j]\n(example ids)": "order[j]\n（サンプルの番号）",
    "rank {r}: [{b}, {e})": "ランク {r}: [{b}, {e})",
    "len": "len",
    "scatter_dataset(10 examples, 4 ranks, shuffle=True, seed=0): hatched examples are on two ranks":
        "scatter_dataset(10 サンプル, 4 ランク, shuffle=True, seed=0): 斜線のサンプルは 2 つのランクにある",
    "start: each rank's own gradients": "最初: 各ランク自身の勾配",
    "after reduce-scatter ({n} steps)": "reduce-scatter の後（{n} ステップ）",
    "after all-gather ({n} more steps)": "all-gather の後（さらに {n} ステップ）",
    "chunk {c}": "C{c}",
    "rank {r}": "ランク {r}",
    "bytes each rank sends / L = 2(p-1)/p": "各ランクが送るバイト数 / L = 2(p-1)/p",
    "limit 2L: does not shrink with p": "上限 2L: p を増やしても小さくならない",
    "p = {p}: {steps} steps x L/{p} = {done} L": "p = {p}: {steps} ステップ x L/{p} = {done} L",
    "ranks p (log scale)": "ランク数 p（対数目盛）",
    "bytes sent per rank (in L)": "ランクあたりの送信バイト数（L 単位）",
    "Ring allreduce of a gradient of L bytes, p = {p}: each step every rank sends one chunk (L/{p}) to its "
    "right neighbour; Σ = sum of all {p}":
        "L バイトの勾配のリング allreduce、p = {p}: 各ステップで、どのランクも 1 つのチャンク（C0, C1, …、"
        "それぞれ L/{p}）を右隣に送る。Σ = {p} 個すべての和",
    "the ring: rank r sends to r+1": "リング: ランク r は r+1 に送る",
    "{n}\n({gpus} GPUs)": "{n}\n（GPU {gpus} 枚）",
    "compute (forward + backward + update)": "計算（forward + backward + update）",
    "allreduce, model 2L(p-1)/p / bandwidth": "allreduce、モデル 2L(p-1)/p / 帯域幅",
    "one node:\nno network traffic": "1 ノード:\nネットワーク通信なし",
    "seed 001: measured allreduce (0.15 s, 0.22 s)": "シード資料 001: 測定した allreduce（0.15 秒、0.22 秒）",
    "nodes p ({gpus} GPUs each; hatched: extrapolated)": "ノード数 p（各 GPU {gpus} 枚。斜線: 外挿）",
    "seconds per iteration": "1 イテレーションあたりの秒数",
    "ResNet-50, batch 32 per GPU: L = {L} bytes, allreduce at {gbit} Gibit/s (fitted), compute {compute} s "
    "(seed 004)":
        "ResNet-50、バッチ 32/GPU: L = {L} バイト、allreduce {gbit} Gibit/s（当てはめ）、"
        "計算 {compute} 秒（シード資料 004）",
    "scaled rate from the start, no warmup: {peak}": "最初からスケールした学習率、ウォームアップなし: {peak}",
    "no scaling rule: {lr}": "スケーリング則なし: {lr}",
    "gradual warmup over W = {w} updates": "W = {w} 回の更新での段階的ウォームアップ",
    "+{step} per update": "更新ごとに +{step}",
    "update i (trainer.updater.iteration before the update)": "更新 i（更新の前の trainer.updater.iteration）",
    "learning rate": "学習率",
    "η = {lr} tuned at batch {base}, run at batch {batch}: k = {k}, k·η = {peak}":
        "η = {lr} はバッチ {base} で調整、バッチ {batch} で実行: k = {k}、k·η = {peak}",
}}
#: Each language's font after the course's (the figures' CJK text: Noto Sans CJK, .ci/run installs it).
FALLBACK_FONTS = {"ja": ["Noto Sans CJK JP"]}
_UNTRANSLATED = []   # English templates drawn in another language without a translation (tests read it)


def _t(template, **fields):
    """`template` in the language being drawn, its fields filled in."""
    lang = _DRAWING["lang"]
    text = template
    if lang != "en":
        text = FIGURE_TEXT.get(lang, {}).get(template)
        if text is None:
            _UNTRANSLATED.append(template)
            text = template
    return text.format(**fields) if fields else text


def _fonts(first):
    """A font family with the language's fallback for the glyphs `first` lacks."""
    return [first, *FALLBACK_FONTS.get(_DRAWING["lang"], [])]


@contextlib.contextmanager
def drawing_in(lang):
    """The figures drawn inside this block speak `lang` (`_t`, `_fonts`)."""
    _DRAWING["lang"] = lang
    try:
        yield
    finally:
        _DRAWING["lang"] = "en"


# ----------------------------------------------------------------------------- drawing helpers

def new_figure(width, height):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def blank_axes(ax, xlim, ylim):
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")


def box(ax, x, y, w, h, text, color, fontsize=9, text_color="white", **kwargs):
    from matplotlib.patches import FancyBboxPatch
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                fc=color, ec="black", lw=0.8, **kwargs))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize,
            color=text_color)


def arrow(ax, start, end, color="black", style="-|>", lw=1.4, rad=0.0, shrink=2):
    from matplotlib.patches import FancyArrowPatch
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=14, color=color,
                                 lw=lw, connectionstyle=f"arc3,rad={rad}", shrinkA=shrink,
                                 shrinkB=shrink,
                                 clip_on=False))
