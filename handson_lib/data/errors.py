"""Dataset errors, and the messages that say what to fetch, from where, and where to put it."""

from __future__ import annotations

from pathlib import Path

from handson_lib.data.sources import (CIFAR10_TARBALL, CIFAR10_URL, MNIST_FILES, MNIST_URLS,
                                      OFFLINE_HINT, data_dir, default_pickle_name)


class DatasetError(Exception):
    """A dataset could not be loaded; the message says why and what to do."""


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """The dataset file is not there; the message says what to fetch and where to put it."""


class DatasetCorruptError(DatasetError):
    """The file is there but unreadable (truncated, wrong format, wrong sizes)."""


def cifar_missing(path, what="CIFAR-10") -> DatasetNotFoundError:
    path = Path(path)
    target = path if path.name.endswith((".tar.gz", ".tgz")) else data_dir() / CIFAR10_TARBALL
    return DatasetNotFoundError(
        f"{what} not found at {path}. Fetch {CIFAR10_TARBALL} (the 'CIFAR-10 python version', "
        f"163 MB) from {CIFAR10_URL} {OFFLINE_HINT}, put it at {target} (or pass --dataset PATH), "
        f"then run `handson data prepare --cifar {target}` to build the smaller "
        f"{default_pickle_name()}. Offline, `--dataset synthetic` (CIFAR-shaped stand-in) or "
        f"`--dataset digits` (real 8x8 digits) run without any download.")


def pickle_missing(path) -> DatasetNotFoundError:
    path = Path(path)
    tarball = data_dir() / CIFAR10_TARBALL
    return DatasetNotFoundError(
        f"CIFAR-10 pickle not found at {path}. Build it on a machine with the official tarball "
        f"(on a cluster: the login node; compute nodes are offline): fetch {CIFAR10_TARBALL} from "
        f"{CIFAR10_URL}, put it at {tarball}, then run `handson data prepare --cifar {tarball} "
        f"--out {path}` (add --size/--fraction to match the name), or pass --dataset with the "
        f"tarball itself.")


def mnist_missing(path, missing=()) -> DatasetNotFoundError:
    names = ", ".join(f"{n}.gz" for n in MNIST_FILES.values())
    detail = f" (missing: {', '.join(missing)})" if missing else ""
    return DatasetNotFoundError(
        f"MNIST not found at {path}{detail}. Fetch the four idx files {names} from "
        f"{' or '.join(MNIST_URLS)} {OFFLINE_HINT} and put them in the folder {path} "
        f"(gzipped or not), or pass --dataset digits for the real 8x8 digits bundled with "
        f"scikit-learn.")


def corrupt(path, what, problem, refetch) -> DatasetCorruptError:
    return DatasetCorruptError(
        f"{path} is not a valid {what}: {problem}. The file is probably truncated or damaged "
        f"(an interrupted download or copy). {refetch}")


def cifar_refetch(path):
    return (f"Delete it and download {CIFAR10_TARBALL} again from {CIFAR10_URL} "
            f"{OFFLINE_HINT}, and put it at {path}.")


def describe_exc(exc):
    """`Type: message` of an exception, the whole message (it goes into a DatasetError)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
