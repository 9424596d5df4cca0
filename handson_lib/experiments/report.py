"""`handson bench report`: one page with every benchmark result of a folder.

Every result JSON names its experiment in its `benchmark` field; `RENDERERS` says, per benchmark,
how its result renders: a title, a text table and a figure, each a function of the result that
the experiment's own module provides. A JSON without a `benchmark` field is not a result and is
left out; one with a benchmark this version does not know is reported and skipped.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from handson_lib.experiments import allreduce, breakdown, large_batch, speedup, tuning
from handson_lib.plotting import pyplot


@dataclass(frozen=True)
class Renderer:
    title: object    # function(result) -> str
    table: object    # function(result) -> str
    figure: object   # function(result) -> matplotlib Figure


def _fixed_title(text):
    return lambda result: text


RENDERERS = {
    "multi-gpu": Renderer(speedup.report_title, speedup.speedup_text, speedup.speedup_figure),
    "multi-node": Renderer(speedup.report_title, speedup.speedup_text, speedup.speedup_figure),
    "allreduce": Renderer(allreduce.report_title, allreduce.format_table, allreduce.bandwidth_figure),
    "tuning": Renderer(_fixed_title("speed-up levers (seed 004)"), tuning.table, tuning.bars_figure),
    "tuning-iterator": Renderer(_fixed_title("your iterator vs SerialIterator (notebook 05)"),
                                tuning.table, tuning.bars_figure),
    "large-batch": Renderer(_fixed_title("accuracy vs total batch (seed 003)"), large_batch.format_table,
                            large_batch.accuracy_figure),
    "breakdown": Renderer(breakdown.report_title, breakdown.report_table, breakdown.report_figure),
}


def render(result):
    """(title, text table, figure) of one result, or None when it is no benchmark result.
    ValueError for a benchmark this version does not know."""
    if not isinstance(result, dict) or "benchmark" not in result:
        return None
    renderer = RENDERERS.get(result["benchmark"])
    if renderer is None:
        raise ValueError(f"unknown benchmark {result['benchmark']!r}; this version renders "
                         f"{', '.join(RENDERERS)}")
    return renderer.title(result), renderer.table(result), renderer.figure(result)


def report(out="results/bench", print_fn=print):
    """One page for every benchmark in `out`: summary.md with each table and a PNG each."""
    plt = pyplot("Agg")
    folder = Path(out)
    sections = []
    for path in sorted(folder.glob("*.json")):
        try:
            rendered = render(json.loads(path.read_text()))
        except (KeyError, TypeError, ValueError) as error:
            print_fn(f"skipped {path.name}: not a benchmark result this version reads ({error!r})")
            continue
        if rendered is None:
            continue
        title, text, fig = rendered
        png = path.with_suffix(".png")
        fig.savefig(png, dpi=100, bbox_inches="tight")
        plt.close(fig)
        sections.append(f"## {title}\n\n`{path.name}`\n\n```\n{text}\n```\n\n![{title}]({png.name})\n")
        print_fn(f"{path.name}: {title} -> {png.name}")
    if not sections:
        raise SystemExit(f"no benchmark results in {folder}: run `make bench` (or handson bench ...) first")
    summary = folder / "summary.md"
    summary.write_text("# Benchmarks of the course\n\nEach figure is a ratio to a reference measured in the "
                       "same run (warm-up excluded, median and range of the repeats). Made by "
                       "`handson bench report`.\n\n" + "\n".join(sections))
    print_fn(f"summary: {summary}")
    return summary


def add_report_arguments(parser):
    parser.add_argument("--out", default="results/bench", help="folder of the JSON results")


def report_main(args):
    report(args.out)
