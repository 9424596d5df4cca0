"""Datasets of the course: real CIFAR-10 / MNIST from their official files, offline stand-ins.

Every training script calls one function::

    train, test, info = get_dataset(args.dataset)   # prints one line saying what it loaded

``name_or_path`` may be

* ``'synthetic'`` (default, or ``$HANDSON_DATASET``): CIFAR-shaped, learnable synthetic images
  (:func:`synthetic_cifar`). Not CIFAR-10, and the announcement line says so.
* ``'digits'``: the real 8x8 handwritten digits bundled with scikit-learn (:func:`digits`).
* ``'cifar10'`` / ``'mnist'``: the official files in the data folder (``$HANDSON_DATA_DIR``,
  default ``<course>/data``).
* a path: ``cifar-10-python.tar.gz`` or its extracted ``cifar-10-batches-py`` folder
  (:func:`load_cifar10`), a ``cifar10_<size>px_<pct>p.pickle.gz`` (:func:`load_cifar_pickle`), or a
  folder holding the four MNIST idx files (:func:`load_mnist`).

Images come back like ``chainer.datasets.get_cifar10()`` / ``get_mnist()`` return them:
``TupleDataset`` of (image, label), images float32 (``chainer.config.dtype``) scaled to [0, 1],
labels int32.

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
tarball, fractions and seed always give the same images. The loader unpickles with an allow-list (NumPy arrays and plain Python data only).

Errors: :class:`DatasetNotFoundError` (also a ``FileNotFoundError``) says what to fetch, from
where, and where to put it; :class:`DatasetCorruptError` names the file and what is wrong with it
(truncated gzip, bad tar, bad pickle, wrong array sizes, wrong idx magic number). Both are
:class:`DatasetError`.

This module imports neither Chainer nor scikit-learn nor Pillow at import time: the ``handson``
command line imports it to build its parser.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import os
import pickle
import struct
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

__all__ = [
    "CIFAR10_CLASSES", "CIFAR10_URL", "MNIST_URLS", "DEFAULT_SYNTHETIC_TRAIN", "DEFAULT_SYNTHETIC_TEST",
    "DatasetError", "DatasetNotFoundError", "DatasetCorruptError", "DatasetInfo",
    "get_dataset", "load_cifar10", "load_cifar10_arrays", "load_cifar_pickle", "load_mnist",
    "synthetic_cifar", "digits", "data_dir", "find_cifar10", "default_pickle_name",
    "prepare_cifar_pickle", "add_prepare_arguments", "prepare_main",
]

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar.html"
CIFAR10_TARBALL = "cifar-10-python.tar.gz"
CIFAR10_DIRNAME = "cifar-10-batches-py"
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer",
                   "dog", "frog", "horse", "ship", "truck")
_CIFAR_TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
_CIFAR_PIXELS = 3 * 32 * 32

MNIST_URLS = ("https://ossci-datasets.s3.amazonaws.com/mnist/ (mirror)",
              "http://yann.lecun.com/exdb/mnist/ (original)")
_MNIST_FILES = {  # role: official file name without .gz
    "train_x": "train-images-idx3-ubyte", "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte", "test_y": "t10k-labels-idx1-ubyte",
}
_IDX_IMAGES_MAGIC = 0x00000803  # unsigned byte, 3 dimensions
_IDX_LABELS_MAGIC = 0x00000801  # unsigned byte, 1 dimension

#: Size of the synthetic set when none is given: the seed's 5 % subset trained on 2,500 images
#: per epoch; 500 test images is 5 % of CIFAR-10's test set.
DEFAULT_SYNTHETIC_TRAIN = 2500
DEFAULT_SYNTHETIC_TEST = 500

PICKLE_FORMAT_VERSION = 1
_OFFLINE_HINT = ("on a machine with internet (on a cluster: the login node; compute nodes are "
                 "offline)")


# --------------------------------------------------------------------------------------------
# errors and info


class DatasetError(Exception):
    """A dataset could not be loaded; the message says why and what to do."""


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """The dataset file is not there; the message says what to fetch and where to put it."""


class DatasetCorruptError(DatasetError):
    """The file is there but unreadable (truncated, wrong format, wrong sizes)."""


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """What :func:`get_dataset` loaded. ``description`` is the line it announces."""

    name: str                 # 'synthetic', 'digits', 'cifar10', 'mnist'
    description: str
    n_train: int
    n_test: int
    shape: tuple              # shape of one image as returned, e.g. (3, 32, 32); flat: (3072,)
    n_class: int
    is_real: bool             # False only for the synthetic stand-in
    source: str | None = None  # the file or folder read, None for generated data
    class_names: tuple = ()

    def __str__(self):
        return self.description


# --------------------------------------------------------------------------------------------
# small helpers


def data_dir() -> Path:
    """Where the course looks for data files: ``$HANDSON_DATA_DIR`` or ``<course root>/data``."""
    env = os.environ.get("HANDSON_DATA_DIR")
    if env:
        return Path(env).expanduser()
    import handson_lib
    return Path(handson_lib.COURSE_ROOT) / "data"


def _pct_label(fraction: float) -> str:
    pct = fraction * 100
    if abs(pct - round(pct)) < 1e-9:
        return str(int(round(pct)))
    return f"{pct:g}"


def default_pickle_name(size: int = 256, fraction: float = 0.05) -> str:
    """``cifar10_256px_5p.pickle.gz`` for the seed's settings."""
    return f"cifar10_{size}px_{_pct_label(fraction)}p.pickle.gz"


