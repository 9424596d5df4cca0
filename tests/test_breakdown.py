"""`handson profile breakdown` and the phase instrumentation (seed 001's compute / allreduce / update)."""

import contextlib
import io
import json
import sys
import types

import chainer  # imported before any fake `cupy` module is injected
import chainermn
import numpy
import pytest

from handson_lib import cli
from handson_lib.experiments import breakdown, report
from handson_lib.autograder import answers
from handson_lib.runtime import phases
from handson_lib import launch
from handson_lib.runtime.models import get_model

from conftest import ROOT

WARMUP, ITERATIONS, BATCH = 2, 4, 8


# ----------------------------------------------------------------------------- in-process set-up

class FakeCommunicator:
    """Stands in for a 1-rank ChainerMN communicator: enough for _MultiNodeOptimizer.update."""

    rank, size = 0, 1

    def __init__(self):
        self.mean_grad_calls = 0

    def bcast_data(self, model):
        pass

    def multi_node_mean_grad(self, model, zero_fill=False):
        self.mean_grad_calls += 1


def make_updater(multi_node=False, seed=0, n=48, batch=BATCH):
    numpy.random.seed(seed)
    model = get_model("cnn", n_class=10)
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        model.predictor(numpy.zeros((1, 3, 32, 32), numpy.float32))  # lazy layers get their shapes
    rng = numpy.random.RandomState(seed)
    images = rng.rand(n, 3, 32, 32).astype(numpy.float32)
    labels = rng.randint(0, 10, n).astype(numpy.int32)
    optimizer = chainer.optimizers.MomentumSGD(lr=0.05)
    comm = None
    if multi_node:
        comm = FakeCommunicator()
        optimizer = chainermn.create_multi_node_optimizer(optimizer, comm)
    optimizer.setup(model)
    iterator = chainer.iterators.SerialIterator(chainer.datasets.TupleDataset(images, labels), batch,
                                                shuffle=False)
    return chainer.training.updaters.StandardUpdater(iterator, optimizer), model, comm


def params_of(model):
    return {name: p.array.copy() for name, p in sorted(model.namedparams())}


class FakeNvtx:
    def __init__(self, fail=False):
        self.calls = []
        self.fail = fail

    def RangePush(self, name):
        if self.fail:
            raise OSError("libnvToolsExt.so: cannot open shared object file")
        self.calls.append(("push", name))

    def RangePop(self):
        self.calls.append(("pop", None))


def inject_fake_cupy(monkeypatch, nvtx):
    cupy = types.ModuleType("cupy")
    cuda = types.ModuleType("cupy.cuda")
    module = types.ModuleType("cupy.cuda.nvtx")
    module.RangePush, module.RangePop = nvtx.RangePush, nvtx.RangePop
    cupy.cuda, cuda.nvtx = cuda, module
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.nvtx", module)


# ----------------------------------------------------------------------------- instrumentation

@pytest.mark.parametrize("multi_node", [False, True], ids=["plain", "multi-node"])
def test_instrumentation_leaves_training_unchanged(multi_node):
    steps = 3
    plain_updater, plain_model, _ = make_updater(multi_node)
    timed_updater, timed_model, comm = make_updater(multi_node)
    assert all(numpy.array_equal(a, b) for a, b in
               zip(params_of(plain_model).values(), params_of(timed_model).values()))
    rec = phases.instrument(timed_updater, nvtx=False)
    for _ in range(steps):
        plain_updater.update()
        timed_updater.update()
    before, after = params_of(plain_model), params_of(timed_model)
    assert before.keys() == after.keys()
    for name in before:
        assert numpy.array_equal(before[name], after[name]), name
    # ...and the training did move the parameters (the comparison is not vacuous).
    _, fresh, _ = make_updater(multi_node)
    assert any(not numpy.array_equal(a, b) for a, b in zip(params_of(fresh).values(), after.values()))
    assert len(rec.iterations) == steps
    if multi_node:
        # The first iteration broadcasts rank 0's weights instead of averaging and updating.
        assert comm.mean_grad_calls == steps - 1
        assert set(rec.iterations[0]) == {"forward", "backward", "iteration"}
        for record in rec.iterations[1:]:
            assert set(record) == {"forward", "backward", "allreduce", "update", "iteration"}
    else:
        for record in rec.iterations:
            assert set(record) == {"forward", "backward", "update", "iteration"}
    for record in rec.iterations:
        assert all(v > 0 for v in record.values())
        assert sum(v for k, v in record.items() if k != "iteration") <= record["iteration"]
    rec.remove()
    optimizer = timed_updater.get_optimizer("main")
    assert "update" not in vars(timed_updater) and "update" not in vars(optimizer)
    if multi_node:
        assert "multi_node_mean_grad" not in vars(comm)
        assert "update" not in vars(optimizer.actual_optimizer)
    timed_updater.update()
    assert len(rec.iterations) == steps  # removed: nothing recorded any more


