"""The benchmark report: median speed-up, its range over the repeats, and the JSON it writes."""

import json

from handson_lib.experiments import speedup


def test_speedup_is_the_ratio_of_medians_and_the_range_brackets_it(tmp_path):
    lines = []
    result = speedup._finish("multi-node", {"1 rank(s)": [100.0, 90.0, 110.0], "2 rank(s)": [190.0, 180.0, 170.0]},
                           {"ranks": 2}, tmp_path, "b.json", "2 ranks vs 1", lines.append)
    assert result["speedup"] == 180.0 / 100.0
    assert result["speedup_range"] == [170.0 / 110.0, 190.0 / 90.0]
    assert lines[-1] == "speed-up 2 ranks vs 1: 1.80x (range 1.55-2.11)"
    saved = json.loads((tmp_path / "b.json").read_text())
    assert saved["configs"]["2 rank(s)"]["median"] == 180.0 and saved["ranks"] == 2


def test_report_renders_every_result_to_one_page(tmp_path):
    speedup._finish("multi-node", {"1 rank(s)": [100.0, 90.0, 110.0], "2 rank(s)": [190.0, 180.0, 170.0]},
                  {"ranks": 2, "batchsize": 32}, tmp_path, "multi_node_b32.json", "2 vs 1", lambda *_: None)
    (tmp_path / "notes.json").write_text("{}")  # not a benchmark: ignored
    summary = speedup.report(tmp_path, print_fn=lambda *_: None)
    text = summary.read_text()
    assert "Task #2 2 ranks vs 1, batch 32" in text and "speed-up: 1.80x (range 1.55-2.11" in text
    assert (tmp_path / "multi_node_b32.png").read_bytes()[:4] == b"\x89PNG"
    assert "notes" not in text
