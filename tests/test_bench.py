"""The benchmark report: median speed-up, its range over the repeats, the JSON it writes, and one
page rendered from every result by its `benchmark` field."""

import json

from handson_lib.experiments import report, speedup, stats, tuning


def test_speedup_is_the_ratio_of_medians_and_the_range_brackets_it(tmp_path):
    lines = []
    result = speedup._finish("multi-node", {"1 rank(s)": [100.0, 90.0, 110.0], "2 rank(s)": [190.0, 180.0, 170.0]},
                           {"ranks": 2}, tmp_path, "b.json", "2 ranks vs 1", lines.append)
    assert result["speedup"] == 180.0 / 100.0
    assert result["speedup_range"] == [170.0 / 110.0, 190.0 / 90.0]
    assert lines[-1] == "speed-up 2 ranks vs 1: 1.80x (range 1.55-2.11)"
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
