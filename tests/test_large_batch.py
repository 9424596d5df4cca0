"""Large-batch training: the linear scaling rule, the warmup extension in a real trainer, the
accuracy-vs-batch experiment, multi-node batch normalization on 2 ranks, the pure_nccl options."""

import json

import numpy as np
import pytest

from handson_lib.experiments import large_batch as lb
from handson_lib.autograder import answers
from conftest import gpu_available

# Hand-computed: base lr 0.1 tuned for batch 32, run at batch 256 (k = 8): peak 0.8;
# warmup over W = 10 updates adds (0.8 - 0.1) / 10 = 0.07 per update.
BASE_LR, BASE_BATCH, BATCH, W = 0.1, 32, 256, 10
EXPECTED = [0.1, 0.17, 0.24, 0.31, 0.38, 0.45, 0.52, 0.59, 0.66, 0.73, 0.8, 0.8, 0.8, 0.8, 0.8]


def test_scaled_lr_is_the_linear_scaling_rule():
    assert answers.scaled_lr(0.1, 256, 8192) == pytest.approx(3.2, abs=1e-12)  # Goyal et al.'s 8k
    assert answers.scaled_lr(0.01, 16, 512) == pytest.approx(0.32, abs=1e-12)
    assert answers.scaled_lr(0.05, 64, 32) == pytest.approx(0.025, abs=1e-12)  # smaller batch, smaller lr
    assert answers.scaled_lr(0.02, 32, 32) == 0.02
    for bad in ((0, 32, 64), (0.1, 0, 64), (0.1, 32, -1), (0.1, True, 64), (0.1, "32", 64)):
        with pytest.raises(ValueError):
            answers.scaled_lr(*bad)


def test_warmup_lr_exact_values():
    for i, expected in enumerate(EXPECTED):
        assert answers.warmup_lr(i, BASE_LR, BASE_BATCH, BATCH, W) == pytest.approx(expected, abs=1e-12), i
    assert answers.warmup_lr(10_000, BASE_LR, BASE_BATCH, BATCH, W) == pytest.approx(0.8, abs=1e-12)
    # 0.05 at batch 64 -> 0.4 at 512 over 4 updates: 0.05, 0.1375, 0.225, 0.3125, 0.4
    assert [answers.warmup_lr(i, 0.05, 64, 512, 4) for i in range(6)] == pytest.approx(
        [0.05, 0.1375, 0.225, 0.3125, 0.4, 0.4], abs=1e-12)
    assert answers.warmup_lr(0, BASE_LR, BASE_BATCH, BATCH, 0) == pytest.approx(0.8)  # no warmup
    for bad in ((-1, W), (1.5, W), (0, -1), (0, 2.0)):
        with pytest.raises(ValueError):
            answers.warmup_lr(bad[0], BASE_LR, BASE_BATCH, BATCH, bad[1])


def test_warmup_extension_sets_the_lr_of_every_update_in_a_real_trainer():
    seen = lb.lr_trace(answers.WarmupScaledLR, base_lr=BASE_LR, base_batch=BASE_BATCH, batch=BATCH, warmup_iterations=W,
                       iterations=len(EXPECTED))
    # The first value proves the initializer ran: lr_trace starts the optimizer at -1.
    assert seen == pytest.approx(EXPECTED, abs=1e-12)


def test_warmup_extension_agrees_with_chainers_linear_shift():
    from chainer.training import extensions

    def linear_shift(base_lr, base_batch, batch, warmup_iterations):
        return extensions.LinearShift("lr", (base_lr, answers.scaled_lr(base_lr, base_batch, batch)),
                                      (0, warmup_iterations))
    kwargs = {"base_lr": 0.03, "base_batch": 16, "batch": 128, "warmup_iterations": 7, "iterations": 12}
    assert lb.lr_trace(answers.WarmupScaledLR, **kwargs) == pytest.approx(
        lb.lr_trace(linear_shift, **kwargs), abs=1e-12)


def test_lr_trace_catches_an_extension_without_initializer():
    class NoInitializer(answers.WarmupScaledLR):
        initialize = None

    seen = lb.lr_trace(lambda **kw: NoInitializer(**kw), BASE_LR, BASE_BATCH, BATCH, W, 3)
    assert seen[0] == -1.0 and seen[1:] == pytest.approx(EXPECTED[1:3])