@pytest.mark.parametrize("multi_node", [False, True])
def test_a_timed_step_frees_its_graph_without_the_garbage_collector(multi_node, monkeypatch):
    """The backward wrapper must not tie the loss to itself: a cycle kept every step's graph (and
    its arrays) alive until the collector ran, and the heap grew while the phases were timed."""
    import gc
    import weakref
    updater, model, _ = make_updater(multi_node)
    rec = phases.instrument(updater, nvtx=False)
    losses = []
    classify = model.forward

    def remember_loss(*args, **kwargs):
        loss = classify(*args, **kwargs)
        losses.append(weakref.ref(loss))
        return loss
    monkeypatch.setattr(model, "forward", remember_loss, raising=False)
    gc.disable()
    try:
        for _ in range(3):
            updater.update()
        # Chainer's Classifier keeps the newest loss (`model.loss`): the others must be gone.
        assert len(losses) == 3 and all(ref() is None for ref in losses[:-1]), \
            "a timed step's loss outlived the step (a reference cycle)"
    finally:
        gc.enable()
    assert len(rec.iterations) == 3


def test_an_optimizer_alone_is_one_iteration_per_update():
    updater, model, _ = make_updater()
    rec = phases.instrument(updater.get_optimizer("main"), nvtx=False)
    updater.update()
    updater.update()
    assert [set(r) for r in rec.iterations] == [{"forward", "backward", "update", "iteration"}] * 2
    # gradients given (no loss function): the whole call is the update
    updater.get_optimizer("main").update()
    assert set(rec.iterations[-1]) == {"update", "iteration"}


def test_instrumenting_twice_or_a_wrong_object_is_refused():
    updater, _, _ = make_updater()
    phases.instrument(updater, nvtx=False)
    with pytest.raises(RuntimeError, match="already instrumented"):
        phases.instrument(updater, nvtx=False)
    with pytest.raises(TypeError, match="updater or optimizer"):
        phases.instrument(object())


def test_nvtx_ranges_carry_the_phase_names(monkeypatch):
    nvtx = FakeNvtx()
    inject_fake_cupy(monkeypatch, nvtx)
    updater, _, _ = make_updater(multi_node=True)
    rec = phases.instrument(updater)  # nvtx=None: CuPy's when it imports (the fake here)
    assert rec.nvtx is not None
    for _ in range(2):
        updater.update()
    pushes = [name for kind, name in nvtx.calls if kind == "push"]
    assert pushes == ["iteration", "forward", "backward",
                      "iteration", "forward", "backward", "allreduce", "update"]
    depth = 0
    for kind, _ in nvtx.calls:  # balanced, never below zero
        depth += 1 if kind == "push" else -1
        assert depth >= 0
    assert depth == 0 and rec.nvtx_calls == len(nvtx.calls)


def test_a_failing_nvtx_library_switches_nvtx_off_not_the_training(monkeypatch):
    inject_fake_cupy(monkeypatch, FakeNvtx(fail=True))
    updater, _, _ = make_updater()
    rec = phases.instrument(updater)
    updater.update()
    updater.update()
    assert rec.nvtx is None and "libnvToolsExt" in rec.nvtx_error
    assert len(rec.iterations) == 2 and "forward" in rec.iterations[1]


def test_the_device_is_synchronised_before_every_clock_reading():
    ticks, syncs = [], []
    clock = iter(range(1000))
    rec = phases.PhaseRecorder(nvtx=False, sync=lambda: syncs.append(len(ticks)),
                                  clock=lambda: ticks.append(1) or next(clock))
    rec.begin_iteration()
    rec.push("forward")
    rec.pop("forward")
    rec.end_iteration()
    assert len(syncs) == len(ticks) == 4
    assert syncs == [0, 1, 2, 3]  # each sync came before its clock reading
    assert rec.iterations == [{"forward": 1, "iteration": 3}]


def test_range_bookkeeping_survives_an_exception_in_forward():
    nvtx = FakeNvtx()
    updater, model, _ = make_updater()
    rec = phases.instrument(updater, nvtx=nvtx)

    def broken_forward(*args, **kwargs):
        raise ZeroDivisionError("planted")
    object.__setattr__(model, "forward", broken_forward)
    with pytest.raises(ZeroDivisionError):
        updater.update()
    assert rec.iterations == [] and rec.open_phases == [] and not rec.in_iteration
    assert sum(1 if k == "push" else -1 for k, _ in nvtx.calls) == 0
    with pytest.raises(RuntimeError, match="closed while"):
        rec.begin_iteration()
        rec.push("forward")
        rec.pop("backward")


