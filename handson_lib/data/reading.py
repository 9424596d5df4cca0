"""Reading course data files safely: gzip or not, and unpickling NumPy arrays and plain data only."""

from __future__ import annotations

import gzip
import pickle


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
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"refusing to load {module}.{name} (only NumPy arrays and plain data are allowed)")


def unpickle(fileobj, encoding="ASCII"):
    return ArrayUnpickler(fileobj, encoding=encoding).load()


def str_keys(d):
    """The dict with bytes keys decoded (Python 2 pickles, like CIFAR-10's, have bytes keys)."""
    return {(k.decode("latin-1") if isinstance(k, bytes) else k): v for k, v in d.items()}
