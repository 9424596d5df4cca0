"""The timeline of CPU ranks: spans recorded per phase, gathered over ranks, exported as a Chrome
trace (ui.perfetto.dev) and drawn; `handson profile breakdown --trace --timeline`."""

import contextlib
import io
import json
import time

import pytest

from handson_lib import cli
from handson_lib.experiments import breakdown
from handson_lib.profiling import cpu_timeline
from handson_lib.runtime import phases

from test_breakdown import make_updater

WARMUP, ITERATIONS = 1, 3


def by_iteration(spans):
    """[[iteration span, phase spans...], ...] from a flat, start-sorted span list."""
    grouped = []
    for span in spans:
        if span[0] == phases.ITERATION:
            grouped.append([span])
        else:
            grouped[-1].append(span)
    return grouped


# ----------------------------------------------------------------------------- the recorder

def test_spans_are_nested_ordered_and_match_the_durations():
    updater, _, _ = make_updater(multi_node=True)
    rec = phases.instrument(updater, nvtx=False)
    before = time.time()
    for _ in range(4):
        updater.update()
    after = time.time()
    spans = rec.timed_spans()
    iterations = by_iteration(spans)
    assert len(iterations) == len(rec.iterations) == 4
    for record, (iteration, *inside) in zip(rec.iterations, iterations):
        assert iteration[0] == "iteration"
        # The multi-node optimizer's first update broadcasts instead of averaging and updating.
        assert [name for name, _, _ in inside] == [k for k in phases.PHASES if k in record]
        for (_, start, stop), (_, next_start, _) in zip(inside, inside[1:]):
            assert start < stop <= next_start  # one after the other, never overlapping
        assert all(iteration[1] <= start and stop <= iteration[2] for _, start, stop in inside)
        assert iteration[2] - iteration[1] == pytest.approx(record["iteration"], abs=1e-6)
        for name, start, stop in inside:
            assert stop - start == pytest.approx(record[name], abs=1e-6)
    # Epoch seconds, the clock that the processes of a machine share: within the updates' own span
    # (to the microsecond that perf_counter's offset to it may be off).
    assert before - 1e-3 <= spans[0][1] and spans[-1][2] <= after + 1e-3
    assert rec.timed_spans(warmup=3) == [s for s in spans if s[1] >= iterations[3][0][1]]


def _fake_clock_recorder(span_iterations):
    ticks = iter(range(1000))
    return phases.PhaseRecorder(nvtx=False, sync=lambda: None, clock=lambda: next(ticks),
                                span_iterations=span_iterations)


def test_only_the_newest_iterations_keep_their_spans():
    rec = _fake_clock_recorder(span_iterations=3)
    for _ in range(5):
        rec.begin_iteration()
        rec.push("forward")
        rec.pop("forward")
        rec.end_iteration()
    assert len(rec.iterations) == 5  # the durations are kept as before
    assert [index for index, _ in rec.recent_spans] == [2, 3, 4]
    # A custom clock is taken as shared already: no offset, the readings as they came.
    assert list(rec.recent_spans[0][1]) == [("iteration", 8, 11), ("forward", 9, 10)]
    assert rec.timed_spans(warmup=4) == [["iteration", 16, 19], ["forward", 17, 18]]
    with pytest.raises(ValueError, match="warmup"):
        rec.timed_spans(warmup=-1)


def test_an_aborted_iteration_leaves_no_spans():
    rec = _fake_clock_recorder(span_iterations=3)
    rec.begin_iteration()
    rec.push("forward")
    rec.end_iteration(completed=False)
    assert rec.iterations == [] and list(rec.recent_spans) == []


def test_epoch_offset_puts_perf_counter_on_the_wall_clock(monkeypatch):
    """The offset is time.time() less the middle of the two perf_counter readings around it."""
    perf = iter([100.0, 100.5])
    monkeypatch.setattr(phases.time, "perf_counter", lambda: next(perf))
    monkeypatch.setattr(phases.time, "time", lambda: 1_700_000_000.25)
    assert phases.epoch_offset() == 1_700_000_000.25 - 100.25