def find_cifar10(directory=None):
    """The first CIFAR-10 source found in ``directory`` (default :func:`data_dir`), else None.

    Order: the seed's ``cifar10_256px_5p.pickle.gz``, any other ``cifar10_*px_*p.pickle.gz``,
    ``cifar-10-python.tar.gz``, an extracted ``cifar-10-batches-py`` folder.
    """
    d = Path(directory) if directory is not None else data_dir()
    if not d.is_dir():
        return None
    seed_file = d / default_pickle_name()
    if seed_file.is_file():
        return seed_file
    others = sorted(d.glob("cifar10_*px_*p.pickle.gz"))
    if others:
        return others[0]
    for candidate in (d / CIFAR10_TARBALL, d / CIFAR10_DIRNAME):
        if candidate.exists():
            return candidate
    return None


def _float_images(images, dtype):
    """uint8 -> float in [0, 1], the same arithmetic as chainer.datasets.get_cifar10()."""
    import chainer
    out = images.astype(chainer.get_dtype(dtype))
    out *= 1.0 / 255.0
    return out


def _reshape(images, ndim, full_shape, allowed=(1, 3), what="this dataset"):
    n = len(images)
    if ndim not in allowed:
        raise ValueError(f"ndim must be one of {allowed} for {what}, got {ndim!r}")
    if ndim == 1:
        return images.reshape(n, -1)
    if ndim == 2:
        return images.reshape((n,) + tuple(full_shape[-2:]))
    return images.reshape((n,) + tuple(full_shape))


def _tuple_dataset(images, labels):
    from chainer.datasets import TupleDataset
    return TupleDataset(images, np.asarray(labels).astype(np.int32))


def _stratified_indices(labels, n_select, rng):
    """``n_select`` indices (ascending) with every class in proportion to its count."""
    labels = np.asarray(labels)
    n = len(labels)
    n_select = int(min(max(n_select, 0), n))
    classes, counts = np.unique(labels, return_counts=True)
    quota = counts * (n_select / n) if n else counts * 0.0
    take = np.floor(quota).astype(int)
    short = n_select - int(take.sum())
    if short > 0:  # largest remainder first; ties go to the lower class id (stable sort)
        order = np.argsort(-(quota - take), kind="stable")
        take[order[:short]] += 1
    chosen = []
    for cls, k in zip(classes, take):
        members = np.flatnonzero(labels == cls)
        chosen.append(members[rng.permutation(len(members))[:k]])
    return np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, dtype=int)


def _say(print_fn):
    if print_fn is None:
        return lambda line: print(line, flush=True)
    return print_fn


# --------------------------------------------------------------------------------------------
# messages


def _cifar_missing(path, what="CIFAR-10") -> DatasetNotFoundError:
    path = Path(path)
    target = path if path.name.endswith((".tar.gz", ".tgz")) else data_dir() / CIFAR10_TARBALL
    return DatasetNotFoundError(
        f"{what} not found at {path}. Fetch {CIFAR10_TARBALL} (the 'CIFAR-10 python version', "
        f"163 MB) from {CIFAR10_URL} {_OFFLINE_HINT}, put it at {target} (or pass --dataset PATH), "
        f"then run `handson data prepare --cifar {target}` to build the smaller "
        f"{default_pickle_name()}. Offline, `--dataset synthetic` (CIFAR-shaped stand-in) or "
        f"`--dataset digits` (real 8x8 digits) run without any download.")


def _pickle_missing(path) -> DatasetNotFoundError:
    path = Path(path)
    tarball = data_dir() / CIFAR10_TARBALL
    return DatasetNotFoundError(
        f"CIFAR-10 pickle not found at {path}. Build it on a machine with the official tarball "
        f"(on a cluster: the login node; compute nodes are offline): fetch {CIFAR10_TARBALL} from "
        f"{CIFAR10_URL}, put it at {tarball}, then run `handson data prepare --cifar {tarball} "
        f"--out {path}` (add --size/--fraction to match the name), or pass --dataset with the "
        f"tarball itself.")


def _mnist_missing(path, missing=()) -> DatasetNotFoundError:
    names = ", ".join(f"{n}.gz" for n in _MNIST_FILES.values())
    detail = f" (missing: {', '.join(missing)})" if missing else ""
    return DatasetNotFoundError(
        f"MNIST not found at {path}{detail}. Fetch the four idx files {names} from "
        f"{' or '.join(MNIST_URLS)} {_OFFLINE_HINT} and put them in the folder {path} "
        f"(gzipped or not), or pass --dataset digits for the real 8x8 digits bundled with "
        f"scikit-learn.")


def _corrupt(path, what, problem, refetch) -> DatasetCorruptError:
    return DatasetCorruptError(
        f"{path} is not a valid {what}: {problem}. The file is probably truncated or damaged "
        f"(an interrupted download or copy). {refetch}")


