"""The timeline of a ChainerMN training on CPU ranks: forward, backward, allreduce, update per rank.

No GPU, no Nsight Systems: `handson profile breakdown` (`experiments.breakdown.measure`) records
when every phase of the timed iterations started and stopped on each rank, on the clock that the
processes share, and returns them as `result["timeline"]`: one entry per rank,

    {"rank": 0, "host": "node1", "processor": "node1", "spans": [[name, start_s, stop_s], ...]}

with seconds from the earliest timed start of all ranks. Each iteration's own span ("iteration")
comes before, and contains, its phase spans. A scaling sweep run with HANDSON_PHASES=1 gives the
same entries (`breakdown.load_sweep`).

- `chrome_trace(result)`: the Chrome trace event format (JSON) that ui.perfetto.dev and
  chrome://tracing open: one process per rank (pid = rank + 1: Perfetto gives pid 0 a special
  meaning), one lane for the iterations and one for the phases;
- `timeline_figure(result)`: one Matplotlib row per rank, the phases in the colours of the
  breakdown's bar chart. The allreduce is collective: the rank that finishes its backward first
  waits inside it for the others, so its allreduce bar is the long one.

Matplotlib is imported inside the functions that draw: the ``handson`` command line imports this
package.
"""

import json
import os
from pathlib import Path

from handson_lib.runtime.phases import ITERATION, OTHER, PHASE_COLORS, PHASES
from handson_lib.plotting import pyplot

#: Lanes (Chrome trace thread ids) of each rank's process.
ITERATION_LANE, PHASE_LANE = 1, 2
_LANE_NAMES = {ITERATION_LANE: "iterations", PHASE_LANE: "phases"}
_BAR_HEIGHT = 0.7


# ------------------------------------------------------------------------------ the data

def _result_of(source):
    """The one result dict in `source` (a results_by_np dict gives its largest rank count), or None
    for a bare timeline."""
    if isinstance(source, dict) and source and all(isinstance(k, int) for k in source):
        source = source[max(source)]
    return source if isinstance(source, dict) else None


def timeline_of(source):
    """The timeline (a list of rank entries) of a `measure` / `load_sweep` result, of a
    results_by_np dict (its largest rank count), or a timeline itself."""
    result = _result_of(source)
    if result is not None:
        if "timeline" not in result:
            raise ValueError("this result has no timeline: it was measured before spans were recorded, "
                             "or by a training script without HANDSON_PHASES=1")
        source = result["timeline"]
    if not source or not all("spans" in lane for lane in source):
        raise ValueError("expected a timeline: one entry with 'rank' and 'spans' per rank")
    return source


def iterations_of(lane):
    """[(iteration span, [its phase spans])] of one rank, in the order they ran.

    A phase belongs to the last iteration that started at or before it: the iteration contains it."""
    spans = sorted(lane["spans"], key=lambda span: (span[1], span[0] != ITERATION, -span[2]))
    iterations = []
    for span in spans:
        if span[0] == ITERATION:
            iterations.append((span, []))
        elif iterations:
            iterations[-1][1].append(span)
    return iterations


def _rank(lane):
    return lane.get("rank") or 0


def _selected(iterations, count):
    """Indices of the timed iterations to draw: None = all, an int n = the first n, or indices."""
    if iterations is None:
        return list(range(count))
    if isinstance(iterations, int):
        return list(range(min(iterations, count)))
    chosen = sorted(set(iterations))
    outside = [i for i in chosen if not 0 <= i < count]
    if outside:
        raise ValueError(f"iterations {outside}: the timeline holds iterations 0 to {count - 1}")
    return chosen


# ------------------------------------------------------------------------------ Chrome trace

def _metadata(pid, lane):
    host = lane.get("host") or lane.get("processor") or "unknown host"
    events = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
               "args": {"name": f"rank {_rank(lane)} on {host}"}},
              {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
               "args": {"sort_index": _rank(lane)}}]
    for tid, name in _LANE_NAMES.items():
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                       "args": {"sort_index": tid}})
    return events


def _complete_event(span, pid, tid, index):
    name, start, stop = span
    return {"name": name, "cat": "iteration" if tid == ITERATION_LANE else "phase", "ph": "X",
            "ts": round(start * 1e6, 3), "dur": round((stop - start) * 1e6, 3), "pid": pid, "tid": tid,
            "args": {"iteration": index, "ms": round((stop - start) * 1e3, 3)}}


def chrome_trace(source):
    """The Chrome trace event format of a timeline: {"traceEvents": [...], "displayTimeUnit": "ms"}.

    Complete events ("ph": "X") with "ts" and "dur" in microseconds from the timeline's origin;
    "pid" is the rank + 1, named "rank R on HOST" by a process_name metadata event ("ph": "M");
    "tid" 1 holds the iterations, "tid" 2 the phases. "args" gives the iteration (0 = the first
    timed one) and the milliseconds."""
    lanes = timeline_of(source)
    events = []
    for lane in lanes:
        pid = _rank(lane) + 1
        events += _metadata(pid, lane)
        for index, (iteration, phases) in enumerate(iterations_of(lane)):
            events.append(_complete_event(iteration, pid, ITERATION_LANE, index))
            events += [_complete_event(span, pid, PHASE_LANE, index) for span in phases]
    trace = {"traceEvents": events, "displayTimeUnit": "ms"}
    result = _result_of(source)
    if result is not None:
        described = {k: result.get(k) for k in ("np", "model", "batchsize", "device", "timeline_epoch_s")}
        trace["otherData"] = {k: str(v) for k, v in described.items() if v is not None}
    return trace