def test_summary_medians_and_other():
    iterations = [{"forward": 1.0, "backward": 2.0, "iteration": 4.0},
                  {"forward": 3.0, "backward": 2.0, "allreduce": 1.0, "iteration": 7.0},
                  {"forward": 2.0, "backward": 4.0, "allreduce": 1.0, "iteration": 8.0}]
    s = phases.summarize(iterations, warmup=1)
    assert s["phases_s"] == {"forward": 2.0, "backward": 2.0, "allreduce": 1.0, "other": 1.0}
    assert s["iteration_s"] == 7.0 and s["total_s"] == 19.0 and s["timed_iterations"] == 3


def test_environment_switch(tmp_path):
    updater, _, _ = make_updater()
    assert phases.enable_from_environment(updater, environ={}) is None
    assert phases.enable_from_environment(updater, environ={"HANDSON_PHASES": "0"}) is None
    with pytest.raises(ValueError, match="HANDSON_PHASES='sometimes'"):
        phases.enable_from_environment(updater, environ={"HANDSON_PHASES": "sometimes"})
    printed = []
    rec = phases.enable_from_environment(updater, out=tmp_path, warmup=1, print_fn=printed.append,
                                            environ={"HANDSON_PHASES": "1"}, at_exit=False)
    for _ in range(3):
        updater.update()
    summary = rec.report()
    assert summary["timed_iterations"] == 2
    assert printed and printed[0].startswith("Phases (median ms/iteration over 2)")
    saved = json.loads((tmp_path / "phases.json").read_text())
    assert saved["timed_iterations"] == 2 and len(saved["iterations"]) == 3
    assert saved["gradient_bytes"] == 4 * sum(p.size for p in updater.get_optimizer("main").target.params())


def test_training_helper_is_a_no_op_without_the_variable(monkeypatch):
    from handson_lib.runtime import training
    monkeypatch.delenv("HANDSON_PHASES", raising=False)
    updater, _, _ = make_updater()
    assert training.instrument_phases(updater) is None
    assert "update" not in vars(updater)


# ----------------------------------------------------------------------------- MPI measurement

@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """`handson profile breakdown --np 1 2` on tiny settings, through the CLI."""
    out = tmp_path_factory.mktemp("breakdown")
    argv = ["profile", "breakdown", "--np", "1", "2", "--batchsize", str(BATCH), "--iterations",
            str(ITERATIONS), "--warmup", str(WARMUP), "--json", str(out / "r.json"),
            "--plot", str(out / "phases.png"), "--timeout", "240"]
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        rc = cli.main(argv)
    assert rc == 0, text.getvalue()
    saved = json.loads((out / "r.json").read_text())
    assert saved["benchmark"] == "breakdown"
    results = breakdown.from_json(saved)
    return results, text.getvalue(), out


@pytest.mark.slow
def test_every_rank_times_every_phase_after_the_warmup(measured):
    results, _, _ = measured
    r2 = results[2]
    assert r2["np"] == 2 and r2["total_batch"] == 2 * BATCH and len(r2["ranks"]) == 2
    for rank in r2["ranks"]:
        assert len(rank["per_iteration"]) == WARMUP + ITERATIONS
        assert rank["timed_iterations"] == ITERATIONS
        # The broadcast iteration (the first) is warm-up: no allreduce, no update in it.
        assert "allreduce" not in rank["per_iteration"][0]
        for record in rank["per_iteration"][WARMUP:]:
            spent = {k: v for k, v in record.items() if k != "iteration"}
            assert set(spent) == set(phases.PHASES)
            assert all(v > 0 for v in spent.values())
            assert sum(spent.values()) <= record["iteration"] * (1 + 1e-9)
        assert set(rank["phases_s"]) == set(phases.PHASES) | {"other"}
        assert rank["phases_s"]["allreduce"] > 0
        timed = rank["per_iteration"][WARMUP:]
        assert rank["total_s"] == pytest.approx(sum(r["iteration"] for r in timed))
    slowest = max(r["total_s"] for r in r2["ranks"])
    assert r2["throughput"] == pytest.approx(2 * BATCH * ITERATIONS / slowest)


@pytest.mark.slow
def test_one_rank_still_has_an_allreduce_phase(measured):
    results, _, _ = measured
    r1 = results[1]
    assert r1["np"] == 1 and len(r1["ranks"]) == 1
    # The phase is timed on one rank too: the call into ChainerMN with no peer to wait for, so it
    # is shorter than with a second rank.
    assert 0 < r1["phases_s"]["allreduce"] < results[2]["phases_s"]["allreduce"], (r1["phases_s"], results[2]["phases_s"])
    eff = answers.parallel_efficiency(results)
    assert eff[1] == pytest.approx(1.0)
    assert eff[2] == pytest.approx(results[2]["throughput"] / (2 * r1["throughput"]))