def _cifar_refetch(path):
    return (f"Delete it and download {CIFAR10_TARBALL} again from {CIFAR10_URL} "
            f"{_OFFLINE_HINT}, and put it at {path}.")


def _describe_exc(exc):
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------------------------
# restricted unpickling (NumPy arrays and plain Python data only)


class _ArrayUnpickler(pickle.Unpickler):
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


def _unpickle(fileobj, encoding="ASCII"):
    return _ArrayUnpickler(fileobj, encoding=encoding).load()


def _str_keys(d):
    return {(k.decode("latin-1") if isinstance(k, bytes) else k): v for k, v in d.items()}


# --------------------------------------------------------------------------------------------
# CIFAR-10: official python version


def _parse_cifar_batch(raw, name, path):
    """One pickled batch -> (uint8 (N, 3072), int32 (N,)); DatasetCorruptError if it is wrong."""
    bad = lambda problem: _corrupt(path, "CIFAR-10 python archive", f"{name}: {problem}",
                                   _cifar_refetch(path))
    try:
        d = _unpickle(io.BytesIO(raw), encoding="bytes")
    except Exception as exc:
        raise bad(f"cannot unpickle ({_describe_exc(exc)})") from None
    if not isinstance(d, dict):
        raise bad(f"expected a pickled dict, found {type(d).__name__}")
    d = _str_keys(d)
    if "data" not in d or "labels" not in d:
        raise bad(f"missing b'data' or b'labels' (keys: {sorted(d)})")
    data, labels = d["data"], d["labels"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 \
            or data.shape[1] != _CIFAR_PIXELS:
        shape = getattr(data, "shape", None)
        dtype = getattr(data, "dtype", type(data).__name__)
        raise bad(f"b'data' must be a uint8 array of shape (N, 3072), found {dtype} {shape}")
    try:
        labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise bad(f"b'labels' is not a list of integers ({_describe_exc(exc)})") from None
    if len(labels) != len(data):
        raise bad(f"{len(data)} images but {len(labels)} labels")
    if len(labels) and (labels.min() < 0 or labels.max() >= len(CIFAR10_CLASSES)):
        raise bad(f"labels must be 0..9, found {labels.min()}..{labels.max()}")
    return data, labels.astype(np.int32)


def _parse_cifar_meta(raw):
    try:
        meta = _str_keys(_unpickle(io.BytesIO(raw), encoding="bytes"))
        names = tuple(n.decode("utf-8") if isinstance(n, bytes) else str(n)
                      for n in meta["label_names"])
        if len(names) == len(CIFAR10_CLASSES):
            return names
    except Exception:
        pass  # batches.meta only carries class names; the standard names are the fallback
    return CIFAR10_CLASSES


def _read_cifar_members(path):
    """{member basename: bytes} for the batches of a tarball or an extracted folder."""
    wanted = set(_CIFAR_TRAIN_BATCHES) | {"test_batch", "batches.meta"}
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
        raise _corrupt(path, "CIFAR-10 python archive (cifar-10-python.tar.gz)",
                       f"cannot read it as a (gzipped) tar file ({_describe_exc(exc)})",
                       _cifar_refetch(path)) from None
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
        raise _cifar_missing(path)
    found, seen = _read_cifar_members(path)
    missing = [n for n in _CIFAR_TRAIN_BATCHES + ("test_batch",) if n not in found]
    if missing:
        if any(str(n).endswith(".bin") for n in seen):
            problem = ("this is the binary version (data_batch_1.bin ...); the course reads the "
                       "python version")
        elif any("data_batch" in str(n) and str(n).endswith(".mat") for n in seen):
            problem = "this is the MATLAB version; the course reads the python version"
        else:
            problem = f"missing {', '.join(missing)} (found: {', '.join(map(str, seen[:8])) or 'nothing'})"
        raise _corrupt(path, "CIFAR-10 python version", problem,
                       f"Fetch {CIFAR10_TARBALL} (the 'CIFAR-10 python version') from "
                       f"{CIFAR10_URL} {_OFFLINE_HINT} and put it at {path}.")
    train = [_parse_cifar_batch(found[n], n, path) for n in _CIFAR_TRAIN_BATCHES]
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
    return (_tuple_dataset(_reshape(_float_images(raw["train_x"], dtype), ndim, (3, 32, 32)),
                           raw["train_y"]),
            _tuple_dataset(_reshape(_float_images(raw["test_x"], dtype), ndim, (3, 32, 32)),
                           raw["test_y"]))


# --------------------------------------------------------------------------------------------
# CIFAR-10: the course's resized subset (cifar10_<size>px_<pct>p.pickle.gz)


def _open_maybe_gzip(path):
    f = open(path, "rb")
    head = f.read(2)
    f.seek(0)
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=f, mode="rb")
    return f


