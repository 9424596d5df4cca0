"""Task #1: the CPU stand-in is data parallel for real, and the grader tells right from wrong.

Tiers: the check of the solution and of the skeleton are quick; the planted mistakes (one list,
synthetic_class.MISTAKES) run at the smallest size that decides their check (slow); the
throughput ratio of the solution against the reference is timed (alone on the machine)."""

import sys
import types
import warnings

import chainer
import numpy
import pytest
from chainer import training

from handson_lib import data
from handson_lib.checking import checks
from handson_lib.autograder import synthetic_class
from handson_lib.runtime import models, multigpu
from conftest import ROOT, failed_checks, mutant

SOLUTION = ROOT / "solutions" / "train_cifar_multi_gpu.py"
MISTAKES = synthetic_class.mistakes_in(SOLUTION.name)
#: A planted mistake decides its check after a few steps on a few images.
SMALLEST = ["--epoch", "1", "--train-size", "256", "--test-size", "64", "--batchsize", "32", "--no-progress"]
CHECK_NAMES = ["runs to the end", "uses MultiprocessParallelUpdater", "one worker process per device",
               "shards are disjoint", "shards cover the training set", "parameters equal on all workers",
               "accuracy beats chance", "throughput vs the reference"]


@pytest.fixture(scope="module")
def reference(measure_reference):
    """The reference solution's graded run, measured once per session (conftest.measure_reference)."""
    return measure_reference(SOLUTION.name, ["--gpus", "0", "1", *checks.MULTI_GPU_ARGS])


def correctness_failures(report):
    return {name: message for name, message in failed_checks(report).items()
            if name not in {c.name for c in report.speed_checks}}


def test_the_check_of_the_solution_passes_every_correctness_check(reference):
    report = checks.check_multi_gpu(SOLUTION, reference=reference)
    assert [c.name for c in report.checks] == CHECK_NAMES
    assert correctness_failures(report) == {}, report.text()
    assert report.observed["backend"] == "cpu" and reference.record["backend"] == "cpu"
    assert "CPU stand-in (worker processes, NOT GPUs), 2 worker processes" in reference.output
    assert "optimizer.lr is changed to 0.01 by MultiprocessParallelUpdater" in reference.output


@pytest.mark.timed
def test_reference_solution_passes_every_check_with_its_throughput(reference):
    report = checks.check_multi_gpu(SOLUTION, reference=reference)
    assert report.ok, report.text()
    # The same script measured twice alone on the machine: the ratio sits at 1 within the noise.
    assert 0.8 < report.speed_checks[0].value < 1.25, report.text()


def test_skeleton_fails_with_not_implemented(skeleton_reports):
    report = skeleton_reports["multi-gpu"]
    failed = failed_checks(report)
    assert not report.ok
    assert failed["runs to the end"].startswith("not implemented yet: Task #1 is not complete")
    assert "`train_iters`, `devices` are still None" in failed["runs to the end"]


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in MISTAKES if MISTAKES[n].fails])
def test_a_planted_mistake_fails_its_own_checks(reference, tmp_path, name):
    mistake = MISTAKES[name]
    script = mistake.plant(SOLUTION, tmp_path)
    report = checks.check_multi_gpu(script, args=SMALLEST, reference=reference, min_accuracy=0.0)
    failed = correctness_failures(report)
    assert set(failed) == mistake.fails, report.text()
    assert mistake.says in "\n".join(failed.values()), report.text()
    if name == "standard_updater":
        assert "1 process(es) computed gradients, 2 expected" in failed["one worker process per device"] \
            or "0 process(es)" in failed["one worker process per device"]
        assert "only 1 worker iterator(s)" in failed["shards are disjoint"]


