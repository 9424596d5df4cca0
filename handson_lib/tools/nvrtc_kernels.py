"""Compile Chainer's CUDA kernels with NVRTC as CuPy would at their first launch, without a GPU.

CuPy compiles a kernel when it is first launched, for the device at hand. Here the source is made
the way CuPy makes it (`cupy._core._kernel` / `_reduction` generate the code of an ElementwiseKernel
or ReductionKernel from its parameters and the arguments' dtypes; a RawKernel is its own source),
with CuPy's headers and compiler options, for a compute capability given instead of asked of a
device (`compiling_for`). An ElementwiseKernel's generic types (`T`, `S`, ...) are bound to a few
plausible dtypes in turn (CANDIDATES): a kernel passes when one binding compiles, so an error that
every binding gives (a header that lacks a type) is what is reported.

Used by tools/chainer_sweep.py; it reaches into CuPy's private modules (CuPy 13 and 14), so a CuPy
that changes them makes `first_error` say so rather than pass.
"""

from __future__ import annotations

import contextlib
import itertools
import re

import numpy

_F32, _I32, _U64 = numpy.dtype("float32"), numpy.dtype("int32"), numpy.dtype("uint64")
#: Bindings of a kernel's generic types, in turn: n -> dtypes of its first, second, ... type name.
CANDIDATES = (lambda n: [_F32] * n, lambda n: [_F32] + [_I32] * (n - 1), lambda n: [_I32] * n,
              lambda n: [_I32] + [_F32] * (n - 1), lambda n: [_F32, _F32] + [_I32] * (n - 2),
              lambda n: [_F32, _I32] + [_F32] * (n - 2), lambda n: [_U64] + [_I32] * (n - 1))
#: ndim of `raw` arguments, in turn (an index array `int ind[] = {i, t}` needs two dimensions).
RAW_NDIMS = (1, 2, 3)
#: CuPy's _ArgInfo kinds (cupy/_core/_kernel.pyx).
_NDARRAY, _INDEXER, _SCALAR = 1, 2, 3


@contextlib.contextmanager
def compiling_for(arch):
    """NVRTC told the architecture (CuPy asks the current device for it, and there may be none)."""
    from cupy.cuda import compiler
    asked = compiler._get_arch_for_options_for_nvrtc
    compiler._get_arch_for_options_for_nvrtc = lambda _=None: (f"-arch=sm_{arch}", "cubin")
    try:
        yield
    finally:
        compiler._get_arch_for_options_for_nvrtc = asked


def _compile(code, options=()):
    from cupy._core import core
    from cupy.cuda import compiler
    headers = "".join(f"#include <{h}>\n" for h in core._cupy_header_list)
    compiler.compile_using_nvrtc(headers + code, options=core.assemble_cupy_compiler_options(tuple(options)),
                                 arch="90")


def first_error(call):
    """'' when `call` (a chainer_sweep.KernelCall) compiles for one candidate binding, else the
    first error line NVRTC gave (or why the source could not be made)."""
    from cupy.cuda import compiler
    errors, candidates = [], _sources(call)
    while True:
        try:
            code, options = next(candidates)
        except StopIteration:
            break
        except Exception as error:  # noqa: BLE001 - CuPy's private code generation changed
            errors.append(f"source not made: {type(error).__name__}: {error}")
            break
        try:
            _compile(code, options) if call.kind != "raw" else compiler.compile_using_nvrtc(
                code, options=_raw_options(), arch="90")
            return ""
        except compiler.CompileException as error:
            errors.append(next((line.strip() for line in str(error).splitlines() if "error" in line),
                               str(error)[:200]))
        except Exception as error:  # noqa: BLE001 - NVRTC or its headers missing
            errors.append(f"not compiled: {type(error).__name__}: {error}")
            break
    return errors[0] if errors else "no source made"


def _raw_options():
    from cupy._core import core
    return core.assemble_cupy_compiler_options(())


def _sources(call):
    """(code, options) of the call's kernel for each candidate binding (one for a RawKernel)."""
    import cupy
    if call.kind == "raw":
        yield call.args[0], ()
        return
    kernel_class = cupy.ElementwiseKernel if call.kind == "elementwise" else cupy.ReductionKernel
    kwargs = {k: v for k, v in call.kwargs.items() if k != "name"}
    kernel = kernel_class(*call.args, **kwargs)
    options = call.kwargs.get("options", ())
    for candidate, raw_ndim in itertools.product(CANDIDATES, RAW_NDIMS):
        if call.kind == "elementwise":
            yield _elementwise_code(kernel, call.kwargs, candidate, raw_ndim), options
        else:
            yield _reduction_code(kernel, candidate, raw_ndim), options


def _binding(params, candidate):
    names = []
    for p in params:
        if p.ctype is not None and p.dtype is None and p.ctype not in names:
            names.append(p.ctype)
    return dict(zip(names, candidate(len(names))))


def _arg_infos(params, types, raw_ndim, scalars=()):
    """CuPy's description of the arguments: arrays, but `scalars` (names) and CuPy's own."""
    from cupy._core import _carray, _kernel
    import cupy
    infos = []
    for p in params:
        if p.ctype is None:                       # CuPy's indexers (_ind, _in_ind, _out_ind)
            infos.append(_kernel._ArgInfo(_INDEXER, _carray.Indexer, None, 1, True, True))
        elif p.name == "_block_stride" or p.name in scalars:
            dtype = numpy.dtype(p.dtype if p.dtype is not None else types[p.ctype])
            infos.append(_kernel._ArgInfo(_SCALAR, dtype.type, dtype, 0, True, True))
        else:
            dtype = p.dtype if p.dtype is not None else types[p.ctype]
            infos.append(_kernel._ArgInfo(_NDARRAY, cupy.ndarray, dtype, raw_ndim if p.raw else 1, True, True))
    return tuple(infos)


def _elementwise_code(kernel, kwargs, candidate, raw_ndim):
    from cupy._core import _kernel
    types = _binding(kernel.params, candidate)
    return _kernel._get_elementwise_kernel_code(
        _arg_infos(kernel.params, types, raw_ndim), _kernel._TypeMap(tuple(types.items())), kernel.params,
        kernel.operation, kernel.name, kernel.preamble, kwargs.get("loop_prep", ""), kwargs.get("after_loop", ""), ())


def _reduction_code(kernel, candidate, raw_ndim):
    from cupy._core import _kernel, _reduction
    types = _binding(kernel._params, candidate)
    types["IndexT"] = _I32
    # a reduction's post-map expression sees its scalar arguments only: those it names are scalars
    scalars = {p.name for p in kernel.in_params if not p.raw and re.search(rf"\b{p.name}\b", kernel.post_map_expr)}
    return _reduction._ReductionKernel_get_cached_function_code(
        kernel.nin, kernel.nout, kernel._params, _arg_infos(kernel._params, types, raw_ndim, scalars),
        _kernel._TypeMap(tuple(types.items())), kernel.name, 256, kernel.reduce_type, kernel.identity,
        kernel.map_expr, kernel.reduce_expr, kernel.post_map_expr, kernel.preamble, ())
