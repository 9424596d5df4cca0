"""A tuning result shown: the table, the talk's bar chart, one line per lever's effect; the texts
in the reader's language (HANDSON_LANG)."""

import re

from handson_lib.experiments import stats
from handson_lib.messages import tr
from handson_lib.plotting import pyplot

#: The texts of a result (its source, the notes and statuses of its steps) as the reader reads them
#: (HANDSON_LANG): the result keeps the English (its JSON, the tests); `shown_text` translates
#: each piece when it is shown. (pattern of the whole text, its translation from the named groups)
SHOWN_TEXTS = (
    (r"measured here", lambda: tr("measured here")),
    (r"needs a GPU: not applied", lambda: tr("needs a GPU: not applied")),
    (r"measured; not carried into the later CPU steps \(NumPy float16 has no BLAS\)",
     lambda: tr("measured; not carried into the later CPU steps (NumPy float16 has no BLAS)")),
    (r"not run", lambda: tr("not run")),
    (r"static schedule in use", lambda: tr("static schedule in use")),
    (r"params (?P<dtype>\w+)", lambda dtype: tr("params {dtype}", dtype=dtype)),
    (r"TensorCore: needs a GPU: not applied \(NumPy computes float16 on the CPU\)",
     lambda: tr("TensorCore: needs a GPU: not applied (NumPy computes float16 on the CPU)")),
    (r"TensorCore: compute capability (?P<capability>\S+) < 7\.0: not applied",
     lambda capability: tr("TensorCore: compute capability {capability} < 7.0: not applied",
                           capability=capability)),
    # the talk's source and notes (TALK_SOURCE, TALK_STEPS)
    (r"seed 004: GTC Japan 2018 talk \"Optimizing Deep Learning with Chainer\" \(Preferred Networks\); ResNet-50, "
     r"ImageNet, one Tesla V100, batch 32",
     lambda: tr("seed 004: GTC Japan 2018 talk \"Optimizing Deep Learning with Chainer\" (Preferred Networks); "
                "ResNet-50, ImageNet, one Tesla V100, batch 32")),
    (r"slower: fp16 preprocessing in NumPy", lambda: tr("slower: fp16 preprocessing in NumPy")),
    (r"the fix: preprocess in float32", lambda: tr("the fix: preprocess in float32")),
    (r"FP32 reference: (?P<rate>\S+)", lambda rate: tr("FP32 reference: {rate}", rate=rate)),
    (r"(?P<times>\S+)x the baseline", lambda times: tr("{times}x the baseline", times=times)),
    (r"FP32 batch x4: (?P<rate>\S+) it/s", lambda rate: tr("FP32 batch x4: {rate} it/s", rate=rate)),
)


def shown_text(text):
    """`text` (a source, note or status of a result) in the reader's language; as it is when
    SHOWN_TEXTS does not know it (code such as an iterator's repr, a label)."""
    for pattern, translated in SHOWN_TEXTS:
        match = re.fullmatch(pattern, text or "")
        if match:
            return translated(**match.groupdict())
    return text


def effects(result):
    """One line per measured lever: its gain, and whether the runs of the two configurations overlap.

    A lever is called faster (slower) only when every run with it beat (lost to) every run without
    it; otherwise the difference is within the noise of this machine.
    """
    by_levers = {tuple(s["levers"]): s for s in result["steps"] if s["images_per_sec"]}
    lines = []
    for step in result["steps"]:
        if not step.get("lever"):
            continue
        if step["images_per_sec"] is None:
            lines.append(f"{step['label']}: {shown_text(step['status'])}")
            continue
        without = by_levers.get(tuple(n for n in step["levers"] if n != step["lever"]))
        if without is None:
            continue
        outcome = stats.verdict(step["images_per_sec"], without["images_per_sec"])
        fields = dict(label=step['label'], gain=step['gain'], other=without['label'])
        if outcome == "faster":
            lines.append(tr("{label}: x{gain:.2f} images/sec vs {other} (faster in every run)", **fields))
        elif outcome == "slower":
            lines.append(tr("{label}: x{gain:.2f} images/sec vs {other} (slower in every run)", **fields))
        else:
            lines.append(tr("{label}: x{gain:.2f} images/sec vs {other} (no clear difference: the runs "
                            "overlap)", **fields))
    return lines