def _load_pickle_arrays(path):
    """The dict of a cifar10_*px_*p.pickle.gz file, validated; arrays stay uint8."""
    path = Path(path).expanduser()
    if not path.exists():
        raise _pickle_missing(path)
    refetch = (f"Delete it and rebuild it with `handson data prepare --out {path}` on the login "
               f"node (or copy it again from where the course keeps it).")
    what = "course CIFAR-10 pickle (cifar10_<size>px_<pct>p.pickle.gz)"
    try:
        with _open_maybe_gzip(path) as f:
            obj = _unpickle(f)
    except Exception as exc:
        raise _corrupt(path, what, f"cannot decompress/unpickle it ({_describe_exc(exc)})",
                       refetch) from None
    if not isinstance(obj, dict) or "train" not in obj or "test" not in obj:
        keys = sorted(map(str, obj)) if isinstance(obj, dict) else type(obj).__name__
        raise _corrupt(path, what, f"expected a dict with 'train', 'test', 'meta', found {keys}",
                       refetch)
    meta = dict(obj.get("meta") or {})
    names = tuple(meta.get("class_names") or CIFAR10_CLASSES)
    out = {"meta": meta, "class_names": names}
    shape = None
    for split in ("train", "test"):
        part = obj[split]
        if not (isinstance(part, (tuple, list)) and len(part) == 2):
            raise _corrupt(path, what, f"'{split}' must be a pair (images, labels)", refetch)
        x, y = part
        if not isinstance(x, np.ndarray) or x.dtype != np.uint8 or x.ndim != 4 \
                or x.shape[1] not in (1, 3):
            raise _corrupt(path, what, f"'{split}' images must be uint8 (N, 3, H, W), found "
                           f"{getattr(x, 'dtype', type(x).__name__)} {getattr(x, 'shape', '')}",
                           refetch)
        if shape is not None and x.shape[1:] != shape:
            raise _corrupt(path, what, f"train images are {shape}, test images {x.shape[1:]}",
                           refetch)
        shape = x.shape[1:]
        y = np.asarray(y)
        if y.ndim != 1 or len(y) != len(x) or not np.issubdtype(y.dtype, np.integer):
            raise _corrupt(path, what, f"'{split}' has {len(x)} images but labels of "
                           f"{y.dtype} {y.shape}", refetch)
        if len(y) and (y.min() < 0 or y.max() >= len(names)):
            raise _corrupt(path, what, f"'{split}' labels {y.min()}..{y.max()} outside "
                           f"0..{len(names) - 1}", refetch)
        out[f"{split}_x"], out[f"{split}_y"] = x, y.astype(np.int32)
    return out


def load_cifar_pickle(path, ndim=3, dtype=None):
    """(train, test, meta) from a course pickle; images float32 in [0, 1], (3, H, W) or flat."""
    raw = _load_pickle_arrays(path)
    shape = raw["train_x"].shape[1:]
    return (_tuple_dataset(_reshape(_float_images(raw["train_x"], dtype), ndim, shape),
                           raw["train_y"]),
            _tuple_dataset(_reshape(_float_images(raw["test_x"], dtype), ndim, shape),
                           raw["test_y"]),
            raw["meta"])


# --------------------------------------------------------------------------------------------
# MNIST (official idx files)


def _mnist_file(directory, stem):
    for name in (stem + ".gz", stem, stem.replace("-idx", ".idx") + ".gz",
                 stem.replace("-idx", ".idx")):
        if (directory / name).is_file():
            return directory / name
    return None


def _read_idx(path, magic, what):
    refetch = (f"Delete it and download {path.name if path.name.endswith('.gz') else path.name + '.gz'} "
               f"again from {MNIST_URLS[0]} {_OFFLINE_HINT}.")
    try:
        with _open_maybe_gzip(path) as f:
            blob = f.read()
    except Exception as exc:
        raise _corrupt(path, f"MNIST {what} file", f"cannot read/decompress it "
                       f"({_describe_exc(exc)})", refetch) from None
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    if len(blob) < header:
        raise _corrupt(path, f"MNIST {what} file", f"only {len(blob)} bytes", refetch)
    found = struct.unpack(">I", blob[:4])[0]
    if found != magic:
        raise _corrupt(path, f"MNIST {what} file",
                       f"idx magic number is 0x{found:08x}, expected 0x{magic:08x}", refetch)
    dims = struct.unpack(f">{ndim}I", blob[4:header])
    expected = int(np.prod(dims))
    if len(blob) - header != expected:
        raise _corrupt(path, f"MNIST {what} file",
                       f"header says {'x'.join(map(str, dims))} = {expected} bytes of data, "
                       f"found {len(blob) - header}", refetch)
    return np.frombuffer(blob, dtype=np.uint8, offset=header).reshape(dims)


def load_mnist_arrays(directory):
    """{'train_x': uint8 (N, 28, 28), 'train_y': int32, 'test_x', 'test_y'} from idx files."""
    directory = Path(directory).expanduser()
    if not directory.is_dir():
        raise _mnist_missing(directory)
    files = {role: _mnist_file(directory, stem) for role, stem in _MNIST_FILES.items()}
    missing = [_MNIST_FILES[r] + ".gz" for r, p in files.items() if p is None]
    if missing:
        raise _mnist_missing(directory, missing)
    out = {}
    for split in ("train", "test"):
        x = _read_idx(files[f"{split}_x"], _IDX_IMAGES_MAGIC, "images")
        y = _read_idx(files[f"{split}_y"], _IDX_LABELS_MAGIC, "labels")
        if len(x) != len(y):
            raise _corrupt(files[f"{split}_y"], "MNIST labels file",
                           f"{len(y)} labels for {len(x)} images in {files[f'{split}_x'].name}",
                           f"Download both files again from {MNIST_URLS[0]} {_OFFLINE_HINT}.")
        out[f"{split}_x"], out[f"{split}_y"] = x, y.astype(np.int32)
    return out


