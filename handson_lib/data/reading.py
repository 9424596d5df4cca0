"""Reading course data files safely: gzip or not, and unpickling NumPy arrays and plain data only;
and writing pickles that every supported NumPy reads.

A plain `pickle.dump` of an array under NumPy 2 names `numpy._core`, which NumPy 1.23 lacks: a file
written on a login node with NumPy 2 would not load on compute nodes with NumPy 1. `dump_portable`
writes each array as `numpy.ndarray(shape, dtype, bytearray)`, names that NumPy 1 and 2 both have
(and a writable array once loaded, as before); `unpickle` also reads files of either kind.
"""

from __future__ import annotations

import gzip
import pickle

import numpy


def open_maybe_gzip(path):
    """The file opened for reading bytes, decompressed when it starts with gzip's magic number."""
    f = open(path, "rb")
    head = f.read(2)
    f.seek(0)
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=f, mode="rb")
    return f


class ArrayUnpickler(pickle.Unpickler):
    """An unpickler that builds NumPy arrays and plain Python data, and refuses anything else."""

    _ALLOWED = {
        ("numpy", "ndarray"), ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
        ("collections", "OrderedDict"),
        ("_codecs", "encode"),  # how Python 3 writes bytes in pickle protocols 0-2
    }

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return super().find_class(_numpy_core_here(module), name)
        raise pickle.UnpicklingError(
            f"refusing to load {module}.{name} (only NumPy arrays and plain data are allowed)")


def _numpy_core_here(module):
    """`numpy._core.x` or `numpy.core.x` as this NumPy names it (1.x: core; 2.x: _core)."""
    if _HAS_NUMPY_2_CORE and module.startswith("numpy.core."):
        return "numpy._core." + module[len("numpy.core."):]
    if not _HAS_NUMPY_2_CORE and module.startswith("numpy._core."):
        return "numpy.core." + module[len("numpy._core."):]
    return module


_HAS_NUMPY_2_CORE = int(numpy.__version__.split(".")[0]) >= 2


class PortablePickler(pickle.Pickler):
    """A pickler that writes arrays under names every supported NumPy has."""

    def reducer_override(self, obj):
        if isinstance(obj, numpy.ndarray) and not obj.dtype.hasobject and obj.dtype.names is None:
            data = numpy.ascontiguousarray(obj)
            return numpy.ndarray, (data.shape, data.dtype.str, bytearray(data.tobytes()))
        if isinstance(obj, (numpy.generic, numpy.ndarray)):
            raise pickle.PicklingError(f"cannot write {type(obj).__name__} {obj.dtype} portably: store "
                                       "plain numbers (int(x), float(x)) or arrays of numbers")
        return NotImplemented


def dump_portable(obj, fileobj, protocol=5):
    """pickle.dump(obj), with arrays written so that NumPy 1.x and 2.x both load them."""
    PortablePickler(fileobj, protocol=protocol).dump(obj)


def unpickle(fileobj, encoding="ASCII"):
    return ArrayUnpickler(fileobj, encoding=encoding).load()


def str_keys(d):
    """The dict with bytes keys decoded (Python 2 pickles, like CIFAR-10's, have bytes keys)."""
    return {(k.decode("latin-1") if isinstance(k, bytes) else k): v for k, v in d.items()}
