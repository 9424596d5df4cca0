"""The GPU kit (handson_lib/tools/gpu_kit.py, `make gpu-kit`) run exactly as the lent GPU machine will
run it, as far as a machine without a GPU can: the image's Python 3.12 with NumPy 2.5.2, CuPy 14.2
(CUDA 13, NVRTC, NCCL) and mpi4py but no Chainer (`make gpu-image`), the kit's one command
`gpu-kit/run OUT` from a folder that is not the course, no network (`unshare -n`, loopback only),
HOME unset, the system's PATH.

CuPy is told that it sees two GPUs (a sitecustomize answers `getDeviceCount()`; with
CUDA_VISIBLE_DEVICES= it answers as CuPy does: none), so that every GPU step starts: each must get
past MPI start-up, the communicator and the kernels' compilation (NVRTC) and stop at its first
call that needs a device, with CUDA's error. The CPU half passes as on any machine."""

import json
import os
import subprocess

import pytest

from conftest import ROOT
from handson_lib.tools import gpu_kit

pytestmark = pytest.mark.slow
GPU_IMAGE = ROOT / "build" / "gpu-image" / "bin" / "python"
FAKE_GPUS = '''
import importlib.abc, importlib.util, os, sys
class _TwoGpus(importlib.abc.MetaPathFinder):
    """After CuPy's runtime module loads, getDeviceCount() answers 2 (none with CUDA_VISIBLE_DEVICES=)."""
    def find_spec(self, name, path=None, target=None):
        if name != "cupy_backends.cuda.api.runtime":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            real = module.getDeviceCount
            module.getDeviceCount = lambda: real() if os.environ.get("CUDA_VISIBLE_DEVICES") == "" else 2
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, _TwoGpus())
'''
GPU_STEPS = ("task1 1 gpu", "task1 2 gpus", "task2 pure_nccl", "mnist gpu")


def test_plan_fits_the_lent_machine():
    assert gpu_kit.INSTALL_SECONDS + sum(gpu_kit.LIMITS.values()) <= gpu_kit.PLAN_SECONDS <= 8 * 60
    assert 5 + gpu_kit.FIGURES <= 8     # results.json, summary.txt, logs.txt, profile.txt, steps.tar.gz


def test_ncu_csv_becomes_a_table_of_kernels_by_time():
    csv_text = ('==PROF== Connected to process 1\n'
                '"ID","Process ID","Kernel Name","gpu__time_duration.sum"\n'
                '"","","","usecond"\n'
                '"0","1","cupy_batched_pack_params","2.00"\n'
                '"1","1","sgemm","6.00"\n'
                '"2","1","sgemm","2.00"\n')
    table = gpu_kit.ncu_kernel_table(csv_text)
    assert "3 kernels profiled, 2 distinct, 0.010 ms" in table
    lines = table.splitlines()[2:]
    assert lines[0].split()[:3] == ["80.0%", "0.008", "2"] and lines[0].endswith("sgemm")
    assert lines[1].endswith("cupy_batched_pack_params")


@pytest.fixture(scope="module")
def kit_run(tmp_path_factory):
    """The kit built here and run in the GPU image without network or HOME: (exit code, output, OUT)."""
    if not GPU_IMAGE.exists():
        pytest.skip("no GPU image venv at build/gpu-image: `make gpu-image` builds it")
    base = tmp_path_factory.mktemp("gpu-machine")
    kit = base / "gpu-kit"
    assert gpu_kit.build(kit) <= 60 * 2**20
    fake = base / "fake"
    fake.mkdir()
    (fake / "sitecustomize.py").write_text(FAKE_GPUS)
    elsewhere, out = base / "clean", base / "out"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "HOME", "CI")}
    env.update(PATH="/usr/bin:/bin", PYTHON=str(GPU_IMAGE), PYTHONPATH=str(fake), TMPDIR=str(base))
    unshare = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--map-root-user", "--net"]
    cmd = [*unshare, "sh", "-c", 'ip link set lo up 2>/dev/null; exec "$0" "$1"', str(kit / "run"), str(out)]
    proc = subprocess.run(cmd, cwd=elsewhere, capture_output=True, text=True, timeout=600, env=env,
                          stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout + proc.stderr, out


def test_the_cpu_half_passes_and_home_is_set(kit_run):
    rc, output, out = kit_run
    results = json.loads((out / "results.json").read_text())
    facts, steps = results["facts"], {s["step"]: s for s in results["steps"]}
    assert (facts["python"][:5], facts["numpy"], facts["cupy"], facts["gpus"]) == ("3.12.", "2.5.2", "14.2.0", 2)
    assert "HOME was unset" in output and facts["home"].endswith("/home")
    for name in ("doctor", "cpu task1", "cpu task2 naive"):
        assert steps[name]["ok"] is True, (name, steps[name], output[-3000:])
    assert steps["cpu task1"]["images_per_sec"] > 0 and steps["cpu task2 naive"]["images_per_sec"] > 0
    logs = (out / "logs.txt").read_text()
    assert "MultiprocessParallelUpdater backend: CPU stand-in" in logs


def test_each_gpu_step_reaches_its_first_device_call(kit_run):
    rc, output, out = kit_run
    assert rc == 1, output[-3000:]          # the GPU steps fail: there is no GPU
    steps = {s["step"]: s for s in json.loads((out / "results.json").read_text())["steps"]}
    assert steps["kernels"]["ok"] is True, steps["kernels"]      # NVRTC compiled the kit's kernels
    for name in GPU_STEPS:
        assert steps[name]["ok"] is False and steps[name].get("device_error"), (name, steps[name])
    logs = (out / "logs.txt").read_text()
    sections = {s.split(" (", 1)[0]: s for s in logs.split("===== ")[1:]}
    assert "MultiprocessParallelUpdater backend: Chainer's (NCCL" in sections["task1 2 gpus"]
    assert "Using pure_nccl communicator" in sections["task2 pure_nccl"]     # MPI and NCCL's communicator
    for name in ("kernels", *GPU_STEPS):
        for text in ('"half" is undefined', "ModuleNotFoundError", "NameError", "HOME", "already been initialized"):
            assert text not in sections[name], (name, text)
    assert steps["profile"]["ok"] is None and "nsys" in steps["profile"]["why"]


def test_out_holds_a_few_flat_files_and_not_the_install(kit_run):
    rc, output, out = kit_run
    entries = sorted(p.name for p in out.iterdir())
    assert all((out / name).is_file() for name in entries) and len(entries) <= 8, entries
    assert {"results.json", "summary.txt", "logs.txt", "steps.tar.gz"} <= set(entries)
    results = json.loads((out / "results.json").read_text())
    assert not results["facts"]["chainer"].startswith(str(out)) and results["facts"]["chainer"].endswith("/site/chainer")
    assert sum(p.stat().st_size for p in out.iterdir()) < 8 * 2**20


def test_an_nsys_export_is_summarised_without_the_instructors_commands(tmp_path):
    """The profile summary runs the profiling module itself: `python -m handson_lib.cli` imports every
    command module, the classroom's jupyterhub among them, which the kit does not carry."""
    import sys
    from handson_lib.profiling.read import sample_profile
    proc = subprocess.run([sys.executable, "-m", "handson_lib.tools.gpu_kit", "summarize-profile", "nsys",
                           str(sample_profile("saxpy")), "--out", str(tmp_path / "profile.txt")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "5 kernel launches" in (tmp_path / "profile.txt").read_text()
    assert "handson_lib.cli" not in open(gpu_kit.__file__).read()
