"""The course's one compatibility layer for Chainer 7.8.1 (frozen upstream) on today's stack.

Chainer 7.8.1 does not import on NumPy 2 or Python 3.12, and parts of it break on NumPy >= 1.24,
setuptools >= 82 and CuPy 14. Each `Patch` below names the line of Chainer's sdist it is for and
replaces that text. `make setup` (and `make gpu-kit`) build Chainer's wheel from its sdist with every
patch applied (`python handson_lib/runtime/chainer_patches.py build-wheel --out DIR`), so that every
process that imports Chainer (a student's script whose first line is `import chainer`, the MPI ranks,
notebooks, the grader, the sandbox) gets the patched code: nothing runs before Chainer, and nothing
is edited by hand inside site-packages. `handson doctor` reads the installed files (`installed_state`)
and says which patches are active and whether this stack needs them; the course's tests show that
each one is what makes its case work.

This file imports only the standard library: `make setup` runs it before the course is installed.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

CHAINER_VERSION = "7.8.1"
SDIST_NAME = f"chainer-{CHAINER_VERSION}.tar.gz"


@dataclasses.dataclass(frozen=True)
class Hunk:
    line: int           # line of the file (in 7.8.1) where the replaced text starts
    original: str       # the text of 7.8.1, exact
    replacement: str    # what the course installs instead
    count: int = 1      # how many times `original` occurs (all are replaced)


@dataclasses.dataclass(frozen=True)
class Patch:
    name: str           # short name, as `handson doctor` lists it
    path: str           # file inside Chainer's sdist (and its installed package)
    why: str            # what breaks without it, and on which stack
    hunks: tuple        # of Hunk

    @property
    def where(self) -> str:
        """`file:line` of Chainer 7.8.1 that the patch is for (its first hunk)."""
        return f"{self.path}:{self.hunks[0].line}"


_REQUIRE = """\
            try:
                pkg_resources.require(requirement)
                found = True
            except pkg_resources.DistributionNotFound:
                continue
            except pkg_resources.VersionConflict:
"""

# importlib.metadata (and `packaging`, when present, for the specifier) instead of pkg_resources
_REQUIRE_PATCHED = """\
            try:  # handson patch: importlib.metadata instead of pkg_resources
                _installed = importlib.metadata.version(pkg)
                try:
                    from packaging.specifiers import SpecifierSet
                    _fits = requirement == pkg or SpecifierSet(spec).contains(_installed)
                except ImportError:
                    _fits = True
                found = True
                if not _fits:
                    raise ValueError(pkg)
            except importlib.metadata.PackageNotFoundError:
                continue
            except ValueError:
"""

_OSX_BACKEND = """\
    blas_opt_info = numpy.distutils.system_info.get_info('blas_opt')
"""

_OSX_BACKEND_PATCHED = """\
    try:  # handson patch: numpy.distutils is gone from Python 3.12 and NumPy 2
        import numpy.distutils.system_info
    except ImportError:
        return
    blas_opt_info = numpy.distutils.system_info.get_info('blas_opt')