@pytest.mark.slow
def test_infinite_loop_is_stopped_by_the_watchdog(reference, tmp_path):
    mistake = MISTAKES["infinite_loop"]
    script = mistake.plant(SOLUTION, tmp_path)
    report = checks.check_multi_gpu(script, args=SMALLEST, reference=reference, timeout=20)
    failed = failed_checks(report)
    assert mistake.says in failed["runs to the end"]  # at its time limit, or earlier once it stalls


def _initialised_model(train, seed):
    numpy.random.seed(seed)
    model = models.get_model("cnn", 10)
    model(*chainer.dataset.concat_examples([train[0]]))
    return model


@pytest.mark.parametrize("n_workers", [2, 3])
def test_n_workers_with_batch_b_equal_one_process_with_batch_n_times_b(n_workers):
    train, _, _ = data.get_dataset("synthetic", n_train=240, n_test=10, announce=False)
    reference, parallel = _initialised_model(train, 0), _initialised_model(train, 1)
    parallel.copyparams(reference)
    initial = {name: param.array.copy() for name, param in reference.namedparams()}
    assert not numpy.allclose(_initialised_model(train, 1).predictor.fc1.W.array,
                              reference.predictor.fc1.W.array), "seeds should give different weights"
    b, steps = 8, 7
    shards = chainer.datasets.split_dataset_n_random(train, n_workers, seed=3)
    iterators = [chainer.iterators.SerialIterator(s, b, shuffle=False) for s in shards]
    optimizer = chainer.optimizers.MomentumSGD(lr=0.05)
    optimizer.setup(parallel)
    devices = {"main": 0, **{f"gpu{i}": i for i in range(1, n_workers)}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        updater = multigpu.CPUParallelUpdater(iterators, optimizer, devices)
    assert any("optimizer.lr is changed to" in str(w.message) for w in caught)
    trainer = training.Trainer(updater, (steps, "iteration"))
    trainer.run()
    assert updater.workers == []  # finalised: workers joined

    ref_optimizer = chainer.optimizers.MomentumSGD(lr=0.05)
    ref_optimizer.setup(reference)
    ref_iterators = [chainer.iterators.SerialIterator(s, b, shuffle=False) for s in shards]
    for _ in range(steps):
        batch = sum((it.next() for it in ref_iterators), [])
        ref_optimizer.update(reference, *chainer.dataset.concat_examples(batch))
    parallel_params = dict(parallel.namedparams())
    for name, param in reference.namedparams():
        numpy.testing.assert_allclose(parallel_params[name].array, param.array, rtol=1e-5, atol=1e-6,
                                      err_msg=name)
    moved = max(float(numpy.abs(param.array - initial[name]).max())
                for name, param in reference.namedparams())
    assert moved > 0, "training did not change the parameters"


def test_real_worker_processes_compute_gradients():
    train, _, _ = data.get_dataset("synthetic", n_train=64, n_test=10, announce=False)
    model = _initialised_model(train, 0)
    shards = chainer.datasets.split_dataset_n_random(train, 2, seed=0)
    iterators = [chainer.iterators.SerialIterator(s, 8) for s in shards]
    optimizer = chainer.optimizers.MomentumSGD(lr=0.01)
    optimizer.setup(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        updater = multigpu.CPUParallelUpdater(iterators, optimizer, {"main": 0, "gpu1": 1})
    updater.update()
    worker = updater.workers[0]
    assert worker.is_alive() and worker.pid not in (None, __import__("os").getpid())
    updater.finalize()
    assert not worker.is_alive()


def test_devices_dict_needs_a_main_entry():
    train, _, _ = data.get_dataset("synthetic", n_train=32, n_test=10, announce=False)
    model = _initialised_model(train, 0)
    optimizer = chainer.optimizers.MomentumSGD()
    optimizer.setup(model)
    iterators = [chainer.iterators.SerialIterator(s, 4) for s in chainer.datasets.split_dataset_n(train, 2)]
    with pytest.raises(KeyError, match="must name its main device 'main'"):
        multigpu.CPUParallelUpdater(iterators, optimizer, {"gpu0": 0, "gpu1": 1})
    with pytest.raises(ValueError, match="one iterator per device"):
        multigpu.CPUParallelUpdater(iterators[:1], optimizer, {"main": 0, "gpu1": 1})


def test_nccl_module_without_library_is_not_usable(monkeypatch):
    nccl = types.SimpleNamespace(available=False)
    cuda = types.SimpleNamespace(nccl=nccl, runtime=types.SimpleNamespace(getDeviceCount=lambda: 2))
    cupy = types.ModuleType("cupy")
    cupy.cuda = cuda
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.nccl", nccl)
    usable, reason = multigpu.nccl_status()
    assert not usable and "available is False" in reason


def test_cuda_initialised_before_the_fork_is_refused(monkeypatch):
    driver = types.SimpleNamespace(ctxGetCurrent=lambda: 0x55aa)
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(driver=driver)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    assert multigpu.cuda_context_initialized()
    with pytest.raises(RuntimeError, match="issue 4709"):
        multigpu.refuse_cuda_before_fork()
    driver.ctxGetCurrent = lambda: 0
    multigpu.refuse_cuda_before_fork()


def _report_with_speed(against, value):
    report = checks.Report("multi-gpu", "x.py", against=against, bands=tuple(checks.credit_bands(against, "local")))
    report.add("runs to the end", True, "")
    report.add("throughput: 2 devices vs your 1-device run" if against == "self" else
               "throughput vs the reference", True, "", value=value)
    return report


@pytest.mark.parametrize("against", checks.AGAINST)
def test_throughput_credit_uses_the_bands_of_the_reports_mode(against):
    bands = checks.credit_bands(against, "local")
    (full_floor, full_share), (part_floor, part_share) = bands[0], bands[1]
    assert checks.throughput_credit(_report_with_speed(against, full_floor), 2,
                                    print_fn=lambda *_: None) == 2 * full_share
    assert checks.throughput_credit(_report_with_speed(against, part_floor), 2,
                                    print_fn=lambda *_: None) == 2 * part_share
    with pytest.raises(AssertionError, match="no throughput credit"):
        checks.throughput_credit(_report_with_speed(against, part_floor * 0.9), 2, print_fn=lambda *_: None)


def test_self_and_reference_bands_differ():
    assert checks.credit_bands("self", "local") != checks.credit_bands("reference", "local")


def test_reference_mode_without_the_solutions_is_refused_clearly(monkeypatch, tmp_path):
    from handson_lib.checking import against, reference
    assert checks.default_against() == "reference"   # handed in (conftest), as the judge and `handson check` do
    monkeypatch.setattr(reference, "SOLUTIONS", tmp_path)
    assert checks.default_against() == "self"
    with pytest.raises(ValueError, match="use --against self"):
        checks.check_multi_gpu(SOLUTION, against="reference")
    with pytest.raises(ValueError, match="unknown mode"):
        checks.check_multi_gpu(SOLUTION, against="nobody")
    monkeypatch.setattr(against, "_HANDED_IN", None)   # none handed in: the student edition's case
    assert checks.default_against() == "self"
    with pytest.raises(ValueError, match="use --against self"):
        checks.check_multi_gpu(SOLUTION, against="reference")


@pytest.mark.timed
def test_a_doubled_training_step_is_timed_as_two_on_the_graders_clock(reference, tmp_path):
    """Task #1's throughput is the grader's: the student's steps timed in turn with the reference's
    from outside their process (checking.timing.paired), not the observer's record of a whole run. A
    correct script whose every step does its work twice (a forward and backward more, for nothing:
    the same training) is timed at about half the reference's rate."""
    script = MISTAKES["twice_the_work"].plant(SOLUTION, tmp_path)
    report = checks.check_multi_gpu(script, reference=reference, site="local")
    speed = report.speed_checks[0]
    assert "training steps timed in turn" in speed.message, report.text()
    assert 0.3 < speed.value < 0.7, report.text()
