"""The course's patches of Chainer 7.8.1 (handson_lib/runtime/chainer_patches.py): each one is what
makes its case work.

All cases pass in one fresh interpreter with the installed (patched) Chainer; each fails in another
with its one patch undone (an import hook serves 7.8.1's text of that file; the other patches stay).
A case first takes away what today's stack lacks (np.sctypes, numpy.distutils, pkg_resources,
numpy.float, a copying `array(copy=False)`); on Python 3.12 + NumPy 2 most of it is gone already.
"""

import subprocess
import sys
import textwrap

import pytest

from handson_lib.runtime import chainer_patches

#: The hook that serves one module's source from a string (7.8.1's text) instead of its file.
UNPATCH_HOOK = r"""
import importlib.abc, importlib.util, sys
class _Unpatched(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, name, path, source):
        self.name, self.path, self.source = name, path, source
    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.name:
            return importlib.util.spec_from_loader(fullname, self, origin=self.path)
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        module.__file__ = self.path
        exec(compile(self.source, self.path, "exec"), module.__dict__)
sys.meta_path.insert(0, _Unpatched(MODULE, PATH, SOURCE))
"""

#: patch name -> (what today's stack lacks, taken away; what then uses Chainer; the error unpatched)
CASES = {
    "np.sctypes": (
        "import numpy; numpy.__dict__.pop('sctypes', None)\n"
        "numpy.__all__ = [n for n in numpy.__all__ if n != 'sctypes']",
        "import chainer.functions",
        "sctypes"),
    "np.sctypes backward": (
        "import numpy; numpy.__dict__.pop('sctypes', None)\n"
        "numpy.__all__ = [n for n in numpy.__all__ if n != 'sctypes']",
        # the backward of F.as_strided (Chainer's own test_as_strided.py: 24 cases)
        "import numpy, chainer, chainer.functions as F\n"
        "x = chainer.Variable(numpy.arange(6, dtype=numpy.float32))\n"
        "y = F.as_strided(x, (3,), (2,))  # strides in elements\n"
        "y.grad = numpy.ones(3, numpy.float32)\n"
        "y.backward()\n"
        "assert x.grad.tolist() == [1, 0, 1, 0, 1, 0], x.grad",
        "sctypes"),
    "numpy.distutils": (
        "sys.modules['numpy.distutils'] = None",
        "import chainer",
        "numpy.distutils"),
    "pkg_resources": (
        "sys.modules['pkg_resources'] = None",
        "import chainer",
        "pkg_resources"),
    "numpy.float": (
        # NumPy 1.23 still answers numpy.float (with a warning) through its module __getattr__
        "import numpy\n"
        "_getattr = getattr(numpy, '__getattr__', None)\n"
        "def _no_float(name):\n"
        "    if name == 'float':\n"
        "        raise AttributeError(\"module 'numpy' has no attribute 'float'\")\n"
        "    return _getattr(name)\n"
        "numpy.__getattr__ = _no_float",
        "import numpy, chainer.functions as F\n"
        "x = numpy.arange(2 * 3 * 4 * 4, dtype=numpy.float32).reshape(2, 3, 4, 4)\n"
        "assert F.resize_images(x, (6, 6)).shape == (2, 3, 6, 6)\n"
        "assert F.resize_images(x, (6, 6), mode='nearest').shape == (2, 3, 6, 6)",
        "'float'"),
    "copy=False": (
        # NumPy 2 (and CuPy 14): array(copy=False) raises when it would have to copy
        "import numpy\n"
        "_array = numpy.array\n"
        "def _never_copies(obj, *a, copy=True, dtype=None, **k):\n"
        "    if copy is False and dtype is not None and numpy.dtype(dtype) != obj.dtype:\n"
        "        raise ValueError('Unable to avoid copy while creating an array as requested.')\n"
        "    return _array(obj, *a, copy=copy, dtype=dtype, **k)\n"
        "numpy.array = _never_copies",
        # the fp16 allreduce's unpacking: float32 gradients received as float16
        "import numpy, types\n"
        "from chainermn.communicators import _memory_utility as mu\n"
        "param = types.SimpleNamespace(data=numpy.zeros(4, numpy.float32), grad=numpy.zeros(4, numpy.float32),\n"
        "                              xp=numpy)\n"
        "class Buffer:\n"
        "    def to_device(self, v, size, offset, stream):\n"
        "        v[...] = numpy.arange(v.size, dtype=v.dtype) + 0.5\n"
        "mu.unpack_params([param], 'grad', Buffer(), numpy.float16, zero_fill=False)\n"
        "assert param.grad.tolist() == [0.5, 1.5, 2.5, 3.5], param.grad",
        "Unable to avoid copy"),
}


