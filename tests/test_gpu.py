"""GPU runs (skipped on hosts without a GPU): Chainer's real updater and pure_nccl."""

import pytest

from handson_lib.checking import checks, runs
from handson_lib.runtime import devices
from conftest import ROOT

pytestmark = pytest.mark.gpu


def test_real_multiprocess_parallel_updater_is_chosen_and_passes():
    usable, reason = devices.nccl_status()
    assert usable, reason
    report = checks.check_multi_gpu(ROOT / "solutions" / "train_cifar_multi_gpu.py",
                                     gpus=min(2, devices.gpu_count().count))
    assert report.observed["backend"] == "chainer", report.text()
    assert report.ok, report.text()


def test_chainermn_pure_nccl_on_one_gpu_rank():
    obs = runs.run_observed_mpi(ROOT / "solutions" / "train_cifar_multi_node.py", 1,
                                   ["--gpu", *checks.MULTI_NODE_ARGS], timeout=600)
    assert obs.finished, obs.output[-3000:]
    assert "Using pure_nccl communicator" in obs.output
