"""The benchmark report: median speed-up, its range over the repeats, the JSON it writes, and one
page rendered from every result by its `benchmark` field."""

import json

import pytest

from handson_lib import launch
from handson_lib.experiments import report, speedup, stats, tuning


def test_speedup_is_the_ratio_of_medians_and_the_range_brackets_it(tmp_path):
    lines = []
    result = speedup._finish("multi-node", {"1 rank(s)": [100.0, 90.0, 110.0], "2 rank(s)": [190.0, 180.0, 170.0]},
                           {"ranks": 2}, tmp_path, "b.json", "2 ranks vs 1", lines.append)
    assert result["speedup"] == 180.0 / 100.0
    assert result["speedup_range"] == [170.0 / 110.0, 190.0 / 90.0]
    assert "speed-up 2 ranks vs 1: 1.80x (range 1.55-2.11)" in lines
    # The limit: 2 ranks on a machine of at least 2 cores; every repeat's own ratio.
    assert result["limit"] == min(2, launch.cpu_count())
    assert result["paired_speedups"] == [1.9, 2.0, 170.0 / 110.0]
    assert any(l.startswith(f"limit: {result['limit']:.2f}x") and "1.90, 2.00, 1.55" in l for l in lines)
    saved = json.loads((tmp_path / "b.json").read_text())
    assert saved["configs"]["2 rank(s)"]["median"] == 180.0 and saved["ranks"] == 2
    assert saved["benchmark"] == "multi-node"


def test_stats_call_a_difference_only_when_every_run_agrees():
    fast, slow, overlapping = (stats.spread_summary(v) for v in ([5, 6, 7], [1, 2, 3], [2, 4, 6]))
    assert stats.verdict(fast, slow) == "faster" and stats.verdict(slow, fast) == "slower"
    assert stats.verdict(overlapping, slow) is None
    assert stats.ratio_of_medians(fast, slow) == 3.0 and stats.ratio_range(fast, slow) == [5 / 3, 7.0]
    assert stats.ratio_or_none(1.0, 0.0) is None and stats.ratio_or_none(None, 2.0) is None


def test_report_renders_every_result_by_its_benchmark_field(tmp_path):
    speedup._finish("multi-node", {"1 rank(s)": [100.0, 90.0, 110.0], "2 rank(s)": [190.0, 180.0, 170.0]},
                    {"ranks": 2, "batchsize": 32}, tmp_path, "renamed.json", "2 vs 1", lambda *_: None)
    (tmp_path / "talk.json").write_text(json.dumps(tuning.talk_result()))
    (tmp_path / "notes.json").write_text("{}")  # not a benchmark: ignored
    (tmp_path / "future.json").write_text(json.dumps({"benchmark": "quantum"}))
    printed = []
    summary = report.report(tmp_path, print_fn=printed.append)
    text = summary.read_text()
    assert "Task #2 2 ranks vs 1, batch 32" in text and "speed-up: 1.80x (range 1.55-2.11" in text
    assert "speed-up levers (seed 004)" in text and "static_graph" in text
    assert (tmp_path / "renamed.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "talk.png").read_bytes()[:4] == b"\x89PNG"
    assert "notes" not in text and "quantum" not in text
    assert any("skipped future.json" in line and "quantum" in line for line in printed)


def test_a_slower_rank_s_allreduce_is_split_into_the_exchange_and_the_wait():
    def rank(r, allreduces):
        its = [{"forward": 0.1, "backward": 0.2, "allreduce": a, "update": 0.01, "iteration": 0.4}
               for a in allreduces]
        return {"rank": r, "throughput": {"between_steps_s": 0.05},
                "phases": {"iterations": its, "summary": {"phases_s": {
                    "forward": 0.1, "backward": 0.2, "allreduce": 0.0, "update": 0.01, "other": 0.02}}}}
    # Rank 1 arrives first every time and waits for rank 0; the exchange itself takes 0.01 s.
    columns = speedup._rank_columns([rank(0, [0.01, 0.01, 0.01]), rank(1, [0.05, 0.06, 0.07])])
    assert columns["rank 0"]["wait"] == 0.0 and columns["rank 1"]["wait"] == pytest.approx(0.05)
    assert columns["rank 0"]["exchange"] == columns["rank 1"]["exchange"] == 0.01
    assert columns["rank 0"]["compute"] == pytest.approx(0.3) and columns["rank 0"]["between"] == 0.05
    assert "between" not in columns["rank 1"]  # rank 0's figure is the one reported
    text = speedup.breakdown_text({"2 rank(s)": speedup._median_columns([columns])})
    wait_row = next(l for l in text.splitlines() if l.startswith("waiting for the other"))
    assert wait_row.split()[-2:] == ["0.0", "50.0"]
    step_row = next(l for l in text.splitlines() if l.startswith("step (what T counts)"))
    assert step_row.split()[-2:] == ["340.0", "390.0"]  # 300 compute, 10 exchange, 10 update, 20 other (+ 50)


@pytest.mark.slow
@pytest.mark.parametrize("bench", ["multi-gpu", "multi-node"])
def test_the_benchmark_prints_where_a_step_goes(bench, tmp_path):
    """A short real run of `handson bench multi-gpu|multi-node`: rates, limit, the breakdown."""
    printed = []
    run = speedup.bench_multi_gpu if bench == "multi-gpu" else speedup.bench_multi_node
    result = run(repeats=1, epoch=1, train_size=512, batchsize=32, out=tmp_path, print_fn=printed.append)
    text = "\n".join(printed)
    assert "limit: 2.00x" in text and "ms per step" in text, text
    columns = {who for config in result["breakdown"].values() for who in config}
    if bench == "multi-gpu":
        assert columns == {"1 process", "main", "device1"} or columns == {"1 process", "main", "gpu1"}, columns
        main = result["breakdown"]["MultiprocessParallelUpdater (2 workers)"]["main"]
        assert set(main) == {"data", "compute", "wait", "exchange", "update", "copy", "between"}
    else:
        assert columns == {"rank 0", "rank 1"}, columns
        rank1 = result["breakdown"]["2 rank(s)"]["rank 1"]
        assert {"compute", "exchange", "wait", "update"} <= set(rank1)
    for config in result["breakdown"].values():
        for column in config.values():
            assert column["compute"] > 0
    saved = json.loads(next(tmp_path.glob("multi_*_b32.json")).read_text())
    assert saved["breakdown"] == json.loads(json.dumps(result["breakdown"]))
