"""Arrays to Chainer datasets as Chainer's getters return them, and stratified subsets.

Chainer is imported inside the functions: the ``handson`` command line imports this package.
"""

from __future__ import annotations

import numpy as np


def float_images(images, dtype):
    """uint8 -> float in [0, 1], the same arithmetic as chainer.datasets.get_cifar10()."""
    import chainer
    out = images.astype(chainer.get_dtype(dtype))
    out *= 1.0 / 255.0
    return out


def reshape(images, ndim, full_shape, allowed=(1, 3), what="this dataset"):
    """Images shaped as Chainer's getters' ``ndim`` does: flat (1), (H, W) (2) or (C, H, W) (3)."""
    n = len(images)
    if ndim not in allowed:
        raise ValueError(f"ndim must be one of {allowed} for {what}, got {ndim!r}")
    if ndim == 1:
        return images.reshape(n, -1)
    if ndim == 2:
        return images.reshape((n,) + tuple(full_shape[-2:]))
    return images.reshape((n,) + tuple(full_shape))


def tuple_dataset(images, labels):
    from chainer.datasets import TupleDataset
    return TupleDataset(images, np.asarray(labels).astype(np.int32))


def stratified_indices(labels, n_select, rng):
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


def stratified_subset(dataset, n, seed):
    """A stratified seeded subset of a TupleDataset (n None or >= len: unchanged)."""
    if n is None or n >= len(dataset):
        return dataset
    x, y = dataset._datasets
    idx = stratified_indices(y, n, np.random.RandomState(seed))
    return tuple_dataset(x[idx], y[idx])