def write_chrome_trace(source, path):
    """Write `chrome_trace(source)` to `path` (JSON); returns the path.

    The file appears whole or not at all (written aside, then renamed): several notebooks may
    write the same file at once under the autograder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # One name per process (not mkstemp: its file is private to the owner, a trace is not).
    aside = path.with_name(f".{path.name}.{os.getpid()}.part")
    aside.write_text(json.dumps(chrome_trace(source)))
    os.replace(aside, path)
    return path


# ------------------------------------------------------------------------------ figure

def _title(source, shown, count):
    result = _result_of(source) or {}
    what = f"{result['model']}, batch {result['batchsize']} per rank, " if result.get("model") else ""
    ranks = len(timeline_of(source))
    part = (f"iterations {', '.join(map(str, shown))} of {count} timed" if len(shown) < count
            else f"{count} timed iterations")
    return f"{ranks} CPU rank(s), {what}{part}"


def timeline_figure(source, iterations=None, title=None, width=12):
    """One row per rank, the phases as coloured bars over grey iteration bars (the grey that
    shows is `other`: data loading, conversion, cleargrads).

    source: a `measure` / `load_sweep` result, results_by_np (its largest rank count) or a
    timeline. iterations: None (all timed iterations), n (the first n) or their indices.
    The x axis is milliseconds from the start of the first iteration shown."""
    plt = pyplot()
    from matplotlib.patches import Patch


    lanes = sorted(timeline_of(source), key=_rank)
    per_rank = [iterations_of(lane) for lane in lanes]
    count = min(len(its) for its in per_rank)
    if count == 0:
        raise ValueError("the timeline holds no complete iteration")
    shown = _selected(iterations, count)
    origin = min(its[i][0][1] for its in per_rank for i in shown)
    fig, ax = plt.subplots(figsize=(width, 1.4 + 0.8 * len(lanes)))
    extent = max(its[i][0][2] for its in per_rank for i in shown) - origin
    for row, its in enumerate(per_rank):
        box = (row - _BAR_HEIGHT / 2, _BAR_HEIGHT)
        for i in shown:
            iteration, phases = its[i]
            whole = [((iteration[1] - origin) * 1e3, (iteration[2] - iteration[1]) * 1e3)]
            ax.broken_barh(whole, box, facecolors=PHASE_COLORS[OTHER], zorder=1)
            # The outline on top of the phases: where one iteration ends and the next begins.
            ax.broken_barh(whole, box, facecolors="none", edgecolor="black", linewidth=0.7, zorder=3)
            for name, start, stop in phases:
                ax.broken_barh([((start - origin) * 1e3, (stop - start) * 1e3)], box,
                               facecolors=PHASE_COLORS.get(name, "#DD8452"), zorder=2)
                # The allreduce's length is where a rank waits: say it in numbers where there is room.
                if name == "allreduce" and stop - start > 0.035 * extent:
                    ax.text((start + stop - 2 * origin) / 2 * 1e3, row, f"{(stop - start) * 1e3:.0f} ms",
                            ha="center", va="center", fontsize=7, color="white", clip_on=True, zorder=4)
            # Labels must fit their iteration: "iteration 3" where there is room, else "3".
            if row == 0 and iteration[2] - iteration[1] > 0.025 * extent:
                label = f"iteration {i}" if iteration[2] - iteration[1] > 0.07 * extent else str(i)
                ax.text((iteration[1] + iteration[2] - 2 * origin) / 2 * 1e3, -0.5, label,
                        ha="center", va="bottom", fontsize=7, color="#444444")
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([f"rank {_rank(lane)}\n{lane.get('host') or ''}".strip() for lane in lanes])
    ax.set_ylim(len(lanes) - 0.5, -0.75)
    ax.set_xlabel("time [ms] from the start of the first iteration shown (one clock for all ranks)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title or _title(source, shown, count))
    handles = [Patch(color=PHASE_COLORS[name], label=name) for name in PHASES]
    handles.append(Patch(facecolor=PHASE_COLORS[OTHER], edgecolor="black", label="other (iteration)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------ command line

def write_outputs(results_by_np, trace=None, png=None, print_fn=print):
    """`handson profile breakdown --trace FILE.json --timeline PNG`: the trace and the figure of
    the largest rank count measured. Returns the paths written."""
    if not (trace or png):
        return []
    p = max(results_by_np)
    written = []
    if trace:
        written.append(write_chrome_trace(results_by_np[p], trace))
        print_fn(f"timeline of {p} rank(s) as a Chrome trace (open it in ui.perfetto.dev or "
                 f"chrome://tracing): {trace}")
    if png:
        plt = pyplot("Agg")
        Path(png).parent.mkdir(parents=True, exist_ok=True)
        fig = timeline_figure(results_by_np[p])
        fig.savefig(png, dpi=120, bbox_inches="tight")
        plt.close(fig)
        written.append(Path(png))
        print_fn(f"timeline of {p} rank(s): {png}")
    return written