def test_relative_timeline_shares_one_origin():
    ranks = [{"rank": 1, "host": "b", "spans": [["iteration", 100.5, 101.0]]},
             {"rank": 0, "host": "a", "spans": [["iteration", 100.25, 101.0], ["forward", 100.5, 100.75]]}]
    timeline, origin = phases.relative_timeline(ranks)
    assert origin == 100.25
    assert [lane["rank"] for lane in timeline] == [0, 1] and timeline[1]["host"] == "b"
    assert timeline[0]["spans"] == [["iteration", 0.0, 0.75], ["forward", 0.25, 0.5]]
    assert timeline[1]["spans"] == [["iteration", 0.25, 0.75]]
    with pytest.raises(ValueError, match="no spans"):
        phases.relative_timeline([{"rank": 0, "spans": []}])


# ----------------------------------------------------------------------------- export, planted timeline

def planted_result():
    """Two ranks, two iterations; rank 1's backward is short, so it waits 60 ms in the allreduce."""
    def lane(rank, backward):
        spans = []
        for start in (0.0, 0.2):
            end_of_allreduce = start + 0.1 + 0.08 + 0.002
            spans += [["iteration", start, end_of_allreduce + 0.005], ["forward", start + 0.001, start + 0.1],
                      ["backward", start + 0.1, start + 0.1 + backward],
                      ["allreduce", start + 0.1 + backward, end_of_allreduce],
                      ["update", end_of_allreduce, end_of_allreduce + 0.004]]
        return {"rank": rank, "host": f"node{rank}", "processor": f"node{rank}", "spans": spans}
    return {"np": 2, "model": "cnn", "batchsize": 32, "timeline_epoch_s": 1.7e9,
            "timeline": [lane(0, 0.08), lane(1, 0.02)]}


def test_chrome_trace_events():
    result = planted_result()
    trace = json.loads(json.dumps(cpu_timeline.chrome_trace(result)))  # JSON through and through
    assert trace["displayTimeUnit"] == "ms" and trace["otherData"]["model"] == "cnn"
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {1: "rank 0 on node0", 2: "rank 1 on node1"}  # pid 0 means something to Perfetto
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert lanes == {(p, t): n for p in (1, 2) for t, n in ((1, "iterations"), (2, "phases"))}
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == 2 * 2 * 5
    for lane in result["timeline"]:
        mine = [e for e in complete if e["pid"] == lane["rank"] + 1]
        assert [(e["name"], e["ts"], e["dur"]) for e in mine] == [
            (name, pytest.approx(start * 1e6, abs=1e-3), pytest.approx((stop - start) * 1e6, abs=1e-3))
            for name, start, stop in lane["spans"]]
        assert {e["tid"] for e in mine if e["name"] == "iteration"} == {1}
        assert {e["tid"] for e in mine if e["name"] != "iteration"} == {2}
        assert [e["args"]["iteration"] for e in mine] == [0] * 5 + [1] * 5
    # A bare timeline works too, without the description of the run.
    assert "otherData" not in cpu_timeline.chrome_trace(result["timeline"])


def test_trace_file_and_missing_timeline(tmp_path):
    path = cpu_timeline.write_chrome_trace(planted_result(), tmp_path / "sub" / "trace.json")
    assert json.loads(path.read_text()) == json.loads(json.dumps(cpu_timeline.chrome_trace(planted_result())))
    assert [p.name for p in path.parent.iterdir()] == ["trace.json"]  # nothing left aside
    with pytest.raises(ValueError, match="no timeline"):
        cpu_timeline.chrome_trace({"np": 2, "ranks": []})


def test_figure_one_row_per_rank_and_the_wait_in_numbers():
    import matplotlib
    matplotlib.use("Agg")
    result = planted_result()
    fig = cpu_timeline.timeline_figure(result)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["rank 0\nnode0", "rank 1\nnode1"]
    # Per iteration and rank: the grey iteration, its outline, and the four phases.
    assert len(ax.collections) == 2 * 2 * (2 + 4)
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("62 ms") == 2 and "2 ms" not in texts  # rank 1 waits; rank 0 barely
    assert "cnn, batch 32 per rank, 2 timed iterations" in ax.get_title()
    one = cpu_timeline.timeline_figure(result, iterations=[1]).axes[0]
    assert len(one.collections) == 2 * (2 + 4) and "iterations 1 of 2" in one.get_title()
    left_edges = [path.vertices[:, 0].min() for c in one.collections for path in c.get_paths()]
    assert min(left_edges) == pytest.approx(0.0)  # ms from the start of the first iteration shown
    with pytest.raises(ValueError, match="iterations \\[5\\]"):
        cpu_timeline.timeline_figure(result, iterations=[5])


