"""Dataset errors, and the messages that say what to fetch, from where, and where to put it."""

from __future__ import annotations

from pathlib import Path

from handson_lib.messages import tr
from handson_lib.data.sources import (CIFAR10_TARBALL, CIFAR10_URL, MNIST_FILES, MNIST_URLS, data_dir,
                                      default_pickle_name)


def offline_hint():
    """Where to download (sources.OFFLINE_HINT, in the reader's language)."""
    return tr("on a machine with internet (on a cluster: the login node; compute nodes are offline)")


class DatasetError(Exception):
    """A dataset could not be loaded; the message says why and what to do."""


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """The dataset file is not there; the message says what to fetch and where to put it."""


class DatasetCorruptError(DatasetError):
    """The file is there but unreadable (truncated, wrong format, wrong sizes)."""


def cifar_missing(path, what=None) -> DatasetNotFoundError:
    """`what`: the dataset looked for (default: CIFAR-10)."""
    path = Path(path)
    target = path if path.name.endswith((".tar.gz", ".tgz")) else data_dir() / CIFAR10_TARBALL
    return DatasetNotFoundError(tr(
        "{what} not found at {path}. Fetch {tarball} (the 'CIFAR-10 python version', 163 MB) from {url} "
        "{offline}, put it at {target} (or pass --dataset PATH), then run `handson data prepare --cifar "
        "{target}` to build the smaller {pickle}. Offline, `--dataset synthetic` (CIFAR-shaped stand-in) "
        "or `--dataset digits` (real 8x8 digits) run without any download.",
        what=what or "CIFAR-10", path=path, tarball=CIFAR10_TARBALL, url=CIFAR10_URL, offline=offline_hint(),
        target=target, pickle=default_pickle_name()))


def pickle_missing(path) -> DatasetNotFoundError:
    path = Path(path)
    tarball = data_dir() / CIFAR10_TARBALL
    return DatasetNotFoundError(tr(
        "CIFAR-10 pickle not found at {path}. Build it on a machine with the official tarball (on a "
        "cluster: the login node; compute nodes are offline): fetch {name} from {url}, put it at "
        "{tarball}, then run `handson data prepare --cifar {tarball} --out {path}` (add --size/--fraction "
        "to match the name), or pass --dataset with the tarball itself.",
        path=path, name=CIFAR10_TARBALL, url=CIFAR10_URL, tarball=tarball))


def mnist_missing(path, missing=()) -> DatasetNotFoundError:
    names = ", ".join(f"{n}.gz" for n in MNIST_FILES.values())
    fields = dict(path=path, names=names, urls=tr(" or ").join(MNIST_URLS), offline=offline_hint())
    if missing:
        return DatasetNotFoundError(tr(
            "MNIST not found at {path} (missing: {missing}). Fetch the four idx files {names} from {urls} "
            "{offline} and put them in the folder {path} (gzipped or not), or pass --dataset digits for "
            "the real 8x8 digits bundled with scikit-learn.", missing=", ".join(missing), **fields))
    return DatasetNotFoundError(tr(
        "MNIST not found at {path}. Fetch the four idx files {names} from {urls} {offline} and put them "
        "in the folder {path} (gzipped or not), or pass --dataset digits for the real 8x8 digits bundled "
        "with scikit-learn.", **fields))


def corrupt(path, what, problem, refetch) -> DatasetCorruptError:
    """`what`, `problem` and `refetch` already in the reader's language."""
    return DatasetCorruptError(tr(
        "{path} is not a valid {what}: {problem}. The file is probably truncated or damaged (an "
        "interrupted download or copy). {refetch}", path=path, what=what, problem=problem, refetch=refetch))


def cifar_refetch(path):
    return tr("Delete it and download {tarball} again from {url} {offline}, and put it at {path}.",
              tarball=CIFAR10_TARBALL, url=CIFAR10_URL, offline=offline_hint(), path=path)


def describe_exc(exc):
    """`Type: message` of an exception, the whole message (it goes into a DatasetError)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
