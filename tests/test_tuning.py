"""Seed 004's tuning levers: definitions, the CPU's honesty about GPU-only levers, real runs."""

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

from handson_lib.experiments import tuning
from handson_lib.autograder import answers

TINY = {"iterations": 2, "warmup": 1, "batchsize": 8, "width": 4, "source_size": 40}


def test_levers_follow_the_talk_and_flag_the_gpu_only_ones():
    assert tuning.LEVER_NAMES == ("cudnn", "autotune", "fp16", "multiprocess", "static_graph", "batch")
    assert answers.GPU_ONLY_LEVERS == {"cudnn", "autotune"}
    for lever in tuning.LEVERS:
        assert lever.talk_lines and lever.lines, lever.name
        cfg = tuning.RunConfig()
        lever.apply(cfg)
        assert cfg != tuning.RunConfig(), f"{lever.name} switches nothing on"
    fp16 = "\n".join(tuning.LEVERS_BY_NAME["fp16"].lines)
    assert "chainer.mixed16" in fp16 and "loss_scaling()" in fp16 and "use_cudnn_tensor_core = 'always'" in fp16
    assert any("set_max_workspace_size" in line for line in tuning.LEVERS_BY_NAME["autotune"].lines)
    assert any("MultiprocessIterator" in line for line in tuning.LEVERS_BY_NAME["multiprocess"].talk_lines)


def test_unknown_or_repeated_lever_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown lever.*'tensorcore'.*choose from"):
        tuning.parse_levers("cudnn,tensorcore")
    with pytest.raises(ValueError, match="twice"):
        tuning.parse_levers(["fp16", "fp16"])
    assert tuning.parse_levers("") == []
    assert tuning.parse_levers(None) == list(tuning.LEVER_NAMES)


def test_gpu_only_levers_are_not_applied_on_a_cpu():
    cfg, applied, not_applied = tuning.configure(["cudnn", "autotune", "fp16"], gpu=False)
    assert applied == ["fp16"]
    assert set(not_applied) == {"cudnn", "autotune"}
    assert all("needs a GPU" in why for why in not_applied.values())
    assert (cfg.use_cudnn, cfg.autotune, cfg.workspace_bytes) == ("never", False, 0)
    assert cfg.dtype == "mixed16" and cfg.loss_scaling
    cfg, applied, not_applied = tuning.configure(["cudnn", "autotune", "fp16"], gpu=True)
    assert applied == ["cudnn", "autotune", "fp16"] and not not_applied
    assert (cfg.use_cudnn, cfg.autotune, cfg.workspace_bytes) == ("always", True, 512 * 1024 * 1024)


def test_cpu_plan_skips_gpu_steps_and_does_not_carry_fp16():
    steps = tuning.plan_steps(gpu=False)
    assert [s["label"] for s in steps][:3] == ["baseline", "+ cuDNN", "+ autotune"]
    assert [s["runnable"] for s in steps] == [True, False, False, True, True, True, True]
    by_lever = {s["lever"]: s for s in steps}
    assert by_lever["multiprocess"]["levers"] == ["multiprocess"]
    assert by_lever["batch"]["levers"] == ["multiprocess", "static_graph", "batch"]
    gpu_steps = tuning.plan_steps(gpu=True)
    assert all(s["runnable"] for s in gpu_steps)
    assert gpu_steps[-1]["levers"] == list(tuning.LEVER_NAMES)
    each = tuning.plan_steps(["fp16", "batch"], cumulative=False)
    assert [s["levers"] for s in each] == [[], ["fp16"], ["batch"]]


def test_talk_numbers_give_its_speedup():
    talk = tuning.talk_result()
    assert answers.speedup_over_baseline(talk, "+ static_graph") == pytest.approx(15.539 / 4.1826)
    assert round(answers.speedup_over_baseline(talk, "+ static_graph"), 1) == 3.7
    assert answers.speedup_over_baseline(talk, "+ FP16") < answers.speedup_over_baseline(talk, "+ autotune")
    steps = {step["label"]: step for step in talk["steps"]}
    assert steps["+ static_graph"]["speedup"] == pytest.approx(15.539 / 4.1826)   # the table's "x base"
    assert "seed 004" in tuning.table(talk)
    with pytest.raises(KeyError, match="no step"):
        answers.speedup_over_baseline(talk, "+ cuDNN x2")