"""

# CuPy 14's float16 header where there is one (CuPy 13 defines float16 in cupy/carray.cuh and has no
# float16.cuh): a keyword argument added to cuda.elementwise(...).
_FLOAT16_PREAMBLE = ("        preamble='#if __has_include(<cupy/float16.cuh>)\\n#include <cupy/float16.cuh>\\n#endif\\n',"
                     "  # handson patch: CuPy 14\n")

PATCHES = (
    Patch("np.sctypes", "chainer/functions/array/as_strided.py",
          "`import chainer` fails on NumPy 2 (np.sctypes removed)",
          (Hunk(10, "index_dtype = {t().itemsize: t for t in np.sctypes['int']}",
                "index_dtype = {t().itemsize: t for t in (np.int8, np.int16, np.int32, np.int64)}"
                "  # handson patch: np.sctypes is gone from NumPy 2"),)),
    Patch("numpy.distutils", "chainer/_environment_check.py",
          "`import chainer` fails on Python 3.12 and NumPy 2 (numpy.distutils removed; Chainer used it "
          "only for a macOS check)",
          (Hunk(6, "import numpy.distutils.system_info\n",
                "# handson patch: numpy.distutils, imported where it is used (macOS only)\n"),
           Hunk(29, _OSX_BACKEND, _OSX_BACKEND_PATCHED))),
    Patch("pkg_resources", "chainer/_environment_check.py",
          "`import chainer` fails without pkg_resources (gone from setuptools >= 82)",
          (Hunk(7, "import pkg_resources\n",
                "import importlib.metadata  # handson patch: pkg_resources is gone from setuptools >= 82\n"),
           Hunk(56, _REQUIRE, _REQUIRE_PATCHED),
           Hunk(74, "version=pkg_resources.get_distribution(pkg).version,", "version=_installed,"))),
    Patch("numpy.float", "chainer/functions/array/resize_images.py",
          "F.resize_images raises AttributeError on NumPy >= 1.24 (numpy.float removed)",
          (Hunk(179, "dtype=numpy.float)", "dtype=numpy.float64)", count=6),)),
    Patch("np.sctypes backward", "chainer/functions/array/as_strided.py",
          "F.as_strided's backward raises AttributeError on NumPy 2 (np.sctypes removed; found by "
          "Chainer's own tests and the sweep, tools/chainer_sweep.py)",
          (Hunk(252, "if gy.dtype not in np.sctypes['float']:",
                "if gy.dtype.kind != 'f':  # handson patch: np.sctypes is gone from NumPy 2"),)),
    Patch("half", "chainermn/communicators/_memory_utility.py",
          "ChainerMN's batched pack/unpack kernels (pure_nccl's allreduce, batched_copy=True) do not "
          "compile with CuPy 14, whose cupy/carray.cuh no longer defines `half`",
          (Hunk(291, "#include <cupy/carray.cuh>\n#define NCCL_FLOAT16  6\n",
                "#include <cupy/carray.cuh>\n#include <cuda_fp16.h>  // handson patch: CuPy 14 defines half "
                "only there\n#define NCCL_FLOAT16  6\n", count=2),)),
    Patch("float16", "chainer/training/updaters/multiprocess_parallel_updater.py",
          "MultiprocessParallelUpdater's gather/scatter kernels do not compile with CuPy 14, which "
          "defines float16 only in cupy/float16.cuh (included only for kernels with a float16 argument)",
          (Hunk(330, "        '_memcpy_gather',\n", "        '_memcpy_gather',\n" + _FLOAT16_PREAMBLE),
           Hunk(422, "        '_memcpy_scatter',\n", "        '_memcpy_scatter',\n" + _FLOAT16_PREAMBLE))),
    Patch("copy=False", "chainermn/communicators/_memory_utility.py",
          "the fp16 allreduce (allreduce_grad_dtype) raises on NumPy 2 and CuPy 14, whose "
          "array(copy=False) refuses to copy",
          (Hunk(211, "v = xp.array(v, copy=False, dtype=transfer_dtype)",
                "v = v.astype(transfer_dtype, copy=False)  # handson patch: NumPy 2 / CuPy 14 copy=False"),)),
)


def digest() -> str:
    """A short hash of every patch: a wheel built from other patches is rebuilt."""
    h = hashlib.sha256()
    for p in PATCHES:
        h.update(repr(dataclasses.astuple(p)).encode())
    return h.hexdigest()[:12]


def patched_text(patch, text) -> str:
    """`text` (the file of 7.8.1) with `patch` applied; raises when 7.8.1's text is not found."""
    for h in patch.hunks:
        found = text.count(h.original)
        if found != h.count:
            raise RuntimeError(f"patch {patch.name!r}: expected {h.count} occurrence(s) of {h.original!r} "
                               f"in {patch.path}, found {found} (is this Chainer {CHAINER_VERSION}?)")
        text = text.replace(h.original, h.replacement)
    return text


def unpatched_text(patch, text) -> str:
    """`text` (an installed file) with `patch` undone: 7.8.1's text back."""
    for h in patch.hunks:
        text = text.replace(h.replacement, h.original)
    return text


def apply(root) -> None:
    """Apply every patch to the Chainer source tree at `root` (an extracted sdist)."""
    _rewrite(root, patched_text)


def revert(root) -> None:
    """Undo every patch in the tree at `root`."""
    _rewrite(root, unpatched_text)


def _rewrite(root, change):
    texts = {}
    for p in PATCHES:
        texts[p.path] = change(p, texts.get(p.path) or (Path(root) / p.path).read_text())
    for path, text in texts.items():
        (Path(root) / path).write_text(text)


def installed_root():
    """The folder holding the installed `chainer` package (found without importing it), or None."""
    spec = importlib.util.find_spec("chainer")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]).parent


