"""The one entry point of the training scripts: ``get_dataset(name_or_path)`` and what it loaded."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from handson_lib.data.arrays import stratified_subset
from handson_lib.data.cifar import load_cifar10
from handson_lib.data.cifar_pickle import load_cifar_pickle
from handson_lib.data.errors import DatasetError, cifar_missing, mnist_missing, pickle_missing
from handson_lib import messages, settings
from handson_lib.messages import tr
from handson_lib.data.mnist import load_mnist, mnist_file
from handson_lib.data.sklearn_digits import digits
from handson_lib.data.sources import (CIFAR10_CLASSES, CIFAR10_DIRNAME, CIFAR10_TARBALL,
                                      MNIST_FILES, data_dir, default_pickle_name, find_cifar10)
from handson_lib.data.synthetic import DEFAULT_SYNTHETIC_TEST, DEFAULT_SYNTHETIC_TRAIN, synthetic_cifar

SYNTHETIC_NAMES = ("synthetic", "synthetic-cifar", "synthetic_cifar", "synthetic-cifar10")
DIGITS_NAMES = ("digits", "sklearn-digits")
CIFAR10_NAMES = ("cifar10", "cifar-10")
_PICKLE_SUFFIXES = (".pickle.gz", ".pkl.gz", ".pickle", ".pkl")
_DIGIT_CLASSES = tuple(str(i) for i in range(10))


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """What :func:`get_dataset` loaded. ``announcement`` is the line it announces, in the reader's
    language (HANDSON_LANG); ``description`` is the same line in English, what records keep."""

    name: str                 # 'synthetic', 'digits', 'cifar10', 'mnist'
    description: str
    n_train: int
    n_test: int
    shape: tuple              # shape of one image as returned, e.g. (3, 32, 32); flat: (3072,)
    n_class: int
    is_real: bool             # False only for the synthetic stand-in
    source: str | None = None  # the file or folder read, None for generated data
    class_names: tuple = ()
    announcement: str | None = None   # None: the description

    def __post_init__(self):
        if self.announcement is None:
            object.__setattr__(self, "announcement", self.description)

    def __str__(self):
        return self.description


def announcer(print_fn):
    """`print_fn`, or a print that flushes (the line must show before a long run starts)."""
    if print_fn is None:
        return lambda line: print(line, flush=True)
    return print_fn


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
        name_or_path = settings.current().dataset or "synthetic"
    spec = os.fspath(name_or_path)
    key = spec.strip().lower()
    source = shown = None
    if key in SYNTHETIC_NAMES:
        train, test = synthetic_cifar(DEFAULT_SYNTHETIC_TRAIN if n_train is None else n_train,
                                      DEFAULT_SYNTHETIC_TEST if n_test is None else n_test,
                                      seed=seed, ndim=3 if ndim is None else ndim, dtype=dtype)
        name, class_names = "synthetic", tuple(f"pattern{i}" for i in range(10))
    elif key in DIGITS_NAMES:
        train, test = digits(ndim=1 if ndim is None else ndim, seed=seed, dtype=dtype)
        name, class_names = "digits", _DIGIT_CLASSES
    else:
        path, kind, shown = _locate(spec, key)
        train, test, name, class_names = _load_real(path, kind, ndim, dtype)
        source = str(path)
    subset_seed = None
    if name != "synthetic":   # n_train / n_test pick a stratified subset of real data
        n_full = (len(train), len(test))
        train, test = stratified_subset(train, n_train, seed), stratified_subset(test, n_test, seed)
        if (len(train), len(test)) != n_full:
            subset_seed = seed
    shape = tuple(train._datasets[0].shape[1:])
    line = (name, train, test, shape, class_names, shown, subset_seed)
    with messages.in_english():
        description = _announcement(*line)
    info = DatasetInfo(name=name, description=description,
                       n_train=len(train), n_test=len(test), shape=shape, n_class=len(class_names),
                       is_real=name != "synthetic", source=source, class_names=tuple(class_names),
                       announcement=_announcement(*line))
    if announce:
        announcer(print_fn)(info.announcement)
    return train, test, info


def _locate(spec, key):
    """(path, kind, shown) of a real dataset named 'cifar10' / 'mnist' or given as a path.

    kind: 'cifar_pickle', 'cifar10' or 'mnist'; shown: how the announcement names it.
    DatasetNotFoundError says what to fetch when nothing is there."""
    if key in CIFAR10_NAMES:
        path = find_cifar10()
        if path is None:
            raise cifar_missing(data_dir() / CIFAR10_TARBALL,
                                what=tr("CIFAR-10 ({pickle}, {tarball} or {folder}/)", pickle=default_pickle_name(),
                                        tarball=CIFAR10_TARBALL, folder=CIFAR10_DIRNAME))
        return path, "cifar_pickle" if path.name.endswith(".pickle.gz") else "cifar10", str(path)
    if key == "mnist":
        return data_dir() / "mnist", "mnist", str(data_dir() / "mnist")
    path, shown = Path(spec).expanduser(), spec
    if not path.exists():
        lowered = path.name.lower()
        if "mnist" in lowered or "ubyte" in lowered:
            raise mnist_missing(path)
        if lowered.endswith(_PICKLE_SUFFIXES):
            raise pickle_missing(path)
        raise cifar_missing(path)
    if path.is_dir() and not (path / CIFAR10_DIRNAME).is_dir() \
            and not (path / "data_batch_1").is_file() and find_cifar10(path) is not None:
        path = find_cifar10(path)   # a data folder holding the pickle or the tarball
        shown = str(path)
    return path, _kind_of_path(path), shown


def _kind_of_path(path):
    name = path.name.lower()
    if path.is_dir():
        if (path / CIFAR10_DIRNAME).is_dir() or (path / "data_batch_1").is_file():
            return "cifar10"
        if any(mnist_file(path, stem) for stem in MNIST_FILES.values()) or "mnist" in name:
            return "mnist"
        raise DatasetError(tr(
            "{path} is a folder but holds neither CIFAR-10 ({folder}/ or data_batch_1 ...) nor the MNIST "
            "idx files ({names}). Pass the file itself: {tarball}, a cifar10_<size>px_<pct>p.pickle.gz, or "
            "an MNIST folder; or 'synthetic' / 'digits'.", path=path, folder=CIFAR10_DIRNAME,
            names=", ".join(MNIST_FILES.values()), tarball=CIFAR10_TARBALL))
    if name.endswith(_PICKLE_SUFFIXES):
        return "cifar_pickle"
    if name.endswith((".tar.gz", ".tgz", ".tar")):
        return "cifar10"
    if "mnist" in name:
        return "mnist"
    raise DatasetError(tr(
        "do not know how to read {path}: expected {tarball} (or a .tar.gz of it), its extracted {folder} "
        "folder, a cifar10_<size>px_<pct>p.pickle.gz, or a folder with the MNIST idx files; or the names "
        "'synthetic', 'digits', 'cifar10', 'mnist'.", path=path, tarball=CIFAR10_TARBALL, folder=CIFAR10_DIRNAME))


def _load_real(path, kind, ndim, dtype):
    """(train, test, name, class_names) of a file of `kind` (see `_locate`)."""
    if kind == "cifar_pickle":
        train, test, meta = load_cifar_pickle(path, ndim=3 if ndim is None else ndim, dtype=dtype)
        return train, test, "cifar10", tuple(meta.get("class_names") or CIFAR10_CLASSES)
    if kind == "cifar10":
        train, test = load_cifar10(path, ndim=3 if ndim is None else ndim, dtype=dtype)
        return train, test, "cifar10", CIFAR10_CLASSES
    train, test = load_mnist(path, ndim=1 if ndim is None else ndim, dtype=dtype)
    return train, test, "mnist", _DIGIT_CLASSES


def _announcement(name, train, test, shape, class_names, shown, subset_seed):
    """The line a training script prints, in the reader's language (in English within
    messages.in_english()); real CIFAR-10 and MNIST keep the seed's `Using CIFAR10 dataset` in every language.
    `subset_seed`: the seed of the stratified subset taken, None for the whole dataset."""
    sizes = dict(n_train=len(train), n_test=len(test), shape='x'.join(map(str, shape)),
                 n_class=len(class_names))
    subset_note = ""
    if subset_seed is not None:
        subset_note = f" (subset: {len(train)} train / {len(test)} test, seed {subset_seed})"
    if name == "synthetic":
        return tr("Using synthetic CIFAR-shaped data (offline stand-in, NOT CIFAR-10): {n_train} train / "
                  "{n_test} test, {shape}, {n_class} classes", **sizes)
    if name == "digits":
        if subset_seed is not None:
            return tr("Using scikit-learn digits (real 8x8 handwritten digits, offline; NOT MNIST): "
                      "{n_train} train / {n_test} test, {shape}, {n_class} classes (subset: {n_train} "
                      "train / {n_test} test, seed {seed})", seed=subset_seed, **sizes)
        return tr("Using scikit-learn digits (real 8x8 handwritten digits, offline; NOT MNIST): "
                  "{n_train} train / {n_test} test, {shape}, {n_class} classes", **sizes)
    if name == "cifar10":
        return f"Using CIFAR10 dataset: {shown}{subset_note}"
    return f"Using MNIST dataset: {shown}{subset_note}"