def table(result):
    """The result as a text table: it/s (median, range), img/s, speed-ups, time waiting for data
    (its prose in the reader's language, HANDSON_LANG; the result's own texts stay English)."""
    source = shown_text(result.get('source', ''))
    if result.get("repeats", 1) > 1:
        lines = [tr("{source}: {device}, {model}; median of {repeats} runs, warm-up excluded",
                    source=source, device=result.get('device') or '', model=result.get('model') or '',
                    repeats=result['repeats'])]
    else:
        lines = [f"{source}: {result.get('device') or ''}, {result.get('model') or ''}"]
    header = (f"{'step':24s} {'batch':>5s} {'it/s':>8s} {'(range)':>15s} {'img/s':>8s} "
              f"{'x base':>7s} {'x lever':>7s} {'data':>5s}  note")
    lines += [header, "-" * len(header)]
    for step in result["steps"]:
        rate = step["iterations_per_sec"]
        if rate is None:
            lines.append(f"{step['label']:24s} {'':>5s} {'-':>8s} {'':>15s} {'-':>8s} {'-':>7s} "
                         f"{'-':>7s} {'':>5s}  {shown_text(step['status'])}")
            continue
        batch = (step.get("report") or {}).get("batchsize", "")
        spread = f"({rate['min']:.2f}-{rate['max']:.2f})" if len(rate["runs"]) > 1 else ""
        gain = f"{step['gain']:.2f}" if step.get("gain") else "-"
        over_base = f"{step['speedup']:.2f}" if step.get("speedup") else "-"
        data = f"{100 * step['data_fraction']:.0f}%" if step.get("data_fraction") is not None else ""
        note = step.get("note") or ""
        report = step.get("report") or {}
        extras = []
        if report.get("param_dtype") and report["param_dtype"] != "float32":
            extras.append(f"params {report['param_dtype']}")
        if report.get("iterator", "").startswith("Multiprocess"):
            extras.append(report["iterator"])
        if report.get("static_graph"):
            extras.append("static schedule in use")
        extras += report.get("notes", [])
        note = "; ".join(dict.fromkeys(shown_text(x) for x in [note, *extras] if x))
        lines.append(f"{step['label']:24s} {batch!s:>5s} {rate['median']:8.2f} {spread:>15s} "
                     f"{step['images_per_sec']['median']:8.1f} {over_base:>7s} {gain:>7s} "
                     f"{data:>5s}  {note}")
    lines.append(tr("x base: images/sec over the baseline's; x lever: over the same configuration without "
                    "this step's lever; data: share of the time spent waiting for the next batch"))
    return "\n".join(lines)


def bars_figure(result, title=None):
    """The talk's chart: iterations/sec per step (left), images/sec with the speed-up (right).

    Steps that need a GPU and were not run are grey outlines marked "needs GPU".
    """
    plt = pyplot()
    steps = result["steps"]
    labels = [s["label"] for s in steps]
    fig, axes = plt.subplots(1, 2, figsize=(max(10, 1.9 * len(steps)), 4.2))
    panels = (("iterations_per_sec", "iterations/sec."), ("images_per_sec", "images/sec."))
    for ax, (key, ylabel) in zip(axes, panels):
        measured = [s[key]["median"] for s in steps if s[key]]
        top = max(measured) if measured else 1.0
        for x, step in enumerate(steps):
            value = step[key]
            if value is None:
                ax.bar(x, top * 0.15, color="none", edgecolor="grey", hatch="//", linestyle="--")
                ax.text(x, top * 0.17, "needs GPU" if "GPU" in step["status"] else step["status"],
                        ha="center", va="bottom", fontsize=8, color="grey", rotation=90)
                continue
            color = "#C44E52" if step.get("lever") == "fp16" or step["label"] == "+ FP16" else "#4C72B0"
            ax.bar(x, value["median"], color=color,
                   yerr=[[value["median"] - value["min"]], [value["max"] - value["median"]]]
                   if len(value["runs"]) > 1 else None, capsize=3)
            text = (f"x{step['speedup']:.2f}" if key == "images_per_sec" and step.get("speedup")
                    else f"{value['median']:.2f}")
            ax.text(x, value["max"] * 1.01, text, ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(steps)))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, top * 1.25)
    axes[0].set_title("iterations/sec. (the talk's measure)", fontsize=10)
    axes[1].set_title("images/sec., speed-up over the baseline on top", fontsize=10)
    fig.suptitle(title or f"{result.get('source', '')}: {result.get('device') or ''}, "
                 f"{result.get('model') or ''}", fontsize=10)
    fig.tight_layout()
    return fig