def test_load_sweep_gives_a_timeline_where_the_files_have_spans(tmp_path):
    planted = planted_result()["timeline"]
    for p, with_spans in ((1, False), (2, True)):
        (tmp_path / f"p{p}").mkdir()
        for lane in planted[:p]:
            saved = {"rank": lane["rank"], "timed_iterations": 2, "warmup": 1, "total_s": 0.4,
                     "iteration_s": 0.2, "phases_s": {"forward": 0.1}, "host": lane["host"]}
            if with_spans:  # on the shared clock, as the training scripts write them
                saved["spans"] = [[n, 1.7e9 + a, 1.7e9 + b] for n, a, b in lane["spans"]]
            (tmp_path / f"p{p}" / f"phases_rank{lane['rank']}.json").write_text(json.dumps(saved))
    swept = breakdown.load_sweep(tmp_path)
    assert "timeline" not in swept[1] and swept[1]["iteration_s"] == 0.2  # older files: as before
    assert swept[2]["timeline_epoch_s"] == 1.7e9
    for lane, loaded in zip(planted, swept[2]["timeline"]):
        assert loaded["host"] == lane["host"]
        assert [s[1] for s in loaded["spans"]] == pytest.approx([s[1] for s in lane["spans"]], abs=1e-6)


def test_no_file_asked_none_written(tmp_path):
    assert cpu_timeline.write_outputs({2: planted_result()}) == []


# ----------------------------------------------------------------------------- a real 2-rank run

@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """`handson profile breakdown --np 2 --trace --timeline` (breakdown.measure on 2 CPU ranks)."""
    out = tmp_path_factory.mktemp("timeline")
    argv = ["profile", "breakdown", "--np", "2", "--batchsize", "8", "--iterations", str(ITERATIONS),
            "--warmup", str(WARMUP), "--json", str(out / "r.json"), "--trace", str(out / "trace.json"),
            "--timeline", str(out / "timeline.png"), "--timeout", "240"]
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        rc = cli.main(argv)
    assert rc == 0, text.getvalue()
    return breakdown.from_json(json.loads((out / "r.json").read_text()))[2], text.getvalue(), out


@pytest.mark.slow
def test_every_rank_has_every_phase_of_every_timed_iteration(measured):
    result, _, _ = measured
    timeline = result["timeline"]
    assert [lane["rank"] for lane in timeline] == [0, 1]
    assert all(lane["host"] and lane["processor"] for lane in timeline)
    assert min(span[1] for lane in timeline for span in lane["spans"]) == 0.0  # the common origin
    for lane, rank in zip(timeline, result["ranks"]):
        assert "spans" not in rank  # moved into the timeline, not kept twice
        iterations = by_iteration(lane["spans"])
        assert len(iterations) == ITERATIONS
        for (iteration, *inside), record in zip(iterations, rank["per_iteration"][WARMUP:]):
            assert [name for name, _, _ in inside] == list(phases.PHASES)
            assert all(iteration[1] <= start < stop <= iteration[2] for _, start, stop in inside)
            for name, start, stop in [iteration, *inside]:
                assert stop - start == pytest.approx(record[name], abs=1e-6)


@pytest.mark.slow
def test_no_rank_leaves_an_allreduce_before_every_rank_entered_it(measured):
    """The allreduce is collective: a check that the ranks' clocks agree (to 1 ms)."""
    result, _, _ = measured
    allreduces = [[s for s in lane["spans"] if s[0] == "allreduce"] for lane in result["timeline"]]
    for k in range(ITERATIONS):
        last_entry = max(spans[k][1] for spans in allreduces)
        assert all(spans[k][2] >= last_entry - 1e-3 for spans in allreduces), k


@pytest.mark.slow
def test_cli_writes_the_trace_and_the_figure(measured):
    result, text, out = measured
    assert "ui.perfetto.dev" in text and str(out / "timeline.png") in text
    trace = json.loads((out / "trace.json").read_text())
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in complete} == {1, 2}
    assert len(complete) == 2 * ITERATIONS * (1 + len(phases.PHASES))
    for lane in result["timeline"]:
        durations = [e["dur"] for e in complete if e["pid"] == lane["rank"] + 1]
        assert durations == pytest.approx([(stop - start) * 1e6 for _, start, stop in lane["spans"]], abs=1e-3)
    png = (out / "timeline.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000
