"""`handson bench allreduce`: nccl-tests' bandwidth formulas, seed 001's message size L, the
correctness checks beside every timing, and real 2-rank runs (small buffers)."""

import json

import numpy as np
import pytest

from handson_lib.experiments import allreduce as ab
from handson_lib.autograder import answers

SEED_RESNET50_BYTES = 102_228_384   # seed 001: "RetNet50での結果は102228384[byte]"


# ----------------------------------------------------------------------------- formulas

def test_algbw_is_bytes_per_second_in_units_of_1e9():
    assert ab.algbw(2_000_000_000, 1.0) == 2.0
    assert ab.algbw(1_000_000, 0.001) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        ab.algbw(1024, 0.0)


def test_traffic_is_seed_001s_2L_p_minus_1_over_p_and_busbw_is_that_traffic_over_time():
    L = SEED_RESNET50_BYTES
    assert answers.allreduce_traffic_bytes(L, 1) == 0    # one rank: nothing crosses between ranks
    assert answers.allreduce_traffic_bytes(L, 2) == L
    assert answers.allreduce_traffic_bytes(L, 4) == 1.5 * L
    assert answers.allreduce_traffic_bytes(4.0, 8) == 7.0
    with pytest.raises(ValueError):
        answers.allreduce_traffic_bytes(L, 0)
    # The seed's 4-node figure: 102228384*2*3/4 / 0.22 [byte/s] = 5.1 [Gibps] (5.19 unrounded).
    seed = {"ranks": 4, "units": {}, "results": [
        {"path": "chainermn", "bytes": L, "time_s": 0.22, "algbw_GBps": ab.algbw(L, 0.22)}]}
    record = ab.add_bus_bandwidth(seed, answers.allreduce_traffic_bytes)["results"][0]
    assert record["busbw_GBps"] == pytest.approx(1.5 * L / 0.22 / 1e9)
    assert record["busbw_Gibps"] == pytest.approx(5.19, abs=0.01)
    assert seed["traffic_rule"] == "allreduce_traffic_bytes"
    assert ab.gbps_to_gibitps(1.0) == pytest.approx(8e9 / 2 ** 30)


def test_the_benchmark_has_no_traffic_rule_of_its_own():
    """Notebook 04 asks for 2L(p-1)/p: the student-side module must not compute it."""
    assert not hasattr(ab, "allreduce_traffic_bytes") and not hasattr(ab, "busbw")
    assert not hasattr(ab, "gradient_bytes")
    result = _fake_result(with_busbw=False)
    header = next(line for line in ab.format_table(result).splitlines() if line.startswith("path"))
    assert "algbw" in header and "busbw" not in header
    labels = [line.get_label() for line in ab.bandwidth_figure(result).axes[0].get_lines()]
    assert any("(algbw)" in label for label in labels)


def test_sizes_are_read_in_binary_units_and_must_be_whole_float32_buffers():
    assert ab.parse_size("1M") == ab.parse_size("1MiB") == ab.parse_size("1048576") == 2 ** 20
    assert ab.parse_size("64k") == 65536
    assert ab.parse_sizes("1K:64M") == [1024 * 4 ** i for i in range(9)]
    assert ab.parse_sizes("1K:4K:2") == [1024, 2048, 4096]
    assert ab.parse_sizes("4K,1M") == [4096, 2 ** 20]
    for bad in ("3", "0", "1.5", "ten", "5X"):
        with pytest.raises(ValueError):
            ab.parse_size(bad)
    with pytest.raises(ValueError):
        ab.parse_sizes("64M:1K")


# ----------------------------------------------------------------------------- message size L

def test_resnet50_gradients_are_seed_001s_L():
    assert answers.gradient_bytes("resnet50") == SEED_RESNET50_BYTES


def test_course_cnn_gradients_are_the_sum_of_its_parameter_sizes():
    # SmallCNN(width=32) on 3x32x32 inputs: two 3x3 convolutions, two poolings, two linears.
    conv1 = 3 * 32 * 3 * 3 + 32
    conv2 = 32 * 64 * 3 * 3 + 64
    fc1 = (64 * 8 * 8) * 128 + 128
    fc2 = 128 * 10 + 10
    assert answers.gradient_bytes("cnn") == 4 * (conv1 + conv2 + fc1 + fc2)


def test_unknown_model_or_two_sizes_is_a_clear_error_before_any_launch():
    with pytest.raises(ValueError, match="resnet50"):
        ab.build_gradient_link("vgg")
    with pytest.raises(ValueError, match="unknown model"):
        ab.measure(model="vgg")
    with pytest.raises(ValueError, match="only one"):
        ab.measure(model="cnn", nbytes=1024)


# ----------------------------------------------------------------------------- checks

def test_check_buffer_accepts_the_expected_values_and_rejects_a_wrong_one():
    base = ab.buffers.pattern(1000)
    p = 3
    total = sum(ab.buffers.contribution(base, r, None) for r in range(p))
    assert ab.check_buffer(total, ab.expected_sum(base, p)) == (True, 0.0)
    assert ab.check_buffer(total / p, ab.expected_mean(base, p))[0]

    spoiled = sum(ab.buffers.contribution(base, r, corrupt_rank=1) for r in range(p))
    ok, error = ab.check_buffer(spoiled, ab.expected_sum(base, p))
    assert not ok and error == 1000

    shifted = np.roll(total, 1)          # right values in the wrong places
    assert not ab.check_buffer(shifted, ab.expected_sum(base, p))[0]
    unwritten = np.full_like(total, np.nan)
    assert not ab.check_buffer(unwritten, ab.expected_sum(base, p))[0]
    assert not ab.check_buffer(total[:-1], ab.expected_sum(base, p))[0]