def test_tiny_experiment_gives_every_schedule_and_batch_and_uses_the_given_rules():
    calls = []

    def constant_scaled(base_lr, base_batch, batch, warmup_iterations):
        """A 'warmup' that jumps straight to the scaled lr: must reproduce the 'scaled' runs."""
        calls.append((base_lr, base_batch, batch, warmup_iterations))
        return answers.WarmupScaledLR(base_lr, base_batch, batch, 0)

    result = lb.run(batches=(64, 256), epochs=2, base_lr=0.02, hidden_units=32, seeds=1,
                    warmup_epochs=1, scaling_rule=answers.scaled_lr, lr_schedule_factory=constant_scaled)
    assert result["batches"] == [64, 256] and result["schedules"] == list(lb.SCHEDULES)
    for schedule in lb.SCHEDULES:
        assert len(result["accuracy"][schedule]) == 2
        assert all(0.0 <= a <= 1.0 for a in result["accuracy"][schedule])
    assert len(result["runs"]) == 2 * 3
    n_train = result["config"]["n_train"]
    assert calls == [(0.02, 64, 64, round(n_train / 64)), (0.02, 64, 256, round(n_train / 256))]
    # same seed, same lr at every update -> the same model
    assert result["accuracy"]["scaled+warmup"] == result["accuracy"]["scaled"]
    assert result["accuracy"]["fixed"][0] == result["accuracy"]["scaled"][0]  # batch == base batch
    final_lr = {(r["schedule"], r["batch"]): r["final_lr"] for r in result["runs"]}
    assert final_lr[("fixed", 256)] == pytest.approx(0.02)
    assert final_lr[("scaled", 256)] == final_lr[("scaled+warmup", 256)] == pytest.approx(0.08)
    assert result["config"]["scaling_rule"] == "scaled_lr"
    assert answers.gain(result, "scaled") == pytest.approx(
        result["accuracy"]["scaled"][1] - result["accuracy"]["fixed"][1])
    json.dumps(result)  # the bench writes it as JSON
    text = lb.format_table(result)
    assert "256" in text and "scaled+warmup" in text
    fig = lb.accuracy_figure(result)
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 3 and ax.get_xscale() == "log"


def test_experiment_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown schedule"):
        lb.run(batches=(32,), schedules=("cosine",), epochs=1)
    with pytest.raises(ValueError, match="larger than the training set"):
        lb.run(batches=(100_000,), schedules=("fixed",), epochs=1)
    with pytest.raises(ValueError, match="epochs"):
        lb.run(batches=(32,), schedules=("fixed",), epochs=0)


def test_the_experiment_has_no_learning_rate_rule_of_its_own():
    """Notebook 06 asks for the rule and the warmup: the student-side module takes them as
    parameters and has none to fall back on."""
    for name in ("scaled_lr", "warmup_lr", "WarmupScaledLR", "gain"):
        assert not hasattr(lb, name), name
    with pytest.raises(ValueError, match="'scaled' needs scaling_rule"):
        lb.run(batches=(32,), schedules=("fixed", "scaled"), epochs=1)
    with pytest.raises(ValueError, match="'scaled\\+warmup' needs lr_schedule_factory"):
        lb.run(batches=(32,), schedules=("scaled+warmup",), epochs=1, scaling_rule=answers.scaled_lr)
    with pytest.raises(TypeError):
        lb.lr_trace()
    with pytest.raises(ValueError):
        lb.command._parse_batches("32,abc")
    assert lb.warmup_iterations_for(2, 1438, 512) == 6
    assert lb.warmup_iterations_for(0.1, 100, 512) == 1  # a warmup is at least one update
    assert lb.warmup_iterations_for(0, 1438, 16) == 0


def test_gpu_option_hooks_change_the_gradients_as_described():
    import chainer
    import chainer.links as L

    model = L.Linear(3, 2)
    model.W.array[...] = 0
    opt = chainer.optimizers.MomentumSGD(lr=0.1)
    opt.setup(model)
    model.cleargrads()
    model.W.grad = np.full((2, 3), 1 / 3, np.float32)
    model.b.grad = np.zeros(2, np.float32)
    lb.simulation._RoundGradsToFP16()(opt)
    assert model.W.grad[0, 0] == np.float32(np.float16(1 / 3)) != np.float32(1 / 3)

    stale = lb.simulation._OneStepStaleGrads()
    model.W.grad[...] = 1.0
    stale(opt)
    assert (model.W.grad == 0).all()  # first update: nothing to apply yet
    model.W.grad[...] = 2.0
    stale(opt)
    assert (model.W.grad == 1.0).all()  # the previous iteration's gradient


