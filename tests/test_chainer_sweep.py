"""The static sweep of Chainer and ChainerMN (handson_lib/tools/chainer_sweep.py): the installed,
patched Chainer names nothing this NumPy lacks (on each stack: `make test-all` runs this file on the
second one too); each patch's line is found again with the patch undone; with CuPy 14 (the GPU
image's venv, `make gpu-image`) every `cupy` name resolves and the kernels compile with NVRTC,
the kernel patches' kernels failing without them."""

import json
import os
import subprocess
import zipfile

import numpy
import pytest

from conftest import ROOT
from handson_lib.runtime import chainer_patches
from handson_lib.tools import chainer_sweep
from test_chainer_patches import KERNEL_CASES

GPU_IMAGE = ROOT / "build" / "gpu-image" / "bin" / "python"
NUMPY_2 = int(numpy.__version__.split(".")[0]) >= 2
NUMPY_1_24 = tuple(int(x) for x in numpy.__version__.split(".")[:2]) >= (1, 24)


def unpatched_tree(tmp_path, names):
    """A tree with 7.8.1's text of the files of the patches `names` (the others' hunks stay)."""
    root = chainer_patches.installed_root()
    for patch in chainer_patches.PATCHES:
        if patch.name in names:
            target = tmp_path / patch.path
            target.parent.mkdir(parents=True, exist_ok=True)
            text = target.read_text() if target.exists() else (root / patch.path).read_text()
            target.write_text(chainer_patches.unpatched_text(patch, text))
    return tmp_path


def test_the_installed_chainer_names_nothing_this_numpy_lacks():
    assert chainer_sweep.numpy_findings() == []


def test_each_numpy_patch_undone_is_found_where_this_numpy_lacks_the_name(tmp_path):
    root = unpatched_tree(tmp_path, {"np.sctypes", "np.sctypes backward", "numpy.float"})
    found = {(f.path, f.line, f.name) for f in chainer_sweep.numpy_findings(root, ("chainer",))}
    expected = set()
    if NUMPY_2:
        expected |= {("chainer/functions/array/as_strided.py", 10, "numpy.sctypes"),
                     ("chainer/functions/array/as_strided.py", 252, "numpy.sctypes")}
    if NUMPY_1_24:
        expected |= {("chainer/functions/array/resize_images.py", line, "numpy.float")
                     for line in (179, 180, 184, 186, 194, 196)}
    assert found == expected


def test_a_name_in_a_try_that_catches_its_absence_is_not_a_finding(tmp_path):
    (tmp_path / "chainer").mkdir()
    (tmp_path / "chainer" / "m.py").write_text(
        "import numpy as np\n"
        "try:\n    a = np.not_in_numpy\nexcept AttributeError:\n    a = None\n"
        "try:\n    b = np.not_in_numpy_either\nexcept KeyError:\n    b = None\n"
        "c = np.float32\n")
    found = chainer_sweep.numpy_findings(tmp_path, ("chainer",))
    assert [(f.line, f.name) for f in found] == [(7, "numpy.not_in_numpy_either")]


def test_kernel_calls_are_read_from_the_source_with_their_names(tmp_path):
    (tmp_path / "chainer").mkdir()
    (tmp_path / "chainer" / "k.py").write_text(
        "from chainer.backends import cuda\n"
        "k = cuda.elementwise('T x', 'T y', 'y = x', 'copy_kernel')\n"
        "r = cuda.reduce('T x', 'T y', 'x', 'a + b', 'y = a', '0', 'sum_kernel')\n"
        "w = cuda.raw(SOURCE, 'built_kernel')\n")
    calls, dynamic = chainer_sweep.kernel_calls(tmp_path, ("chainer",))
    assert [(c.kind, c.name, c.line) for c in calls] == [("elementwise", "copy_kernel", 2),
                                                          ("reduction", "sum_kernel", 3)]
    assert dynamic == [("chainer/k.py", 4)]


# ----------------------------------------------------------------------------- with CuPy 14 (slow)

def sweep_with_cupy_14(root, *args):
    """The sweep's JSON report, run by the GPU image's Python (CuPy 14, its NVRTC, no GPU)."""
    if not GPU_IMAGE.exists():
        pytest.skip("no GPU image venv at build/gpu-image: `make gpu-image` builds it")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([str(GPU_IMAGE), "-m", "handson_lib.tools.chainer_sweep", "--root", str(root), "--json",
                           *args], capture_output=True, text=True, timeout=600, env=env, cwd=root)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def patched_wheel_tree(tmp_path_factory):
    """The patched wheel that `make setup` built, unpacked (the GPU image has no Chainer)."""
    tree = tmp_path_factory.mktemp("wheel")
    with zipfile.ZipFile(chainer_patches.wheel_path(ROOT / "build" / "chainer-wheel")) as wheel:
        wheel.extractall(tree)
    return tree


@pytest.mark.slow
def test_with_cupy_14_every_name_resolves_and_the_kits_kernels_compile(patched_wheel_tree):
    report = sweep_with_cupy_14(patched_wheel_tree, "--kit-kernels")
    assert report["versions"]["cupy"] == "14.2.0" and report["versions"]["numpy"] == "2.5.2"
    assert (report["numpy"], report["cupy"], report["kernels"]) == ([], [], [])
    assert report["compiled"] == len(chainer_sweep.KIT_KERNELS)


@pytest.mark.slow
def test_each_kernel_patch_undone_fails_to_compile_with_cupy_14(tmp_path):
    root = unpatched_tree(tmp_path, set(KERNEL_CASES))
    report = sweep_with_cupy_14(root, "--kit-kernels")
    failed = {f["name"]: f["why"] for f in report["kernels"]}
    assert set(failed) == set(chainer_sweep.KIT_KERNELS), report
    assert 'identifier "half" is undefined' in failed[KERNEL_CASES["half"]]
    assert "error" in failed[KERNEL_CASES["float16"]]