# ----------------------------------------------------------------------------- report

def _fake_result(with_busbw=True):
    def rec(path, nbytes, seconds, correct=True):
        return {"path": path, "bytes": nbytes, "calls": 1, "iterations": 3, "time_s": seconds,
                "min_s": seconds, "max_s": seconds, "algbw_GBps": ab.algbw(nbytes, seconds),
                "algbw_Gibps": 0.0, "correct": correct, "failed_checks": 0 if correct else 2,
                "checks": 8, "max_error": 0.0 if correct else 1000.0}
    result = {"benchmark": "allreduce", "ranks": 2, "hosts": ["a"], "iterations": 3, "warmup": 1,
              "model": None, "bytes": 2 ** 20, "units": {},
              "results": [rec("chainermn", 2 ** 20, 0.004), rec("mpi4py", 2 ** 20, 0.002),
                          rec("p2p", 2 ** 20, 0.001), rec("chainermn", 4096, 0.001, correct=False),
                          rec("mpi4py", 4096, 0.001), rec("p2p", 4096, 0.001)]}
    return ab.add_bus_bandwidth(result, answers.allreduce_traffic_bytes) if with_busbw else result


def test_ratios_are_busbw_over_busbw_per_size():
    rows = {row["bytes"]: row for row in ab.ratios(_fake_result())}
    assert rows[2 ** 20]["chainermn_over_mpi4py"] == pytest.approx(0.5)
    assert rows[2 ** 20]["chainermn_over_p2p"] == pytest.approx(0.25)
    assert rows[2 ** 20]["mpi4py_over_p2p"] == pytest.approx(0.5)


def test_table_flags_a_wrong_result():
    text = ab.format_table(_fake_result())
    assert "ERROR: chainermn at 4096 bytes gave a wrong result in 2 of 8 checks" in text
    assert "ChainerMN busbw / raw MPI busbw = 0.50" in text


def test_bandwidth_figure_draws_each_path_and_marks_wrong_points():
    import matplotlib
    matplotlib.use("Agg")
    fig = ab.bandwidth_figure(_fake_result())
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert any("ChainerMN" in label for label in labels)
    assert any("mpi4py" in label for label in labels)
    assert any("point-to-point" in label for label in labels)
    assert "chainermn: WRONG result" in labels
    single = _fake_result()
    single["results"] = single["results"][:3]
    ax = ab.bandwidth_figure(single).axes[0]
    assert ax.get_ylim()[0] == 0
    p2p_line = next(line for line in ax.get_lines() if "point-to-point" in line.get_label())
    assert list(p2p_line.get_ydata()) == [single["results"][2]["busbw_GBps"]] * 2   # a line across


# ----------------------------------------------------------------------------- real runs

@pytest.mark.slow
def test_two_rank_cli_run_reports_busbw_p2p_and_writes_json(run_handson, tmp_path):
    done = run_handson("bench", "allreduce", "--np", 2, "--bytes", "1M", "--iterations", 3,
                       "--warmup", 1, "--in-place", "--out", tmp_path, "--timeout", 120, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    paths = (*ab.PATHS, ab.IN_PLACE_PATH)
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()
            if line.split() and line.split()[0] in paths}
    assert set(rows) == set(paths)
    assert all(row[1] == "1048576" and row[-1] == "yes" for row in rows.values())
    assert "ChainerMN busbw / raw MPI busbw =" in done.stdout
    result = json.loads((tmp_path / "allreduce_1MB_np2.json").read_text())
    assert result["ranks"] == 2 and result["correct"]
    for record in result["results"]:
        assert record["correct"] and record["checks"] > 0 and len(record["times_s"]) == 3
        assert record["busbw_GBps"] > 0
        assert record["time_s"] == sorted(record["times_s"])[1]          # the median
    assert result["ratios"][0]["chainermn_over_mpi4py"] > 0
    assert result["ratios"][0]["chainermn_over_mpi4py_inplace"] > 0


@pytest.mark.slow
def test_a_corrupted_contribution_is_reported_wrong_and_fails_the_run(run_handson, tmp_path):
    done = run_handson("bench", "allreduce", "--np", 2, "--model", "cnn", "--iterations", 1,
                       "--warmup", 0, "--out", tmp_path, "--timeout", 120, timeout=180,
                       env={ab.CORRUPT_ENV: "1"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ERROR: wrong allreduce result" in done.stderr
    result = json.loads((tmp_path / "allreduce_cnn_np2.json").read_text())
    assert result["model"] == "cnn" and result["bytes"] == answers.gradient_bytes("cnn")
    assert not result["correct"]
    assert [r["correct"] for r in result["results"]] == [False, False, False]
    assert result["results"][0]["calls"] == 8          # one allreduce per parameter array


@pytest.mark.slow
def test_measure_sweeps_sizes_for_the_notebook():
    result = ab.measure(np=2, sizes="4K:16K", iterations=2, warmup=1, timeout=120,
                        traffic_rule=lambda nbytes, p: 2 * nbytes * (p - 1) / p)
    assert result["sizes"] == [4096, 16384] and result["correct"]
    assert sorted((r["path"], r["bytes"]) for r in result["results"]) == sorted(
        (path, size) for path in ab.PATHS for size in (4096, 16384))
    assert [row["bytes"] for row in result["ratios"]] == [4096, 16384]
