"""A static sweep of the installed Chainer and ChainerMN against today's NumPy and CuPy.

Chainer 7.8.1 is frozen; NumPy 2 and CuPy 14 removed names it reads, and CuPy 14's headers no longer
define what some of its CUDA sources use. The course's patches (runtime/chainer_patches.py) were
found one failure at a time; this sweep reads every module instead:

- `numpy_findings()`: every `numpy.X.Y` / `np.X` that Chainer's code names (an alias of the numpy
  module, `from numpy import X`) and the NumPy in use lacks;
- `cupy_findings()`: likewise for `cupy.X` (`import cupy`, `cuda.cupy.X`) against the CuPy in use;
- `kernel_sources()` and `compile_findings()`: every CUDA source that Chainer and ChainerMN hand to
  `cuda.raw` / `cupy.RawKernel` as a literal, compiled with NVRTC for one architecture (sm_90 by
  default, the H100/H200's) against CuPy's headers, as CuPy would at the first launch. NVRTC needs
  no GPU, so this runs on any machine with CuPy and its NVRTC wheel.

`python -m handson_lib.tools.chainer_sweep [--kernels] [--arch sm_90]` prints every finding and
exits 1 when there is one. Each finding is fixed by a patch in runtime/chainer_patches.py, with its
test in tests/test_chainer_patches.py; tests/test_chainer_sweep.py shows that the sweep finds each
patched line again when its patch is undone.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import sys
import warnings
from pathlib import Path
from typing import NamedTuple


PACKAGES = ("chainer", "chainermn")
#: Ways Chainer's modules reach the cupy module by attribute: `cuda.cupy`, `chainer.cuda.cupy`, ...
CUPY_PREFIXES = (("cuda", "cupy"), ("chainer", "cuda", "cupy"), ("chainer", "backends", "cuda", "cupy"),
                 ("backends", "cuda", "cupy"))


class Finding(NamedTuple):
    path: str       # relative to site-packages, e.g. chainer/functions/array/as_strided.py
    line: int
    name: str       # what is missing (`numpy.sctypes`), or the kernel's name
    why: str = ""   # the error (a compile log's first lines)

    def __str__(self):
        return f"{self.path}:{self.line}: {self.name}" + (f": {self.why}" if self.why else "")


def installed_root():
    """The folder holding the installed `chainer` (found without importing it: the sweep imports
    neither Chainer nor the course's runtime, which imports Chainer)."""
    spec = importlib.util.find_spec("chainer")
    return Path(list(spec.submodule_search_locations)[0]).parent


def modules(root=None, packages=PACKAGES):
    """(path relative to `root`, parsed module) for every .py file of the packages (default: installed)."""
    root = Path(root or installed_root())
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            yield str(path.relative_to(root)), ast.parse(path.read_text(), str(path))


def _dotted(node):
    """`a.b.c` as ('a', 'b', 'c'), or None when the chain does not start at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return (node.id, *reversed(parts))


def _aliases(tree, module):
    """Local names bound to `module` by `import module [as x]` anywhere in the file."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name for a in node.names if a.name == module}
    return names


#: Handlers under which a missing name is caught: code in such a `try` may name what is not there.
CATCHING = {"ImportError", "ModuleNotFoundError", "AttributeError", "Exception", "BaseException"}


def guarded(tree):
    """ids of the nodes inside a `try` body whose handlers catch a missing module or attribute."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                h.type is None or {n.id for n in ast.walk(h.type) if isinstance(n, ast.Name)} & CATCHING
                for h in node.handlers):
            ids |= {id(n) for statement in node.body for n in ast.walk(statement)}
    return ids


def named_attributes(tree, module):
    """{(line, 'module.a.b')}: the longest attribute chains off `module` that the file names, and its
    `from module import x` names."""
    aliases, found, inner = _aliases(tree, module), set(), guarded(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == module and node.level == 0:
            found |= {(node.lineno, f"{module}.{a.name}") for a in node.names if a.name != "*"}
        if not isinstance(node, ast.Attribute) or id(node) in inner:
            continue
        chain = _dotted(node)
        inner |= {id(n) for n in ast.walk(node) if n is not node}
        if chain is None:
            continue
        if chain[0] in aliases and len(chain) > 1:
            found.add((node.lineno, ".".join((module, *chain[1:]))))
        elif module == "cupy":
            for prefix in CUPY_PREFIXES:
                if chain[:len(prefix)] == prefix and len(chain) > len(prefix):
                    found.add((node.lineno, ".".join(("cupy", *chain[len(prefix):]))))
    return found


def resolves(dotted):
    """Whether `numpy.a.b` exists: attribute by attribute, a submodule imported where needed. A name
    that exists only with a DeprecationWarning still exists."""
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                obj = getattr(obj, part)
                continue
            except AttributeError:
                pass
            try:
                obj = importlib.import_module(".".join(parts[:i + 1]))
            except ImportError:
                return False
    return True


def attribute_findings(module, root=None, packages=PACKAGES):
    """Finding per (file, line, name) of `module` (numpy or cupy) that does not resolve here, but
    those in a `try` that catches the error and those ALLOWED says are never reached here."""
    findings, known = [], {}
    for path, tree in modules(root, packages):
        for line, dotted in sorted(named_attributes(tree, module)):
            if dotted not in known:
                known[dotted] = resolves(dotted)
            if not known[dotted] and not unreached(dotted):
                findings.append(Finding(path, line, dotted))
    return findings


def numpy_findings(root=None, packages=PACKAGES):
    return attribute_findings("numpy", root, packages)


def cupy_findings(root=None, packages=PACKAGES):
    return attribute_findings("cupy", root, packages)


#: Names Chainer reaches only where a module exists: prefix -> (that module, why).
ALLOWED = {"cupy.cudnn": ("cupy.cudnn", "cuDNN paths: chainer/backends/cuda.py:123-135 sets cudnn_enabled only "
                          "when `import cupy.cudnn` works (CuPy 14 has no cuDNN), and should_use_cudnn() is "
                          "False otherwise"),
           "cupy.cuda.cudnn": ("cupy.cudnn", "as cupy.cudnn")}


def unreached(dotted):
    """Why `dotted` is never reached with this CuPy, or '' (it is, or may be)."""
    for prefix, (module, why) in ALLOWED.items():
        if (dotted == prefix or dotted.startswith(prefix + ".")) and not resolves(module):
            return why
    return ""


#: The calls that compile CUDA code: (the dotted call's last two names) -> the kernel's kind.
KERNEL_CALLS = {("cuda", "raw"): "raw", ("cupy", "RawKernel"): "raw", ("cuda", "elementwise"): "elementwise",
                ("cupy", "ElementwiseKernel"): "elementwise", ("cuda", "reduce"): "reduction",
                ("cupy", "ReductionKernel"): "reduction"}
#: The kernels the GPU kit's steps launch: MultiprocessParallelUpdater's and pure_nccl's.
KIT_KERNELS = ("_memcpy_gather", "_memcpy_scatter", "cupy_batched_pack_params", "cupy_batched_unpack_params")


class KernelCall(NamedTuple):
    path: str
    line: int
    kind: str       # raw, elementwise, reduction
    args: tuple     # the literal arguments of the call
    kwargs: dict

    @property
    def name(self):
        position = {"raw": 1, "elementwise": 3, "reduction": 6}[self.kind]
        return self.kwargs.get("name") or (self.args[position] if len(self.args) > position else "?")


def kernel_calls(root=None, packages=PACKAGES):
    """(KernelCall list, [(path, line)] of kernels built at run time, whose code is not a literal).
    chainer/backends/cuda.py's own wrappers (cuda.raw, cuda.elementwise, ...) are not kernels."""
    calls, dynamic = [], []
    for path, tree in modules(root, packages):
        for node in ast.walk(tree):
            chain = _dotted(node.func) if isinstance(node, ast.Call) else None
            kind = KERNEL_CALLS.get(tuple(chain[-2:])) if chain else None
            if kind is None or path == "chainer/backends/cuda.py":
                continue
            try:
                args = tuple(ast.literal_eval(a) for a in node.args)
                kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            except ValueError:
                dynamic.append((path, node.lineno))
                continue
            calls.append(KernelCall(path, node.lineno, kind, args, kwargs))
    return calls, dynamic


def kernel_findings(calls, arch="90"):
    """Finding per kernel that NVRTC does not compile for sm_`arch` with CuPy's headers and options."""
    from handson_lib.tools import nvrtc_kernels
    findings = []
    with nvrtc_kernels.compiling_for(arch):
        for call in calls:
            error = nvrtc_kernels.first_error(call)
            if error:
                findings.append(Finding(call.path, call.line, call.name, error))
    return findings


def sweep(root=None, packages=PACKAGES, kernels=False, only=None, arch="90", names=True):
    """{'numpy': [Finding], 'cupy': [...], 'kernels': [...], 'compiled': n, 'dynamic': [...], 'versions': {...}}:
    the sweep of the installed Chainer (or the tree at `root`). `only`: kernel names to compile;
    names=False: the kernels alone."""
    import numpy
    report = {"numpy": numpy_findings(root, packages) if names else [], "versions": {"numpy": numpy.__version__}}
    try:
        import cupy
    except ImportError as error:
        report["cupy_missing"] = str(error)
        return report
    report["versions"]["cupy"] = cupy.__version__
    report["cupy"] = cupy_findings(root, packages) if names else []
    if kernels:
        calls, report["dynamic"] = kernel_calls(root, packages)
        calls = [c for c in calls if only is None or c.name in only]
        report["compiled"] = len(calls)
        report["kernels"] = kernel_findings(calls, arch)
    return report


def findings_of(report):
    return [f for key in ("numpy", "cupy", "kernels") for f in report.get(key, [])]


def report_text(report):
    lines = [f"numpy: {len(report['numpy'])} name(s) missing from NumPy {report['versions']['numpy']}"]
    if "cupy_missing" in report:
        lines.append(f"cupy: not checked (CuPy does not import: {report['cupy_missing']})")
    else:
        lines.append(f"cupy: {len(report['cupy'])} name(s) missing from CuPy {report['versions']['cupy']}")
    if "compiled" in report:
        lines.append(f"kernels: {report['compiled']} compiled with NVRTC, {len(report['kernels'])} failed; "
                     f"{len(report['dynamic'])} built at run time (not compiled here): "
                     + ", ".join(f"{p}:{n}" for p, n in report["dynamic"]))
    return "\n".join(lines + [f"  {f}" for f in findings_of(report)])


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m handson_lib.tools.chainer_sweep",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", action="store_true", help="also compile the CUDA sources with NVRTC")
    parser.add_argument("--kit-kernels", action="store_true",
                        help="compile only the kernels the GPU kit's steps launch (implies --kernels)")
    parser.add_argument("--no-names", action="store_true", help="compile the kernels only (no numpy/cupy names)")
    parser.add_argument("--arch", default="90", help="compute capability to compile for (default 90: H100, H200)")
    parser.add_argument("--root", help="a tree holding chainer/ and chainermn/ (default: the installed ones)")
    parser.add_argument("--package", action="append", choices=PACKAGES, help="only this package (repeatable)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = sweep(args.root, tuple(args.package or PACKAGES), kernels=args.kernels or args.kit_kernels,
                   only=KIT_KERNELS if args.kit_kernels else None, arch=args.arch, names=not args.no_names)
    if args.json:
        print(json.dumps({**report, **{k: [f._asdict() for f in report.get(k, [])]
                                        for k in ("numpy", "cupy", "kernels")}}))
    else:
        print(report_text(report))
    return 1 if findings_of(report) else 0


if __name__ == "__main__":
    sys.exit(main())
