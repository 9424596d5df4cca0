"""Where each dataset comes from: the official URLs and file names, and the course's data folder."""

from __future__ import annotations

from pathlib import Path

import handson_lib
from handson_lib import settings

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar.html"
CIFAR10_TARBALL = "cifar-10-python.tar.gz"
CIFAR10_DIRNAME = "cifar-10-batches-py"
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer",
                   "dog", "frog", "horse", "ship", "truck")
CIFAR_TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))

MNIST_URLS = ("https://ossci-datasets.s3.amazonaws.com/mnist/ (mirror)",
              "http://yann.lecun.com/exdb/mnist/ (original)")
MNIST_FILES = {  # role: official file name without .gz
    "train_x": "train-images-idx3-ubyte", "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte", "test_y": "t10k-labels-idx1-ubyte",
}

OFFLINE_HINT = ("on a machine with internet (on a cluster: the login node; compute nodes are "
                "offline)")


def data_dir() -> Path:
    """Where the course looks for data files: ``$HANDSON_DATA_DIR`` or ``<course root>/data``."""
    env = settings.current().data_dir
    if env:
        return Path(env).expanduser()
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
