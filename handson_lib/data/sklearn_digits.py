"""The real 8x8 handwritten digits bundled with scikit-learn: real data that needs no download.

Chainer is imported inside the function (the ``handson`` command line imports this package), and
scikit-learn not at all: its file is read as `load_digits` reads it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from handson_lib.data.arrays import reshape, stratified_indices, tuple_dataset


def digits(ndim=1, seed=0, test_fraction=0.2, dtype=None):
    """(train, test) from scikit-learn's real 8x8 handwritten digits (1,797 images, offline).

    Pixels have 17 gray levels 0..16, scaled to [0, 1]; ``ndim`` 1: (64,), 2: (8, 8),
    3: (1, 8, 8); labels int32. The test set is a stratified ``round(test_fraction * 1797)``
    images drawn with ``numpy.random.RandomState(seed)``; the rest is the training set.
    """
    import chainer
    data, target = _digits_arrays()
    images = (data.astype(np.float64) / 16.0).astype(chainer.get_dtype(dtype))
    labels = target.astype(np.int32)
    test_idx = stratified_indices(labels, round(test_fraction * len(labels)),
                                  np.random.RandomState(seed))
    is_test = np.zeros(len(labels), dtype=bool)
    is_test[test_idx] = True
    images = reshape(images, ndim, (1, 8, 8), allowed=(1, 2, 3), what="digits")
    return (tuple_dataset(images[~is_test], labels[~is_test]),
            tuple_dataset(images[is_test], labels[is_test]))


def _digits_arrays():
    """(data (1797, 64), target (1797,)): scikit-learn's `load_digits()`, read from the file it
    ships without importing scikit-learn (its import cost about a quarter of a CPU-second in
    every rank and grader process that loads the digits); through `load_digits` where the file
    is not found."""
    import gzip
    import importlib.util
    spec = importlib.util.find_spec("sklearn")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            with gzip.open(path, mode="rt", encoding="utf-8") as f:
                table = np.loadtxt(f, delimiter=",")
            return table[:, :-1], table[:, -1].astype(int, copy=False)
    from sklearn.datasets import load_digits
    bunch = load_digits()
    return bunch.data, bunch.target