def run_cases(names, unpatched=None):
    """(returncode, output) of the cases `names` in one fresh interpreter, with the patch `unpatched`
    (a name) undone."""
    code = "import sys\n" + "\n".join(CASES[name][0] for name in names) + "\n"
    if unpatched:
        patch = next(p for p in chainer_patches.PATCHES if p.name == unpatched)
        path = chainer_patches.installed_root() / patch.path
        source = chainer_patches.unpatched_text(patch, path.read_text())
        assert source != path.read_text(), f"the installed {patch.path} does not carry patch {unpatched!r}"
        module = patch.path[:-len(".py")].replace("/", ".")
        code += (f"MODULE, PATH, SOURCE = {module!r}, {str(path)!r}, {source!r}\n" + UNPATCH_HOOK)
    code += "\n".join(CASES[name][1] for name in names) + "\nprint('CASES PASSED')\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout + proc.stderr


#: Patches of CUDA sources: NVRTC compiles them (with CuPy 14), no CPU interpreter runs them. Their
#: cases are in tests/test_chainer_sweep.py: patch name -> the kernel that fails without it.
KERNEL_CASES = {"half": "cupy_batched_pack_params", "float16": "_memcpy_gather"}


def test_every_patch_has_a_case():
    assert sorted([*CASES, *KERNEL_CASES]) == sorted(p.name for p in chainer_patches.PATCHES)
    assert not set(CASES) & set(KERNEL_CASES)


def test_installed_chainer_carries_every_patch():
    state = chainer_patches.installed_state()
    assert state == {p.name: "active" for p in chainer_patches.PATCHES}, (
        f"{state}: `make setup` installs Chainer from build/chainer-wheel, built with every patch")


def test_every_case_passes_with_the_patches():
    """Today's stack all at once (what Python 3.12 + NumPy 2 + setuptools >= 82 lack), patched."""
    rc, out = run_cases(sorted(CASES))
    assert rc == 0 and "CASES PASSED" in out, f"patched Chainer fails:\n{out[-3000:]}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_fails_without_its_patch(name):
    rc, out = run_cases([name], unpatched=name)
    expected = CASES[name][2]
    assert rc != 0 and "CASES PASSED" not in out, f"case {name!r} passes without its patch:\n{out[-3000:]}"
    last = out.strip().splitlines()[-1]
    assert expected in last, f"case {name!r} unpatched failed, but not with {expected!r}:\n{out[-3000:]}"


def test_patches_apply_to_the_sdist_text_and_undo_exactly(tmp_path):
    """apply() then revert() gives 7.8.1's text back, and apply() refuses a file it does not know."""
    root = chainer_patches.installed_root()
    for patch in chainer_patches.PATCHES:
        installed = (root / patch.path).read_text()
        original = chainer_patches.unpatched_text(patch, installed)
        assert chainer_patches.patched_text(patch, original) == installed
    other = next(p for p in chainer_patches.PATCHES if p.name == "np.sctypes")
    both = [p for p in chainer_patches.PATCHES if p.path == other.path]
    assert len(both) == 2, "two patches of as_strided.py: each undone alone gives 7.8.1's text of its lines"
    with pytest.raises(RuntimeError, match="expected 1 occurrence.*is this Chainer 7.8.1"):
        chainer_patches.patched_text(other, "index_dtype = {}\n")


def test_list_names_each_patch_and_its_line():
    proc = subprocess.run([sys.executable, chainer_patches.__file__, "list"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    for patch in chainer_patches.PATCHES:
        assert f"active    {patch.where}  {patch.name}: " in proc.stdout, proc.stdout
    assert "chainer/functions/array/as_strided.py:10" in proc.stdout
    assert "chainermn/communicators/_memory_utility.py:211" in proc.stdout
