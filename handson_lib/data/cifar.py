"""CIFAR-10 from the official python version (``cifar-10-python.tar.gz`` or its extracted folder)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np

from handson_lib.data.arrays import float_images, reshape, tuple_dataset
from handson_lib.data.errors import cifar_missing, cifar_refetch, corrupt, describe_exc, offline_hint
from handson_lib.messages import tr
from handson_lib.data.reading import str_keys, unpickle
from handson_lib.data.sources import (CIFAR10_CLASSES, CIFAR10_DIRNAME, CIFAR10_TARBALL,
                                      CIFAR10_URL, CIFAR_TRAIN_BATCHES)

_CIFAR_PIXELS = 3 * 32 * 32


def _parse_cifar_batch(raw, name, path):
    """One pickled batch -> (uint8 (N, 3072), int32 (N,)); DatasetCorruptError if it is wrong."""
    bad = lambda problem: corrupt(path, tr("CIFAR-10 python archive"), f"{name}: {problem}",
                                  cifar_refetch(path))
    try:
        d = unpickle(io.BytesIO(raw), encoding="bytes")
    except Exception as exc:
        raise bad(tr("cannot unpickle ({error})", error=describe_exc(exc))) from None
    if not isinstance(d, dict):
        raise bad(tr("expected a pickled dict, found {type}", type=type(d).__name__))
    d = str_keys(d)
    if "data" not in d or "labels" not in d:
        raise bad(tr("missing b'data' or b'labels' (keys: {keys})", keys=sorted(d)))
    data, labels = d["data"], d["labels"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 \
            or data.shape[1] != _CIFAR_PIXELS:
        shape = getattr(data, "shape", None)
        dtype = getattr(data, "dtype", type(data).__name__)
        raise bad(tr("b'data' must be a uint8 array of shape (N, 3072), found {dtype} {shape}",
                     dtype=dtype, shape=shape))
    try:
        labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise bad(tr("b'labels' is not a list of integers ({error})", error=describe_exc(exc))) from None
    if len(labels) != len(data):
        raise bad(tr("{images} images but {labels} labels", images=len(data), labels=len(labels)))
    if len(labels) and (labels.min() < 0 or labels.max() >= len(CIFAR10_CLASSES)):
        raise bad(tr("labels must be 0..9, found {low}..{high}", low=labels.min(), high=labels.max()))
    return data, labels.astype(np.int32)


def _parse_cifar_meta(raw):
    try:
        meta = str_keys(unpickle(io.BytesIO(raw), encoding="bytes"))
        names = tuple(n.decode("utf-8") if isinstance(n, bytes) else str(n)
                      for n in meta["label_names"])
        if len(names) == len(CIFAR10_CLASSES):
            return names
    except Exception:
        pass  # batches.meta only carries class names; the standard names are the fallback
    return CIFAR10_CLASSES


def _read_cifar_members(path):
    """{member basename: bytes} for the batches of a tarball or an extracted folder."""
    wanted = set(CIFAR_TRAIN_BATCHES) | {"test_batch", "batches.meta"}
    found = {}
    if path.is_dir():
        folder = path / CIFAR10_DIRNAME if (path / CIFAR10_DIRNAME).is_dir() else path
        for name in wanted:
            if (folder / name).is_file():
                found[name] = (folder / name).read_bytes()
        return found, sorted(p.name for p in folder.iterdir())
    seen = []
    try:
        with tarfile.open(path, "r:*") as archive:
            for member in archive:
                base = member.name.rstrip("/").rsplit("/", 1)[-1]
                seen.append(member.name)
                if base in wanted and member.isfile():
                    f = archive.extractfile(member)
                    found[base] = f.read()
                    if len(found[base]) != member.size:
                        raise EOFError(f"{member.name}: {len(found[base])} of {member.size} bytes")
    except Exception as exc:
        raise corrupt(path, tr("CIFAR-10 python archive (cifar-10-python.tar.gz)"),
                      tr("cannot read it as a (gzipped) tar file ({error})", error=describe_exc(exc)),
                      cifar_refetch(path)) from None
    return found, seen


def load_cifar10_arrays(path):
    """Raw CIFAR-10 from the official python version: a dict of uint8/int32 NumPy arrays.

    ``path``: ``cifar-10-python.tar.gz`` or the extracted ``cifar-10-batches-py`` folder (or its
    parent). Returns ``{'train_x': uint8 (N, 3, 32, 32), 'train_y': int32 (N,), 'test_x': ...,
    'test_y': ..., 'class_names': tuple}``. The pixel rows of the official files are the red
    plane, then green, then blue, each 32x32 row-major; the reshape keeps that order.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise cifar_missing(path)
    found, seen = _read_cifar_members(path)
    missing = [n for n in CIFAR_TRAIN_BATCHES + ("test_batch",) if n not in found]
    if missing:
        if any(str(n).endswith(".bin") for n in seen):
            problem = tr("this is the binary version (data_batch_1.bin ...); the course reads the python "
                         "version")
        elif any("data_batch" in str(n) and str(n).endswith(".mat") for n in seen):
            problem = tr("this is the MATLAB version; the course reads the python version")
        else:
            problem = tr("missing {missing} (found: {found})", missing=", ".join(missing),
                         found=", ".join(map(str, seen[:8])) or tr("nothing"))
        raise corrupt(path, tr("CIFAR-10 python version"), problem,
                      tr("Fetch {tarball} (the 'CIFAR-10 python version') from {url} {offline} and put it at "
                         "{path}.", tarball=CIFAR10_TARBALL, url=CIFAR10_URL, offline=offline_hint(), path=path))
    train = [_parse_cifar_batch(found[n], n, path) for n in CIFAR_TRAIN_BATCHES]
    test_x, test_y = _parse_cifar_batch(found["test_batch"], "test_batch", path)
    names = _parse_cifar_meta(found["batches.meta"]) if "batches.meta" in found else CIFAR10_CLASSES
    train_x = np.concatenate([x for x, _ in train]).reshape(-1, 3, 32, 32)
    train_y = np.concatenate([y for _, y in train])
    return {"train_x": train_x, "train_y": train_y,
            "test_x": test_x.reshape(-1, 3, 32, 32), "test_y": test_y, "class_names": names}


def load_cifar10(path, ndim=3, dtype=None):
    """(train, test) TupleDatasets from the official CIFAR-10 python version.

    Same values as ``chainer.datasets.get_cifar10(ndim=ndim)``: images float32 in [0, 1] of shape
    (3, 32, 32) (``ndim=3``) or (3072,) (``ndim=1``), labels int32.
    """
    raw = load_cifar10_arrays(path)
    return (tuple_dataset(reshape(float_images(raw["train_x"], dtype), ndim, (3, 32, 32)),
                          raw["train_y"]),
            tuple_dataset(reshape(float_images(raw["test_x"], dtype), ndim, (3, 32, 32)),
                          raw["test_y"]))