def load_mnist(directory, ndim=1, dtype=None):
    """(train, test) like ``chainer.datasets.get_mnist(ndim=ndim)``: float32 in [0, 1], int32.

    ``ndim=1``: (784,), ``ndim=2``: (28, 28), ``ndim=3``: (1, 28, 28).
    """
    raw = load_mnist_arrays(directory)
    shape = (1,) + raw["train_x"].shape[1:]
    return tuple(_tuple_dataset(_reshape(_float_images(raw[f"{s}_x"], dtype), ndim, shape,
                                         allowed=(1, 2, 3), what="MNIST"), raw[f"{s}_y"])
                 for s in ("train", "test"))


# --------------------------------------------------------------------------------------------
# offline stand-ins


def _upsample(low, out):
    """Bilinear upsampling of the last two axes (corners aligned) to out x out."""
    c = low.shape[-1]
    xs = np.linspace(0.0, c - 1, out)
    i0 = np.floor(xs).astype(int)
    i1 = np.minimum(i0 + 1, c - 1)
    w = (xs - i0).astype(np.float32)
    rows = low[..., i0, :] * (1 - w)[:, None] + low[..., i1, :] * w[:, None]
    return rows[..., i0] * (1 - w) + rows[..., i1] * w


def _synthetic_arrays(n_train, n_test, seed=0, size=32, n_class=10):
    """float32 images (N, 3, size, size) in [0, 1] and int32 labels.

    Each class has a fixed smooth random RGB template (a 12x12 random field upsampled, plus a
    class colour tint). A sample is its class template cropped at a random shift of up to
    size/4 pixels, times a random contrast, plus a smooth random background, plus pixel noise,
    clipped to [0, 1]. A linear classifier reaches about 85 % on it, a small CNN about 80 % after
    400 iterations of batch 32; chance is 10 %.
    """
    noise, contrast, coarse, background, tint = 0.25, 0.2, 12, 0.2, 0.1
    shift = max(1, size // 4)
    big = size + 2 * shift
    rng = np.random.default_rng([seed, 0])
    templates = _upsample(rng.standard_normal((n_class, 3, coarse, coarse)).astype(np.float32), big)
    templates *= contrast / templates.std()
    templates += tint * rng.standard_normal((n_class, 3, 1, 1)).astype(np.float32)

    def draw(n, stream):
        r = np.random.default_rng([seed, stream])
        labels = r.permutation(np.arange(n) % n_class).astype(np.int32)
        dy = r.integers(0, 2 * shift + 1, n)
        dx = r.integers(0, 2 * shift + 1, n)
        rows = dy[:, None] + np.arange(size)
        cols = dx[:, None] + np.arange(size)
        x = templates[labels[:, None, None, None], np.arange(3)[None, :, None, None],
                      rows[:, None, :, None], cols[:, None, None, :]]
        x *= r.uniform(0.6, 1.4, (n, 1, 1, 1)).astype(np.float32)
        x += background * _upsample(r.standard_normal((n, 3, 4, 4)).astype(np.float32), size)
        x += 0.5
        x += noise * r.standard_normal(x.shape, dtype=np.float32)
        np.clip(x, 0.0, 1.0, out=x)
        return x, labels

    return draw(n_train, 1) + draw(n_test, 2)


def synthetic_cifar(n_train=DEFAULT_SYNTHETIC_TRAIN, n_test=DEFAULT_SYNTHETIC_TEST, seed=0,
                    ndim=3, size=32, dtype=None):
    """(train, test): learnable CIFAR-shaped synthetic data, the offline default. NOT CIFAR-10.

    Images float32 (3, size, size) in [0, 1] (flat with ``ndim=1``), 10 balanced classes,
    int32 labels. Deterministic for a seed; the class templates depend on the seed only, so train
    and test of one seed share them. About 0.5 s for 5,000 images of 32x32. ``size=256`` gives
    the seed's image size for throughput runs (its accuracy is not calibrated).
    """
    import chainer
    x_tr, y_tr, x_te, y_te = _synthetic_arrays(int(n_train), int(n_test), seed, int(size))
    dt = chainer.get_dtype(dtype)
    shape = (3, size, size)
    return (_tuple_dataset(_reshape(x_tr.astype(dt, copy=False), ndim, shape), y_tr),
            _tuple_dataset(_reshape(x_te.astype(dt, copy=False), ndim, shape), y_te))


def digits(ndim=1, seed=0, test_fraction=0.2, dtype=None):
    """(train, test) from scikit-learn's real 8x8 handwritten digits (1,797 images, offline).

    Pixels have 17 gray levels 0..16, scaled to [0, 1]; ``ndim`` 1: (64,), 2: (8, 8),
    3: (1, 8, 8); labels int32. The test set is a stratified ``round(test_fraction * 1797)``
    images drawn with ``numpy.random.RandomState(seed)``; the rest is the training set.
    """
    import chainer
    from sklearn.datasets import load_digits
    bunch = load_digits()
    images = (bunch.data.astype(np.float64) / 16.0).astype(chainer.get_dtype(dtype))
    labels = bunch.target.astype(np.int32)
    test_idx = _stratified_indices(labels, round(test_fraction * len(labels)),
                                   np.random.RandomState(seed))
    is_test = np.zeros(len(labels), dtype=bool)
    is_test[test_idx] = True
    images = _reshape(images, ndim, (1, 8, 8), allowed=(1, 2, 3), what="digits")
    return (_tuple_dataset(images[~is_test], labels[~is_test]),
            _tuple_dataset(images[is_test], labels[is_test]))


# --------------------------------------------------------------------------------------------
# the one entry point


def _subset(dataset, n, seed):
    """A stratified seeded subset of a TupleDataset (n None or >= len: unchanged)."""
    if n is None or n >= len(dataset):
        return dataset
    x, y = dataset._datasets
    idx = _stratified_indices(y, n, np.random.RandomState(seed))
    return _tuple_dataset(x[idx], y[idx])


def _kind_of_path(path):
    name = path.name.lower()
    if path.is_dir():
        if (path / CIFAR10_DIRNAME).is_dir() or (path / "data_batch_1").is_file():
            return "cifar10"
        if any(_mnist_file(path, stem) for stem in _MNIST_FILES.values()) or "mnist" in name:
            return "mnist"
        raise DatasetError(
            f"{path} is a folder but holds neither CIFAR-10 ({CIFAR10_DIRNAME}/ or data_batch_1 "
            f"...) nor the MNIST idx files ({', '.join(_MNIST_FILES.values())}). Pass the "
            f"file itself: {CIFAR10_TARBALL}, a cifar10_<size>px_<pct>p.pickle.gz, or an MNIST "
            f"folder; or 'synthetic' / 'digits'.")
    if name.endswith((".pickle.gz", ".pkl.gz", ".pickle", ".pkl")):
        return "cifar_pickle"
    if name.endswith((".tar.gz", ".tgz", ".tar")):
        return "cifar10"
    if "mnist" in name:
        return "mnist"
    raise DatasetError(
        f"do not know how to read {path}: expected {CIFAR10_TARBALL} (or a .tar.gz of it), its "
        f"extracted {CIFAR10_DIRNAME} folder, a cifar10_<size>px_<pct>p.pickle.gz, or a folder "
        f"with the MNIST idx files; or the names 'synthetic', 'digits', 'cifar10', 'mnist'.")


def get_dataset(name_or_path=None, *, ndim=None, n_train=None, n_test=None, seed=0, dtype=None,
                announce=True, print_fn=None):
    """Load a dataset for a training script: ``(train, test, info)``.

    ``name_or_path``: ``'synthetic'`` (the default, also via ``$HANDSON_DATASET``), ``'digits'``,
    ``'cifar10'`` (first of :func:`find_cifar10` in :func:`data_dir`), ``'mnist'``
    (``data_dir()/mnist``), or a path (tarball, ``cifar-10-batches-py`` folder,
    ``*.pickle.gz``, MNIST folder). ``ndim`` defaults to 3 for CIFAR-like data and 1 for
    MNIST / digits (as Chainer's getters do). ``n_train`` / ``n_test`` size the synthetic set and
    take a stratified ``seed``-ed subset of real ones. With ``announce`` (default) one line
    saying what was loaded goes to ``print_fn`` (default: ``print``, flushed); pass
    ``announce=False`` on MPI ranks other than 0.
    """
    if name_or_path is None:
        name_or_path = os.environ.get("HANDSON_DATASET") or "synthetic"
    spec = os.fspath(name_or_path)
    key = spec.strip().lower()
    subset_note = ""

    if key in ("synthetic", "synthetic-cifar", "synthetic_cifar", "synthetic-cifar10"):
        nt = DEFAULT_SYNTHETIC_TRAIN if n_train is None else n_train
        ne = DEFAULT_SYNTHETIC_TEST if n_test is None else n_test
        train, test = synthetic_cifar(nt, ne, seed=seed, ndim=3 if ndim is None else ndim,
                                      dtype=dtype)
        name, is_real, source = "synthetic", False, None
        class_names = tuple(f"pattern{i}" for i in range(10))
    elif key in ("digits", "sklearn-digits"):
        train, test = digits(ndim=1 if ndim is None else ndim, seed=seed, dtype=dtype)
        name, is_real, source = "digits", True, None
        class_names = tuple(str(i) for i in range(10))
    else:
        if key in ("cifar10", "cifar-10"):
            path = find_cifar10()
            if path is None:
                raise _cifar_missing(data_dir() / CIFAR10_TARBALL,
                                     what=f"CIFAR-10 ({default_pickle_name()}, {CIFAR10_TARBALL} "
                                          f"or {CIFAR10_DIRNAME}/)")
            kind = "cifar_pickle" if path.name.endswith(".pickle.gz") else "cifar10"
            shown = str(path)
        elif key == "mnist":
            path, kind, shown = data_dir() / "mnist", "mnist", str(data_dir() / "mnist")
        else:
            path, shown = Path(spec).expanduser(), spec
            if not path.exists():
                lowered = path.name.lower()
                if "mnist" in lowered or "ubyte" in lowered:
                    raise _mnist_missing(path)
                if lowered.endswith((".pickle.gz", ".pkl.gz", ".pickle", ".pkl")):
                    raise _pickle_missing(path)
                raise _cifar_missing(path)
            if path.is_dir() and not (path / CIFAR10_DIRNAME).is_dir() \
                    and not (path / "data_batch_1").is_file() and find_cifar10(path) is not None:
                path = find_cifar10(path)   # a data folder holding the pickle or the tarball
                shown = str(path)
            kind = _kind_of_path(path)
        if kind == "cifar_pickle":
            train, test, meta = load_cifar_pickle(path, ndim=3 if ndim is None else ndim,
                                                  dtype=dtype)
            name, class_names = "cifar10", tuple(meta.get("class_names") or CIFAR10_CLASSES)
        elif kind == "cifar10":
            train, test = load_cifar10(path, ndim=3 if ndim is None else ndim, dtype=dtype)
            name, class_names = "cifar10", CIFAR10_CLASSES
        else:
            train, test = load_mnist(path, ndim=1 if ndim is None else ndim, dtype=dtype)
            name, class_names = "mnist", tuple(str(i) for i in range(10))
        is_real, source = True, str(path)
    if name != "synthetic":   # n_train / n_test pick a stratified subset of real data
        n_full = (len(train), len(test))
        train, test = _subset(train, n_train, seed), _subset(test, n_test, seed)
        if (len(train), len(test)) != n_full:
            subset_note = f" (subset: {len(train)} train / {len(test)} test, seed {seed})"

    n_class = len(class_names)
    shape = tuple(train._datasets[0].shape[1:])
    dims = "x".join(map(str, shape))
    if name == "synthetic":
        line = (f"Using synthetic CIFAR-shaped data (offline stand-in, NOT CIFAR-10): "
                f"{len(train)} train / {len(test)} test, {dims}, {n_class} classes")
    elif name == "digits":
        line = (f"Using scikit-learn digits (real 8x8 handwritten digits, offline; NOT MNIST): "
                f"{len(train)} train / {len(test)} test, {dims}, {n_class} classes{subset_note}")
    elif name == "cifar10":
        line = f"Using CIFAR10 dataset: {shown}{subset_note}"
    else:
        line = f"Using MNIST dataset: {shown}{subset_note}"
    info = DatasetInfo(name=name, description=line, n_train=len(train), n_test=len(test),
                       shape=tuple(shape), n_class=n_class, is_real=is_real, source=source,
                       class_names=tuple(class_names))
    if announce:
        _say(print_fn)(line)
    return train, test, info


# --------------------------------------------------------------------------------------------
# handson data prepare


def _resize_numpy(images, size):
    """Bilinear resize (N, C, h, w) uint8 -> (N, C, size, size) uint8, pixel centres aligned.

    Used only when Pillow is missing; matches PIL's bilinear filter when enlarging.
    """
    n, c, h, w = images.shape

    def axis(src, dst):
        pos = np.clip((np.arange(dst) + 0.5) * src / dst - 0.5, 0, src - 1)
        i0 = np.floor(pos).astype(int)
        i1 = np.minimum(i0 + 1, src - 1)
        return i0, i1, (pos - i0).astype(np.float32)

    r0, r1, rw = axis(h, size)
    c0, c1, cw = axis(w, size)
    x = images.astype(np.float32)
    rows = x[:, :, r0, :] * (1 - rw)[:, None] + x[:, :, r1, :] * rw[:, None]
    out = rows[..., c0] * (1 - cw) + rows[..., c1] * cw
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _resize_all(images, size, label, say, chunk=256):
    """Resize (N, 3, h, w) uint8 to size x size, printing a progress counter."""
    n = len(images)
    if images.shape[2:] == (size, size):
        return np.ascontiguousarray(images), "none (already that size)"
    try:
        from PIL import Image
        bilinear = getattr(Image, "Resampling", Image).BILINEAR
    except ImportError:
        Image = None
    out = np.empty((n, images.shape[1], size, size), dtype=np.uint8)
    step = max(1, n // 10)
    for i in range(n):
        if Image is None:
            if i % chunk == 0:
                out[i:i + chunk] = _resize_numpy(images[i:i + chunk], size)
        else:
            img = Image.fromarray(np.ascontiguousarray(images[i].transpose(1, 2, 0)))
            out[i] = np.asarray(img.resize((size, size), bilinear)).transpose(2, 0, 1)
        if (i + 1) % step == 0 or i + 1 == n:
            say(f"  resizing {label}: {i + 1}/{n}")
    return out, "PIL bilinear" if Image is not None else "numpy bilinear"


def prepare_cifar_pickle(cifar, out, size=256, fraction=0.05, test_fraction=None, seed=0,
                         print_fn=None):
    """Build a ``cifar10_<size>px_<pct>p.pickle.gz`` from the official CIFAR-10 python version.

    Stratified ``fraction`` of the 50,000 training and ``test_fraction`` (default: ``fraction``)
    of the 10,000 test images, drawn with ``numpy.random.RandomState(seed)``, resized to
    ``size`` x ``size`` with PIL's bilinear filter, stored as uint8 (format in the module
    docstring). The file is written to ``out + '.part'`` first and renamed when complete.
    Returns a summary dict (path, n_train, n_test, shape, bytes, seconds).
    """
    say = _say(print_fn)
    if not 0 < fraction <= 1:
        raise ValueError(f"--fraction must be in (0, 1], got {fraction}")
    test_fraction = fraction if test_fraction is None else test_fraction
    if not 0 < test_fraction <= 1:
        raise ValueError(f"--test-fraction must be in (0, 1], got {test_fraction}")
    if not 1 <= size <= 4096:
        raise ValueError(f"--size must be between 1 and 4096 pixels, got {size}")
    t0 = time.time()
    cifar, out = Path(cifar).expanduser(), Path(out).expanduser()
    say(f"Reading {cifar}")
    raw = load_cifar10_arrays(cifar)
    parts, meta = {}, {}
    for split, frac, stream in (("train", fraction, 0), ("test", test_fraction, 1)):
        x, y = raw[f"{split}_x"], raw[f"{split}_y"]
        k = max(1, int(round(frac * len(y))))
        # one RandomState per split so that --test-fraction does not change the training subset
        idx = _stratified_indices(y, k, np.random.RandomState([seed, stream]))
        say(f"  {split}: {len(idx)} of {len(y)} images (stratified, seed {seed})")
        resized, how = _resize_all(x[idx], size, split, say)
        parts[split] = (resized, y[idx].astype(np.int32))
        meta[f"{split}_index"] = [int(i) for i in idx]
    meta.update({
        "format_version": PICKLE_FORMAT_VERSION, "source": cifar.name, "size": int(size),
        "fraction": float(fraction), "test_fraction": float(test_fraction), "seed": int(seed),
        "subset": "stratified", "resize": how, "class_names": list(raw["class_names"]),
    })
    obj = {"train": parts["train"], "test": parts["test"], "meta": meta}
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(out.name + ".part")
    say(f"  writing {out}")
    try:
        with gzip.open(part, "wb", compresslevel=6) as f:
            pickle.dump(obj, f, protocol=5)
        os.replace(part, out)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    summary = {"path": str(out), "n_train": len(parts["train"][1]),
               "n_test": len(parts["test"][1]), "shape": tuple(parts["train"][0].shape[1:]),
               "bytes": out.stat().st_size, "seconds": time.time() - t0,
               "uncompressed_bytes": sum(p[0].nbytes for p in parts.values())}
    return summary


def add_prepare_arguments(parser):
    """Options of ``handson data prepare`` (argparse)."""
    parser.add_argument("--cifar", metavar="PATH", default=None,
                        help=f"the official {CIFAR10_TARBALL} (or its extracted {CIFAR10_DIRNAME} "
                             f"folder); default: look in the data folder "
                             f"($HANDSON_DATA_DIR or <course>/data)")
    parser.add_argument("--size", type=int, default=256,
                        help="side of the resized square images in pixels (default 256, as the "
                             "seed's cifar10_256px_5p)")
    parser.add_argument("--fraction", type=float, default=0.05,
                        help="share of the 50,000 training images to keep, stratified per class "
                             "(default 0.05: 2,500 images)")
    parser.add_argument("--test-fraction", type=float, default=None,
                        help="share of the 10,000 test images (default: same as --fraction)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random subset (default 0)")
    parser.add_argument("--out", metavar="PATH", default=None,
                        help="output file (default: <data folder>/cifar10_<size>px_<pct>p.pickle.gz)")
    return parser


def prepare_main(args):
    """``handson data prepare``: returns the exit code (0 ok, 2 bad input or data)."""
    cifar = args.cifar
    if cifar is None:
        d = data_dir()
        for candidate in (d / CIFAR10_TARBALL, d / CIFAR10_DIRNAME):
            if candidate.exists():
                cifar = candidate
                break
        else:
            print(f"handson data prepare: {_cifar_missing(d / CIFAR10_TARBALL)}", file=sys.stderr)
            return 2
    out = args.out or data_dir() / default_pickle_name(args.size, args.fraction)
    try:
        s = prepare_cifar_pickle(cifar, out, size=args.size, fraction=args.fraction,
                                 test_fraction=args.test_fraction, seed=args.seed)
    except (DatasetError, ValueError) as exc:
        print(f"handson data prepare: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"handson data prepare: cannot write {out}: {_describe_exc(exc)}", file=sys.stderr)
        return 1
    mb = s["bytes"] / 1e6
    shape = "x".join(map(str, s["shape"]))
    print(f"Wrote {s['path']}: {s['n_train']} train + {s['n_test']} test images, {shape} uint8, "
          f"{mb:.1f} MB ({s['uncompressed_bytes'] / 1e6:.1f} MB uncompressed) in "
          f"{s['seconds']:.1f} s", flush=True)
    print(f"Load it with --dataset {s['path']}  (prints: Using CIFAR10 dataset: {s['path']})",
          flush=True)
    return 0