def installed_state(root=None) -> dict:
    """name -> 'active' | 'absent' (7.8.1's text is there) | 'unknown' (neither text found)."""
    root = installed_root() if root is None else Path(root)
    state = {}
    for p in PATCHES:
        try:
            text = (root / p.path).read_text()
        except (OSError, TypeError):
            state[p.name] = "unknown"
            continue
        state[p.name] = ("active" if all(h.replacement in text for h in p.hunks)
                         else "absent" if all(h.original in text for h in p.hunks) else "unknown")
    return state


def needed_here() -> dict:
    """name -> why this stack needs the patch, or '' when 7.8.1's text would work here."""
    import numpy
    major_minor = tuple(int(x) for x in numpy.__version__.split(".")[:2])
    no_distutils = sys.version_info >= (3, 12) or major_minor >= (2, 0)
    no_pkg_resources = importlib.util.find_spec("pkg_resources") is None
    reasons = {
        "np.sctypes": "NumPy 2" if major_minor >= (2, 0) else "",
        "numpy.distutils": "Python 3.12+ / NumPy 2" if no_distutils else "",
        "pkg_resources": "setuptools >= 82" if no_pkg_resources else "",
        "numpy.float": "NumPy >= 1.24" if major_minor >= (1, 24) else "",
        "copy=False": "NumPy 2" if major_minor >= (2, 0) else "",
        "np.sctypes backward": "NumPy 2" if major_minor >= (2, 0) else "",
        "half": "CuPy 14" if _cupy_major() >= 14 else "",
        "float16": "CuPy 14" if _cupy_major() >= 14 else "",
    }
    return {p.name: reasons.get(p.name, "") for p in PATCHES}


def _cupy_major() -> int:
    """CuPy's major version from its metadata (importing CuPy is not needed), 0 without CuPy."""
    import importlib.metadata
    for name in ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy"):
        try:
            return int(importlib.metadata.version(name).split(".")[0])
        except importlib.metadata.PackageNotFoundError:
            continue
    return 0


# --------------------------------------------------------------------------- the wheel

def wheel_path(out) -> Path:
    return Path(out) / f"chainer-{CHAINER_VERSION}-py3-none-any.whl"


def build_wheel(out, python=sys.executable, quiet=True) -> Path:
    """Chainer's wheel with every patch applied, in `out` (reused while the patches are the same).

    The sdist is downloaded once into `out` (pip download); `python` must have setuptools < 70 and
    wheel (Chainer's setup.py imports pkg_resources), as `make setup` installs first."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    wheel, stamp = wheel_path(out), out / "patches.sha"
    if wheel.exists() and stamp.exists() and stamp.read_text().strip() == digest():
        return wheel
    q = ["-q"] if quiet else []
    sdist = out / SDIST_NAME
    if not sdist.exists():
        subprocess.run([python, "-m", "pip", "download", *q, "--no-deps", "--no-binary", ":all:",
                        "--no-build-isolation", f"chainer=={CHAINER_VERSION}", "-d", str(out)], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
            tar.extractall(tmp, members=members)
        src = Path(tmp) / f"chainer-{CHAINER_VERSION}"
        apply(src)
        wheel.unlink(missing_ok=True)
        built = Path(tmp) / "wheel"
        env = dict(os.environ, CHAINER_BUILD_CHAINERX="0")
        subprocess.run([python, "-m", "pip", "wheel", *q, "--no-deps", "--no-build-isolation",
                        "-w", str(built), str(src)], check=True, env=env)
        made = list(built.glob("chainer-*.whl"))
        if len(made) != 1 or made[0].name != wheel.name:
            raise RuntimeError(f"expected {wheel.name} from Chainer's setup.py, got {[m.name for m in made]}")
        shutil.move(str(made[0]), wheel)
    stamp.write_text(digest() + "\n")
    return wheel


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python handson_lib/runtime/chainer_patches.py",
                                     description="Chainer 7.8.1 patched for today's stack")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build-wheel", help="build the patched wheel (reused while the patches are the same)")
    b.add_argument("--out", required=True, help="folder of the wheel and the sdist it is built from")
    sub.add_parser("list", help="the patches and their state in the installed Chainer")
    args = parser.parse_args(argv)
    if args.command == "build-wheel":
        print(build_wheel(args.out))
        return 0
    state = installed_state()
    for p in PATCHES:
        print(f"{state[p.name]:8}  {p.where}  {p.name}: {p.why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
