"""The course's resized CIFAR-10 subset: ``cifar10_<size>px_<pct>p.pickle.gz`` (read here; built
by :mod:`handson_lib.data.prepare`).

The ``cifar10_<size>px_<pct>p.pickle.gz`` format (format_version 1, defined by this course)
---------------------------------------------------------------------------------------------
The seed course trained on ``cifar10_256px_5p.pickle.gz``: CIFAR-10 resized to 256x256 pixels,
a 5 percent subset (2,500 training images per epoch). ``handson data prepare`` rebuilds such a file
from the official tarball (on the login node; compute nodes are offline). The file is a gzip
stream holding one pickle (protocol 5) of a dict::

    {
      'train': (images, labels),   # images: numpy uint8 (N, 3, H, W), RGB, 0..255
      'test':  (images, labels),   # labels: numpy int32 (N,), 0..n_class-1
      'meta': {
        'format_version': 1,
        'source': 'cifar-10-python.tar.gz',     # what it was built from
        'size': 256,                            # H == W == size
        'fraction': 0.05, 'test_fraction': 0.05,
        'seed': 0,                              # numpy RandomState seed of the subset
        'subset': 'stratified',                 # same share of every class
        'resize': 'PIL bilinear',
        'class_names': ['airplane', ..., 'truck'],
        'train_index': [...], 'test_index': [...],  # rows of the official sets (ascending)
      },
    }

The subset is stratified: ``round(fraction * N)`` images in all, split over the classes in
proportion to their counts (largest remainder), drawn per class with
``numpy.random.RandomState([seed, 0])`` (train) and ``RandomState([seed, 1])`` (test); the same
tarball, fractions and seed always give the same images. The loader unpickles with an
allow-list (NumPy arrays and plain Python data only). The arrays are written as
``numpy.ndarray(shape, dtype, bytearray)`` (:func:`handson_lib.data.reading.dump_portable`), so that
NumPy 1.x and 2.x both load a file that either wrote (a login node and its compute nodes may differ).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from handson_lib.data.arrays import float_images, reshape, tuple_dataset
from handson_lib.data.errors import corrupt, describe_exc, pickle_missing
from handson_lib.messages import tr
from handson_lib.data.reading import open_maybe_gzip, unpickle
from handson_lib.data.sources import CIFAR10_CLASSES

PICKLE_FORMAT_VERSION = 1


def load_pickle_arrays(path):
    """The dict of a cifar10_*px_*p.pickle.gz file, validated; arrays stay uint8."""
    path = Path(path).expanduser()
    if not path.exists():
        raise pickle_missing(path)
    refetch = tr("Delete it and rebuild it with `handson data prepare --out {path}` on the login node (or "
                 "copy it again from where the course keeps it).", path=path)
    what = tr("course CIFAR-10 pickle (cifar10_<size>px_<pct>p.pickle.gz)")
    try:
        with open_maybe_gzip(path) as f:
            obj = unpickle(f)
    except Exception as exc:
        raise corrupt(path, what, tr("cannot decompress/unpickle it ({error})", error=describe_exc(exc)),
                      refetch) from None
    if not isinstance(obj, dict) or "train" not in obj or "test" not in obj:
        keys = sorted(map(str, obj)) if isinstance(obj, dict) else type(obj).__name__
        raise corrupt(path, what, tr("expected a dict with 'train', 'test', 'meta', found {keys}", keys=keys),
                      refetch)
    meta = dict(obj.get("meta") or {})
    names = tuple(meta.get("class_names") or CIFAR10_CLASSES)
    out = {"meta": meta, "class_names": names}
    shape = None
    for split in ("train", "test"):
        part = obj[split]
        if not (isinstance(part, (tuple, list)) and len(part) == 2):
            raise corrupt(path, what, tr("'{split}' must be a pair (images, labels)", split=split), refetch)
        x, y = part
        if not isinstance(x, np.ndarray) or x.dtype != np.uint8 or x.ndim != 4 \
                or x.shape[1] not in (1, 3):
            raise corrupt(path, what, tr("'{split}' images must be uint8 (N, 3, H, W), found {dtype} {shape}",
                                         split=split, dtype=getattr(x, "dtype", type(x).__name__),
                                         shape=getattr(x, "shape", "")), refetch)
        if shape is not None and x.shape[1:] != shape:
            raise corrupt(path, what, tr("train images are {train}, test images {test}", train=shape,
                                         test=x.shape[1:]), refetch)
        shape = x.shape[1:]
        y = np.asarray(y)
        if y.ndim != 1 or len(y) != len(x) or not np.issubdtype(y.dtype, np.integer):
            raise corrupt(path, what, tr("'{split}' has {n} images but labels of {dtype} {shape}", split=split,
                                         n=len(x), dtype=y.dtype, shape=y.shape), refetch)
        if len(y) and (y.min() < 0 or y.max() >= len(names)):
            raise corrupt(path, what, tr("'{split}' labels {low}..{high} outside 0..{last}", split=split,
                                         low=y.min(), high=y.max(), last=len(names) - 1), refetch)
        out[f"{split}_x"], out[f"{split}_y"] = x, y.astype(np.int32)
    return out


def load_cifar_pickle(path, ndim=3, dtype=None):
    """(train, test, meta) from a course pickle; images float32 in [0, 1], (3, H, W) or flat."""
    raw = load_pickle_arrays(path)
    shape = raw["train_x"].shape[1:]
    return (tuple_dataset(reshape(float_images(raw["train_x"], dtype), ndim, shape),
                          raw["train_y"]),
            tuple_dataset(reshape(float_images(raw["test_x"], dtype), ndim, shape),
                          raw["test_y"]),
            raw["meta"])