@pytest.mark.slow
def test_multi_node_batch_normalization_uses_the_whole_batch_on_2_ranks():
    result = lb.bn_compare(ranks=2, local_batch=4, channels=3)
    ranks = result["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    whole, single = result["whole_batch"], result["single_process"]
    for stat in ("mean", "var"):
        assert single[stat] == pytest.approx(whole[stat], abs=1e-4)
        for row in ranks:
            # MultiNodeBN: every rank normalizes with the statistics of the concatenated batch
            assert row["multi_node_bn"][stat] == pytest.approx(whole[stat], abs=1e-4)
            # local BN: each rank its own rows
            assert row["local_bn"][stat] == pytest.approx(row["own_rows"][stat], abs=1e-4)
        assert not np.allclose(ranks[0]["local_bn"][stat], ranks[1]["local_bn"][stat], atol=1e-2)
        assert not np.allclose(ranks[0]["local_bn"][stat], whole[stat], atol=1e-2)


@pytest.mark.skipif(gpu_available(), reason="checks the CPU host's answer")
def test_pure_nccl_options_report_chainers_error_on_a_cpu_host():
    probe = lb.try_gpu_options()
    by_call = {a["call"]: a for a in probe["attempts"]}
    fp16_nccl, fp16_naive, double_buffering = (by_call[call] for call, _ in lb.GPU_OPTIONS)
    assert not fp16_nccl["ok"] and "NCCL" in fp16_nccl["error"]
    assert not fp16_naive["ok"] and "only available at 'pure_nccl'" in fp16_naive["error"]
    assert not double_buffering["ok"] and "does not support double buffering" in double_buffering["error"]
    assert probe["gpus"] == 0


@pytest.mark.slow
def test_bench_cli_writes_json_and_plot(run_handson, tmp_path):
    out = run_handson("bench", "large-batch", "--epochs", "1", "--batches", "256,512", "--seeds", "1",
                      "--hidden-units", "16", "--out", tmp_path, "--plot", tmp_path / "lb.png")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "scaled+warmup" in out.stdout and "points" in out.stdout
    saved = json.loads((tmp_path / "large_batch.json").read_text())
    assert saved["batches"] == [256, 512] and set(saved["accuracy"]) == set(lb.SCHEDULES)
    png = tmp_path / "lb.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib import image
    pixels = image.imread(png)
    assert pixels.shape[0] > 200 and pixels.shape[1] > 300, pixels.shape
    # Drawn: lines in several colours, not a blank canvas.
    assert len({tuple(px) for px in pixels.reshape(-1, pixels.shape[-1])[::7]}) > 20
    bad = run_handson("bench", "large-batch", "--batches", "16,x", "--out", "")
    assert bad.returncode == 2 and "--batches" in bad.stderr


@pytest.mark.gpu
def test_fp16_allreduce_and_double_buffering_train_on_a_gpu():
    run = lb.run_gpu_options(ranks=1, iterations=40)
    assert run["communicator"] == "PureNcclCommunicator"
    assert run["allreduce_grad_dtype"] == "float16"
    assert run["optimizer"] == "_DoubleBufferingOptimizer"
    losses = run["losses"]
    assert all(np.isfinite(losses))
    assert np.mean(losses[-5:]) < np.mean(losses[:5])


def test_imagenet_table_derives_updates_and_the_rules_lr():
    rows = {r["team"]: r for r in lb.imagenet_table(scaling_rule=answers.scaled_lr)}
    assert rows["He et al."]["updates"] == 450_410  # 90 * 1,281,167 / 256
    assert rows["Goyal et al."]["rule_lr"] == pytest.approx(3.2)  # 0.1 * 8192 / 256
    assert all(row["rule_lr"] is None for row in lb.imagenet_table())   # no rule given, none shown
    lines = []
    lb.print_imagenet_table(print_fn=lines.append)
    assert "rule lr" not in lines[0] and "updates" in lines[0]
    assert rows["Akiba et al. (ChainerMN)"]["batch"] == 32768
    assert rows["Akiba et al. (ChainerMN)"]["updates"] == 3519


def test_simulated_gpu_options_train_each_variant():
    simulated = lb.simulate_gpu_options(lr=0.16, batch=256, epochs=1, seeds=1, hidden_units=16)
    assert list(simulated["accuracy"]) == ["FP32 gradients", "FP16-rounded gradients",
                                           "1-step stale gradients"]
    assert all(0.0 <= a <= 1.0 for a in simulated["accuracy"].values())
    assert simulated["config"]["lr"] == 0.16
    assert len(simulated["runs"]) == 3