@pytest.mark.slow
def test_gradient_size_is_the_models(measured):
    results, _, _ = measured
    model = get_model("cnn", n_class=10)
    with chainer.using_config("train", False):
        model.predictor(numpy.zeros((1, 3, 32, 32), numpy.float32))  # lazy layers get their shapes
    expected = 4 * sum(p.size for p in model.params())
    assert results[1]["gradient_bytes"] == results[2]["gradient_bytes"] == expected


@pytest.mark.slow
def test_timer_hook_table_names_chainer_functions(measured):
    results, text, _ = measured
    hook = results[2]["timer_hook"]
    names = [row["function"] for row in hook["rows"]]
    assert "Convolution2DFunction" in names and "LinearFunction" in names
    linear = next(r for r in hook["rows"] if r["function"] == "LinearFunction")
    assert linear["count"] > 0 and linear["count"] % ITERATIONS == 0
    assert hook["rows"] == sorted(hook["rows"], key=lambda r: -r["total_ms"])
    # The hook sees only what runs inside forward and backward on rank 0.
    rank0 = results[2]["ranks"][0]
    compute = sum(r["forward"] + r["backward"] for r in rank0["per_iteration"][WARMUP:])
    assert 0 < hook["total_ms"] <= compute * 1e3 * 1.01
    assert "Convolution2DFunction" in text and "images/s" in text
    # Notebook 04 asks for the efficiency: the phase table shows it only when given one.
    assert "efficiency" not in breakdown.format_phase_table(results)
    assert "efficiency" in breakdown.format_phase_table(results, answers.parallel_efficiency(results))


@pytest.mark.slow
def test_the_json_renders_in_the_bench_report(measured):
    _, _, out = measured
    title, text, fig = report.render(json.loads((out / "r.json").read_text()))
    assert title.startswith("phase breakdown on 1, 2 rank(s)") and "allreduce" in text
    assert fig.axes


@pytest.mark.slow
def test_figures_are_written(measured):
    _, _, out = measured
    assert (out / "phases.png").stat().st_size > 1000
    assert (out / "phases_scaling.png").stat().st_size > 1000


@pytest.mark.slow
def test_phase_figure_stacks_the_measured_phases(measured):
    import matplotlib
    matplotlib.use("Agg")
    results, _, _ = measured
    fig = breakdown.phase_figure(results)
    bars = fig.axes[0].patches
    assert len(bars) == len(results) * (len(phases.PHASES) + 1)
    for i, p in enumerate(sorted(results)):
        column = bars[i::len(results)]
        assert sum(b.get_height() for b in column) == pytest.approx(
            sum(max(0, v) for v in results[p]["phases_s"].values()) * 1e3)


def test_bad_arguments_are_refused_before_any_run():
    with pytest.raises(ValueError, match="warmup must be an integer >= 1"):
        breakdown.measure(np=2, warmup=0)
    with pytest.raises(ValueError, match="unknown model"):
        breakdown.measure(np=2, model="alexnet")


@pytest.mark.slow
def test_training_script_reports_phases_when_switched_on(tmp_path):
    out = tmp_path / "p2"
    run = launch.run_mpi(2, [ROOT / "solutions" / "train_cifar_multi_node.py", "--epoch", 1,
                          "--train-size", 192, "--test-size", 32, "--batchsize", 16, "--no-progress",
                          "--out", out], timeout=240, env={**__import__("os").environ,
                                                          "HANDSON_PHASES": "1"})
    assert run.ok, run.tail()
    assert "Throughput:" in run.output
    for rank in (0, 1):
        assert f"Phases (rank {rank}, median ms/iteration" in run.output
        saved = json.loads((out / f"phases_rank{rank}.json").read_text())
        assert set(saved["phases_s"]) == set(phases.PHASES) | {"other"}
        # The spans of the timed iterations (at most the newest SPAN_ITERATIONS), on the shared clock.
        kept = min(saved["timed_iterations"], phases.SPAN_ITERATIONS)
        assert [s[0] for s in saved["spans"]].count("iteration") == kept and saved["host"]
    swept = breakdown.load_sweep(tmp_path)
    assert list(swept) == [2] and swept[2]["throughput"] > 0 and swept[2]["gradient_bytes"] > 0
    assert [lane["rank"] for lane in swept[2]["timeline"]] == [0, 1]
