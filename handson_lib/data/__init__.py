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
  (:func:`load_cifar10`), a ``cifar10_<size>px_<pct>p.pickle.gz`` (:func:`load_cifar_pickle`; the
  format is described in :mod:`handson_lib.data.cifar_pickle`), or a folder holding the four
  MNIST idx files (:func:`load_mnist`).

Images come back like ``chainer.datasets.get_cifar10()`` / ``get_mnist()`` return them:
``TupleDataset`` of (image, label), images float32 (``chainer.config.dtype``) scaled to [0, 1],
labels int32.

Errors: :class:`DatasetNotFoundError` (also a ``FileNotFoundError``) says what to fetch, from
where, and where to put it; :class:`DatasetCorruptError` names the file and what is wrong with it
(truncated gzip, bad tar, bad pickle, wrong array sizes, wrong idx magic number). Both are
:class:`DatasetError`.

Modules: ``sources`` (URLs, file names, the data folder), ``errors``, ``reading`` (gzip and
restricted unpickling), ``arrays`` (to Chainer datasets, stratified subsets), ``cifar``,
``cifar_pickle``, ``mnist``, ``synthetic``, ``sklearn_digits``, ``dataset`` (:func:`get_dataset`),
``prepare`` (``handson data prepare``). The names below are the package's API.

This package imports neither Chainer nor scikit-learn nor Pillow at import time: the ``handson``
command line imports it to build its parser.
"""

from handson_lib.data.cifar import load_cifar10, load_cifar10_arrays
from handson_lib.data.cifar_pickle import load_cifar_pickle
from handson_lib.data.dataset import DatasetInfo, get_dataset
from handson_lib.data.errors import DatasetCorruptError, DatasetError, DatasetNotFoundError
from handson_lib.data.mnist import load_mnist, load_mnist_arrays
from handson_lib.data.prepare import add_prepare_arguments, prepare_cifar_pickle, prepare_main
from handson_lib.data.sklearn_digits import digits
from handson_lib.data.sources import (CIFAR10_CLASSES, CIFAR10_DIRNAME, CIFAR10_TARBALL,
                                      CIFAR10_URL, MNIST_URLS, data_dir, default_pickle_name,
                                      find_cifar10)
from handson_lib.data.synthetic import (DEFAULT_SYNTHETIC_TEST, DEFAULT_SYNTHETIC_TRAIN,
                                        synthetic_cifar)

__all__ = [
    "CIFAR10_CLASSES", "CIFAR10_DIRNAME", "CIFAR10_TARBALL", "CIFAR10_URL", "MNIST_URLS",
    "DEFAULT_SYNTHETIC_TRAIN", "DEFAULT_SYNTHETIC_TEST",
    "DatasetError", "DatasetNotFoundError", "DatasetCorruptError", "DatasetInfo",
    "get_dataset", "load_cifar10", "load_cifar10_arrays", "load_cifar_pickle", "load_mnist",
    "load_mnist_arrays", "synthetic_cifar", "digits", "data_dir", "find_cifar10",
    "default_pickle_name", "prepare_cifar_pickle", "add_prepare_arguments", "prepare_main",
]
