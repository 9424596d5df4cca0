"""handson_lib.runtime.devices: GPU count and NCCL, each with the reason when the answer is no."""

import subprocess
import sys
import types

import pytest

from handson_lib.runtime import devices


@pytest.fixture(autouse=True)
def no_cupy_left_behind():
    """A fake CuPy a test imports from its own folder (gpu_count_apart imports CuPy here before it
    counts in a child) leaves with the test: a later test would find CuPy importable."""
    before = {name for name in sys.modules if name.split(".")[0] == "cupy"}
    yield
    for name in [name for name in sys.modules if name.split(".")[0] == "cupy" and name not in before]:
        del sys.modules[name]


def fake_cupy(monkeypatch, get_device_count, nccl=None):
    """A CuPy whose runtime answers `get_device_count()`; `nccl`: the cupy.cuda.nccl module."""
    cupy = types.ModuleType("cupy")
    cuda = types.ModuleType("cupy.cuda")
    runtime = types.ModuleType("cupy.cuda.runtime")
    runtime.getDeviceCount = get_device_count
    cupy.cuda, cuda.runtime = cuda, runtime
    modules = {"cupy": cupy, "cupy.cuda": cuda, "cupy.cuda.runtime": runtime}
    if nccl is not None:
        cuda.nccl = modules["cupy.cuda.nccl"] = nccl
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)


def nccl_module(**attrs):
    module = types.ModuleType("cupy.cuda.nccl")
    vars(module).update(attrs)
    return module


def test_without_cupy_the_reason_names_the_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)   # `import cupy` raises ImportError
    assert devices.import_cupy()[0] is None
    gpus = devices.gpu_count()
    assert gpus.count == 0 and gpus.reason.startswith("CuPy is not available (ModuleNotFoundError")
    usable, reason = devices.nccl_status()
    assert not usable and reason.startswith("CuPy is not available")


def test_failing_cuda_is_zero_gpus_with_cudas_message(monkeypatch):
    def no_driver():
        raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")
    fake_cupy(monkeypatch, no_driver, nccl_module(available=True, get_version=lambda: 21803))
    gpus = devices.gpu_count()
    assert gpus == (0, "CUDA fails (RuntimeError: cudaErrorInsufficientDriver: CUDA driver version "
                       "is insufficient)")
    assert devices.nccl_status() == (False, gpus.reason)


def test_nccl_module_without_its_library_is_not_trusted(monkeypatch):
    def get_unique_id():
        raise AttributeError("module 'cupy_backends.cuda.libs.nccl' has no attribute 'get_unique_id'")
    fake_cupy(monkeypatch, lambda: 2, nccl_module(available=False, get_unique_id=get_unique_id))
    assert devices.gpu_count() == (2, "")
    nccl = devices.nccl_library()
    assert not nccl.available and nccl.reason == devices.NCCL_NOT_LOADED
    assert devices.nccl_status() == (False, devices.NCCL_NOT_LOADED)


def test_gpus_and_nccl_make_the_updater_usable(monkeypatch):
    fake_cupy(monkeypatch, lambda: 2, nccl_module(available=True, get_version=lambda: 21803))
    assert devices.nccl_library() == (True, "", 21803, "")
    assert devices.nccl_status() == (True, "2 GPU(s), NCCL available")


def test_no_device_is_said_so(monkeypatch):
    fake_cupy(monkeypatch, lambda: 0, nccl_module(available=True, get_version=lambda: 21803))
    assert devices.gpu_count() == (0, "no CUDA device (getDeviceCount() == 0)")
    assert devices.nccl_status() == (False, "no CUDA device (getDeviceCount() == 0)")


@pytest.mark.parametrize("message, expected", [
    ("", "ValueError"),
    ("first line\nsecond line", "ValueError: first line"),
    ("x" * 300, "ValueError: " + "x" * 145 + "..."),
])
def test_describe_error(message, expected):
    assert devices.describe_error(ValueError(message)) == expected


def test_importing_devices_does_not_import_cupy():
    code = "import sys, handson_lib.runtime.devices; print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_gpu_count_apart_counts_in_a_child_process(monkeypatch, tmp_path):
    """MultiprocessParallelUpdater's choice counts GPUs in a child: cudaGetDeviceCount initialises
    CUDA, after which Chainer's updater refuses to fork its workers."""
    package = tmp_path / "cupy"
    (package / "cuda").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "cuda" / "__init__.py").write_text("")
    (package / "cuda" / "runtime.py").write_text(
        f"import os\ndef getDeviceCount():\n    open({str(tmp_path / 'counted')!r}, 'w').write(str(os.getpid()))\n"
        "    return 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    for name in ("cupy", "cupy.cuda", "cupy.cuda.runtime"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert devices.gpu_count_apart() == (2, "")
    counted_by = int((tmp_path / "counted").read_text())
    assert counted_by != __import__("os").getpid() and "cupy.cuda.runtime" not in sys.modules


def test_gpu_count_apart_gives_the_childs_cuda_error(monkeypatch, tmp_path):
    package = tmp_path / "cupy"
    (package / "cuda").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "cuda" / "__init__.py").write_text("")
    (package / "cuda" / "runtime.py").write_text(
        "def getDeviceCount():\n    raise RuntimeError('cudaErrorNoDevice: no CUDA-capable device is detected')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    assert devices.gpu_count_apart() == (0, "CUDA fails (RuntimeError: cudaErrorNoDevice: no CUDA-capable "
                                            "device is detected)")