def test_lever_descriptions_leave_the_gpu_question_to_the_student():
    """Notebook 05 asks which levers need a GPU right after describe_levers()."""
    lines = []
    tuning.describe_levers(lines.append)
    assert any("cuDNN" in line for line in lines) and any("static_graph" in line for line in lines)
    assert not any("needs a GPU" in line for line in lines)
    assert not hasattr(tuning, "GPU_ONLY") and not hasattr(tuning, "speedup")


def test_loader_decodes_and_augments_in_float32():
    dataset, text = tuning.encoded_dataset("synthetic", n_images=8, source_size=40, out_size=16)
    assert len(dataset) == 8 and "JPEG" in text
    x, label = dataset[3]
    assert x.shape == (3, 16, 16) and str(x.dtype) == "float32"
    assert 0.0 <= x.min() and x.max() <= 1.0 and 0 <= label < 10
    crops = [dataset[3][0] for _ in range(6)]
    assert any(abs(c - crops[0]).max() > 0 for c in crops[1:]), "the augmentation is not random"


def _worker(*args, timeout=120):
    proc = subprocess.run([sys.executable, "-m", "handson_lib.experiments.tuning", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    return proc, tuning.parse_report(proc.stdout)


@pytest.mark.slow
def test_fp16_worker_trains_with_float16_parameters():
    proc, report = _worker("--report", "--levers", "cudnn,fp16", "--iterations", 2, "--warmup", 1,
                           "--batchsize", 8, "--width", 4, "--source-size", 40)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert report["applied"] == ["fp16"]
    assert report["not_applied"] == {"cudnn": "needs a GPU: not applied"}
    assert report["param_dtype"] == "float16" and report["compute_dtype"] == "float16"
    assert report["config"]["dtype"] == "dtype('mixed16')"
    assert any("TensorCore" in note and "needs a GPU" in note for note in report["notes"])
    assert report["loss_finite"] and report["iterations_timed"] == 2
    assert "Throughput:" in proc.stdout and "needs a GPU: not applied" in proc.stdout


def test_worker_rejects_bad_levers():
    proc, report = _worker("--levers", "cudnn,warp-speed")
    assert proc.returncode == 2 and report is None
    assert "unknown lever" in proc.stderr and "warp-speed" in proc.stderr


def test_in_process_run_restores_chainer_config_and_uses_the_levers():
    import chainer
    report = tuning.train_and_measure(["multiprocess", "static_graph"], n_processes=2, print_fn=None,
                                      **TINY)
    assert report["iterator"] == "MultiprocessIterator(n_processes=2)"
    assert report["static_graph"] is True
    assert report["param_dtype"] == "float32" and report["loss_finite"]
    assert report["iterations_per_sec"] > 0 and report["images_per_sec"] == pytest.approx(
        report["iterations_per_sec"] * 8)
    fp16 = tuning.train_and_measure(["fp16"], print_fn=None, **TINY)
    assert fp16["param_dtype"] == "float16"
    assert chainer.get_dtype() == "float32", "the run left chainer.config.dtype changed"


@pytest.mark.slow
def test_run_levers_table_json_and_plot(tmp_path, run_handson):
    result = tuning.run_levers(["cudnn", "multiprocess"], repeats=2, print_fn=None, **TINY)
    baseline, cudnn, multiprocess = result["steps"]
    assert cudnn["status"] == "needs a GPU: not applied"
    assert cudnn["iterations_per_sec"] is None and cudnn["report"] is None and cudnn["speedup"] is None
    assert len(baseline["iterations_per_sec"]["runs"]) == 2
    assert baseline["report"]["iterator"] == "SerialIterator"
    assert multiprocess["report"]["iterator"].startswith("MultiprocessIterator")
    assert multiprocess["speedup"] == pytest.approx(
        multiprocess["images_per_sec"]["median"] / baseline["images_per_sec"]["median"])
    text = tuning.table(result)
    assert "needs a GPU: not applied" in text and "MultiprocessIterator(n_processes=" in text
    json.loads(json.dumps(result))
    png = tmp_path / "bars.png"
    tuning.bars_figure(result).savefig(png)
    assert png.stat().st_size > 5000

    out = tmp_path / "bench"
    proc = run_handson("bench", "tuning", "--levers", "autotune,batch", "--repeats", 1, "--iterations", 2,
                       "--warmup", 1, "--batchsize", 4, "--width", 4, "--source-size", 40,
                       "--out", out, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    saved = json.loads((out / "tuning.json").read_text())
    assert [s["label"] for s in saved["steps"]] == ["baseline", "+ autotune", "+ batch x4"]
    assert saved["steps"][2]["report"]["batchsize"] == 16
    assert (out / "tuning.png").stat().st_size > 5000
    assert "needs a GPU: not applied" in proc.stdout


def test_compare_iterators_checks_the_students_iterator():
    import chainer
    with pytest.raises(NotImplementedError, match="PUT YOUR CODE HERE"):
        tuning.compare_iterators(lambda dataset, batchsize: None, repeats=1, print_fn=None,
                                 iterations=1, warmup=0, batchsize=4, width=4, source_size=40)
    with pytest.raises(ValueError, match="repeat=True"):
        tuning.compare_iterators(
            lambda dataset, batchsize: chainer.iterators.SerialIterator(dataset, batchsize, repeat=False),
            repeats=1, print_fn=None, iterations=1, warmup=0, batchsize=4, width=4, source_size=40)
    result = tuning.compare_iterators(
        lambda dataset, batchsize: chainer.iterators.MultiprocessIterator(dataset, batchsize, n_processes=2),
        repeats=2, print_fn=None, iterations=2, warmup=1, batchsize=4, width=4, source_size=40)
    assert result["steps"][1]["report"]["iterator"] == "MultiprocessIterator(n_processes=2)"
    # The speed-up is notebook 05's question: the result holds the runs, not the answer.
    assert all("speedup" not in step and "gain" not in step for step in result["steps"])
    mine, base = (step["images_per_sec"] for step in reversed(result["steps"]))
    assert answers.speedup_over_baseline(result, "+ your iterator") == pytest.approx(
        mine["median"] / base["median"])
    assert "+ your iterator" in tuning.table(result)


@pytest.mark.gpu
def test_gpu_run_switches_every_lever_on():
    import cupy
    report = tuning.train_and_measure(list(tuning.LEVER_NAMES), gpu=0, iterations=3, warmup=2,
                                      model="cnn", print_fn=None)
    assert report["applied"] == list(tuning.LEVER_NAMES) and not report["not_applied"]
    assert report["config"]["use_cudnn"] == "always" and report["config"]["autotune"] == "True"
    assert report["config"]["max_workspace_size"] == 512 * 1024 * 1024
    assert report["param_dtype"] == "float16" and report["static_graph"]
    if int(cupy.cuda.Device(0).compute_capability) >= 70:
        assert report["config"]["use_cudnn_tensor_core"] == "always"
    assert report["backend"] == "cupy" and report["loss_finite"]


def test_effects_call_a_lever_faster_only_when_every_run_agrees():
    steps = tuning.plan_steps(["cudnn", "multiprocess", "batch"], gpu=False)

    def reports(rates, batch=32):
        return [{"iterations_per_sec": r / batch, "images_per_sec": r, "data_fraction": 0.1,
                 "batchsize": batch} for r in rates]

    runs = {0: reports([100, 110]), 2: reports([120, 130]), 3: reports([125, 140], batch=128)}
    result = tuning.measure.assemble(steps, runs, {"source": "unit test"})
    lines = tuning.effects(result)
    assert lines[0] == "+ cuDNN: needs a GPU: not applied"
    assert lines[1].startswith("+ MultiprocessIterator: x1.19") and "faster in every run" in lines[1]
    assert "vs + MultiprocessIterator" in lines[2] and "the runs overlap" in lines[2]
    assert result["steps"][3]["speedup"] == pytest.approx(132.5 / 105)


def test_gpu_flag_without_cupy_is_a_clear_error():
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed here")
    except ImportError:
        pass
    proc, report = _worker("--gpu", 0, "--levers", "cudnn")
    assert proc.returncode == 2 and report is None
    assert "--gpu needs CuPy" in proc.stderr
