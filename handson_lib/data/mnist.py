"""MNIST from its four official idx files (gzipped or not) in one folder."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from handson_lib.data.arrays import float_images, reshape, tuple_dataset
from handson_lib.data.errors import corrupt, describe_exc, mnist_missing, offline_hint
from handson_lib.messages import tr
from handson_lib.data.reading import open_maybe_gzip
from handson_lib.data.sources import MNIST_FILES, MNIST_URLS

_IDX_IMAGES_MAGIC = 0x00000803  # unsigned byte, 3 dimensions
_IDX_LABELS_MAGIC = 0x00000801  # unsigned byte, 1 dimension


def mnist_file(directory, stem):
    for name in (stem + ".gz", stem, stem.replace("-idx", ".idx") + ".gz",
                 stem.replace("-idx", ".idx")):
        if (directory / name).is_file():
            return directory / name
    return None


def _file_kind(what):
    """How a corrupt MNIST file is named: its images or its labels."""
    return tr("MNIST images file") if what == "images" else tr("MNIST labels file")


def _read_idx(path, magic, what):
    refetch = tr("Delete it and download {name} again from {url} {offline}.",
                 name=path.name if path.name.endswith(".gz") else path.name + ".gz", url=MNIST_URLS[0],
                 offline=offline_hint())
    try:
        with open_maybe_gzip(path) as f:
            blob = f.read()
    except Exception as exc:
        raise corrupt(path, _file_kind(what), tr("cannot read/decompress it ({error})", error=describe_exc(exc)),
                      refetch) from None
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    if len(blob) < header:
        raise corrupt(path, _file_kind(what), tr("only {n} bytes", n=len(blob)), refetch)
    found = struct.unpack(">I", blob[:4])[0]
    if found != magic:
        raise corrupt(path, _file_kind(what),
                      tr("idx magic number is 0x{found:08x}, expected 0x{magic:08x}", found=found, magic=magic),
                      refetch)
    dims = struct.unpack(f">{ndim}I", blob[4:header])
    expected = int(np.prod(dims))
    if len(blob) - header != expected:
        raise corrupt(path, _file_kind(what),
                      tr("header says {dims} = {expected} bytes of data, found {found}",
                         dims="x".join(map(str, dims)), expected=expected, found=len(blob) - header), refetch)
    return np.frombuffer(blob, dtype=np.uint8, offset=header).reshape(dims)


def load_mnist_arrays(directory):
    """{'train_x': uint8 (N, 28, 28), 'train_y': int32, 'test_x', 'test_y'} from idx files."""
    directory = Path(directory).expanduser()
    if not directory.is_dir():
        raise mnist_missing(directory)
    files = {role: mnist_file(directory, stem) for role, stem in MNIST_FILES.items()}
    missing = [MNIST_FILES[r] + ".gz" for r, p in files.items() if p is None]
    if missing:
        raise mnist_missing(directory, missing)
    out = {}
    for split in ("train", "test"):
        x = _read_idx(files[f"{split}_x"], _IDX_IMAGES_MAGIC, "images")
        y = _read_idx(files[f"{split}_y"], _IDX_LABELS_MAGIC, "labels")
        if len(x) != len(y):
            raise corrupt(files[f"{split}_y"], tr("MNIST labels file"),
                          tr("{labels} labels for {images} images in {name}", labels=len(y), images=len(x),
                             name=files[f"{split}_x"].name),
                          tr("Download both files again from {url} {offline}.", url=MNIST_URLS[0],
                             offline=offline_hint()))
        out[f"{split}_x"], out[f"{split}_y"] = x, y.astype(np.int32)
    return out


def load_mnist(directory, ndim=1, dtype=None):
    """(train, test) like ``chainer.datasets.get_mnist(ndim=ndim)``: float32 in [0, 1], int32.

    ``ndim=1``: (784,), ``ndim=2``: (28, 28), ``ndim=3``: (1, 28, 28).
    """
    raw = load_mnist_arrays(directory)
    shape = (1,) + raw["train_x"].shape[1:]
    return tuple(tuple_dataset(reshape(float_images(raw[f"{s}_x"], dtype), ndim, shape,
                                         allowed=(1, 2, 3), what="MNIST"), raw[f"{s}_y"])
                 for s in ("train", "test"))
