"""handson_lib.data: real loaders on tiny files written in the official formats, offline stand-ins,
`handson data prepare` end to end, and the error messages."""

import gzip
import io
import os
import pickle
import struct
import subprocess
import sys
import tarfile
import time
from argparse import Namespace

import numpy as np
import pytest

from handson_lib import data
from handson_lib.data import prepare, synthetic
from handson_lib.data.cifar_pickle import load_pickle_arrays

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


# ---------------------------------------------------------------------------------------------
# writers of the official formats


class Py2Pickler(pickle._Pickler):
    """Writes str and bytes as Python 2's cPickle did (BINSTRING): how the official files were made."""

    dispatch = pickle._Pickler.dispatch.copy()

    def _binstring(self, raw):
        if len(raw) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(raw)]) + raw)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(raw)) + raw)

    def save_bytes(self, obj):
        self._binstring(obj)
        self.memoize(obj)

    def save_str(self, obj):
        self._binstring(obj.encode("latin-1"))
        self.memoize(obj)

    dispatch[bytes] = save_bytes
    dispatch[str] = save_str


def py2_dumps(obj):
    f = io.BytesIO()
    Py2Pickler(f, protocol=2).dump(obj)
    return f.getvalue()


def cifar_batches(n_per_batch=4, n_test=4, seed=0):
    """{member name: dict} as in cifar-10-python.tar.gz: bytes keys, uint8 (N, 3072), list labels.

    Every image is a constant colour (R, G, B) derived from its global index, except image 0 of
    data_batch_1, which is black with three planted pixels.
    """
    rng = np.random.RandomState(seed)
    batches, index = {}, 0
    for name, n in [(f"data_batch_{i}", n_per_batch) for i in range(1, 6)] + [("test_batch", n_test)]:
        rows = np.empty((n, 3072), dtype=np.uint8)
        for j in range(n):
            rgb = (index % 256, (7 * index + 3) % 256, (13 * index + 5) % 256)
            rows[j] = np.repeat(np.array(rgb, dtype=np.uint8), 1024)
            index += 1
        labels = [int(v) for v in rng.randint(0, 10, n)]
        batches[name] = {b"batch_label": name.encode(), b"labels": labels, b"data": rows,
                         b"filenames": [f"img_{name}_{j}.png".encode() for j in range(n)]}
    planted = batches["data_batch_1"][b"data"][0]
    planted[:] = 0
    planted[0 * 1024 + 1 * 32 + 2] = 255   # R plane, y=1, x=2
    planted[1 * 1024 + 3 * 32 + 4] = 128   # G plane, y=3, x=4
    planted[2 * 1024 + 31 * 32 + 0] = 51   # B plane, y=31, x=0
    batches["batches.meta"] = {b"label_names": [c.encode() for c in CLASSES],
                               b"num_cases_per_batch": n_per_batch, b"num_vis": 3072}
    return batches


def write_cifar_tarball(path, batches, drop=(), replace=None):
    replace = replace or {}
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("cifar-10-batches-py")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        for name, d in batches.items():
            if name in drop:
                continue
            blob = replace.get(name, py2_dumps(d))
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return path


def write_cifar_dir(root, batches):
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name, d in batches.items():
        (folder / name).write_bytes(pickle.dumps(d, protocol=2))   # a Python 3 re-pickle
    return folder


def idx_bytes(array, magic):
    array = np.asarray(array, dtype=np.uint8)
    return struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def write_mnist(folder, n_train=5, n_test=3, gz=True, seed=0):
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.RandomState(seed)
    arrays = {"train_x": rng.randint(0, 256, (n_train, 28, 28)).astype(np.uint8),
              "train_y": rng.randint(0, 10, n_train).astype(np.uint8),
              "test_x": rng.randint(0, 256, (n_test, 28, 28)).astype(np.uint8),
              "test_y": rng.randint(0, 10, n_test).astype(np.uint8)}
    arrays["train_x"][0] = 0
    arrays["train_x"][0, 5, 7] = 255          # planted: row 5, column 7
    names = {"train_x": ("train-images-idx3-ubyte", 0x803), "train_y": ("train-labels-idx1-ubyte", 0x801),
             "test_x": ("t10k-images-idx3-ubyte", 0x803), "test_y": ("t10k-labels-idx1-ubyte", 0x801)}
    for role, (name, magic) in names.items():
        blob = idx_bytes(arrays[role], magic)
        if gz:
            (folder / (name + ".gz")).write_bytes(gzip.compress(blob))
        else:
            (folder / name).write_bytes(blob)
    return arrays


@pytest.fixture
def batches():
    return cifar_batches()


@pytest.fixture
def tarball(tmp_path, batches):
    return write_cifar_tarball(tmp_path / "cifar-10-python.tar.gz", batches)


@pytest.fixture(autouse=True)
def isolated_data_dir(tmp_path, monkeypatch):
    """Never look at (or write to) the checkout's data/ folder."""
    d = tmp_path / "datadir"
    d.mkdir()
    monkeypatch.setenv("HANDSON_DATA_DIR", str(d))
    monkeypatch.delenv("HANDSON_DATASET", raising=False)
    return d


def arrays(dataset):
    x, y = dataset._datasets
    return x, y


# ---------------------------------------------------------------------------------------------
# CIFAR-10, official python version


def test_cifar_tarball_shapes_values_labels_and_pixel_order(tarball, batches):
    train, test = data.load_cifar10(tarball)
    x, y = arrays(train)
    assert x.shape == (20, 3, 32, 32) and x.dtype == np.float32
    assert y.dtype == np.int32 and y.shape == (20,)
    expected_labels = sum((batches[f"data_batch_{i}"][b"labels"] for i in range(1, 6)), [])
    assert y.tolist() == expected_labels
    assert arrays(test)[1].tolist() == batches["test_batch"][b"labels"]
    assert arrays(test)[0].shape == (4, 3, 32, 32)
    assert 0.0 <= x.min() and x.max() <= 1.0
    img = train[0][0]
    assert img[0, 1, 2] == pytest.approx(1.0)
    assert img[1, 3, 4] == pytest.approx(128 / 255)
    assert img[2, 31, 0] == pytest.approx(51 / 255)
    assert np.count_nonzero(img) == 3
    # image 1 of batch 1 is the constant colour of global index 1 in every plane
    assert np.allclose(train[1][0][:, 10, 20], np.array([1, 10, 18]) / 255)
    # the same arithmetic as chainer.datasets.get_cifar10()
    raw = batches["data_batch_2"][b"data"].reshape(-1, 3, 32, 32).astype(np.float32)
    raw *= 1.0 / 255.0
    assert np.array_equal(x[4:8], raw)


def test_cifar_ndim1_and_extracted_folder(tmp_path, batches, tarball):
    folder = write_cifar_dir(tmp_path / "extracted", batches)
    flat_train, _ = data.load_cifar10(tarball, ndim=1)
    assert flat_train[0][0].shape == (3072,)
    assert flat_train[0][0][0 * 1024 + 1 * 32 + 2] == pytest.approx(1.0)
    from_tar = arrays(data.load_cifar10(tarball)[0])
    for path in (folder, folder.parent):   # the batches folder itself or its parent
        train, test = data.load_cifar10(path)
        assert np.array_equal(arrays(train)[0], from_tar[0])
        assert np.array_equal(arrays(train)[1], from_tar[1])
        assert len(test) == 4
    raw = data.load_cifar10_arrays(folder)
    assert raw["class_names"] == tuple(CLASSES)
    assert raw["train_x"].dtype == np.uint8 and raw["train_x"].shape == (20, 3, 32, 32)


def test_get_dataset_tarball_announces_seed_phrase(tarball):
    lines = []
    train, test, info = data.get_dataset(str(tarball), print_fn=lines.append)
    assert lines == [f"Using CIFAR10 dataset: {tarball}"]
    assert info.is_real and info.name == "cifar10"
    assert (info.n_train, info.n_test, info.shape, info.n_class) == (20, 4, (3, 32, 32), 10)
    assert info.source == str(tarball) and info.class_names == tuple(CLASSES)
    assert str(info) == lines[0]


def test_get_dataset_subset_of_real_data(tarball):
    lines = []
    train, test, info = data.get_dataset(tarball, n_train=10, n_test=2, seed=1, print_fn=lines.append)
    assert (len(train), len(test), info.n_train) == (10, 2, 10)
    assert "subset: 10 train / 2 test" in lines[0]
    again = data.get_dataset(tarball, n_train=10, n_test=2, seed=1, announce=False)[0]
    assert np.array_equal(arrays(train)[0], arrays(again)[0])


def test_announce_false_prints_nothing(tarball, capsys):
    data.get_dataset(tarball, announce=False)
    data.get_dataset("synthetic", n_train=20, n_test=10, announce=False)
    assert capsys.readouterr().out == ""
    data.get_dataset("synthetic", n_train=20, n_test=10)
    out = capsys.readouterr().out
    assert out == ("Using synthetic CIFAR-shaped data (offline stand-in, NOT CIFAR-10): "
                   "20 train / 10 test, 3x32x32, 10 classes\n")


def test_cifar_missing_file_says_what_to_fetch(tmp_path):
    missing = tmp_path / "nowhere" / "cifar-10-python.tar.gz"
    with pytest.raises(data.DatasetNotFoundError) as exc:
        data.get_dataset(missing, announce=False)
    assert isinstance(exc.value, FileNotFoundError) and isinstance(exc.value, data.DatasetError)
    msg = str(exc.value)
    for part in (str(missing), "cifar-10-python.tar.gz", "https://www.cs.toronto.edu/~kriz/cifar.html",
                 "login node", "handson data prepare", "--dataset"):
        assert part in msg, part
    with pytest.raises(data.DatasetNotFoundError, match="not found at"):
        data.load_cifar10(tmp_path / "cifar-10-batches-py")


def test_cifar10_name_uses_data_dir(isolated_data_dir, batches):
    with pytest.raises(data.DatasetNotFoundError) as exc:
        data.get_dataset("cifar10", announce=False)
    assert str(isolated_data_dir) in str(exc.value)
    assert "cifar-10-python.tar.gz" in str(exc.value)
    write_cifar_tarball(isolated_data_dir / "cifar-10-python.tar.gz", batches)
    lines = []
    _, _, info = data.get_dataset("cifar10", print_fn=lines.append)
    assert info.n_train == 20
    assert lines == [f"Using CIFAR10 dataset: {isolated_data_dir / 'cifar-10-python.tar.gz'}"]
    _, _, info = data.get_dataset(isolated_data_dir, announce=False)   # a folder holding the tarball
    assert info.source == str(isolated_data_dir / "cifar-10-python.tar.gz")


@pytest.mark.parametrize("damage", ["truncated", "not_gzip", "empty"])
def test_cifar_corrupt_archive(tmp_path, tarball, damage):
    blob = tarball.read_bytes()
    bad = tmp_path / "bad" / "cifar-10-python.tar.gz"
    bad.parent.mkdir()
    bad.write_bytes({"truncated": blob[: len(blob) // 2], "not_gzip": b"<html>404 Not Found</html>" * 20,
                     "empty": b""}[damage])
    with pytest.raises(data.DatasetCorruptError) as exc:
        data.load_cifar10(bad)
    msg = str(exc.value)
    assert str(bad) in msg
    assert "download" in msg and "cifar-10-python.tar.gz" in msg and "cifar.html" in msg


def test_cifar_bad_members(tmp_path, batches):
    no_test = write_cifar_tarball(tmp_path / "a.tar.gz", batches, drop=("test_batch",))
    with pytest.raises(data.DatasetError, match="missing test_batch"):
        data.load_cifar10(no_test)

    wrong = dict(batches["data_batch_3"])
    wrong[b"data"] = wrong[b"data"][:, :3000]
    bad_shape = write_cifar_tarball(tmp_path / "b.tar.gz", batches,
                                    replace={"data_batch_3": py2_dumps(wrong)})
    with pytest.raises(data.DatasetCorruptError) as exc:
        data.load_cifar10(bad_shape)
    assert "data_batch_3" in str(exc.value) and "3072" in str(exc.value) and str(bad_shape) in str(exc.value)

    few_labels = dict(batches["data_batch_2"])
    few_labels[b"labels"] = few_labels[b"labels"][:2]
    bad_labels = write_cifar_tarball(tmp_path / "c.tar.gz", batches,
                                     replace={"data_batch_2": pickle.dumps(few_labels)})
    with pytest.raises(data.DatasetCorruptError, match="4 images but 2 labels"):
        data.load_cifar10(bad_labels)

    not_pickle = write_cifar_tarball(tmp_path / "d.tar.gz", batches,
                                     replace={"test_batch": b"garbage" * 10})
    with pytest.raises(data.DatasetCorruptError, match="test_batch: cannot unpickle"):
        data.load_cifar10(not_pickle)

    # a pickle that would import a function is refused, not executed
    evil = write_cifar_tarball(tmp_path / "e.tar.gz", batches,
                               replace={"data_batch_1": pickle.dumps({b"data": os.getcwd})})
    with pytest.raises(data.DatasetCorruptError, match="refusing to load"):
        data.load_cifar10(evil)


def test_cifar_binary_version_is_recognised(tmp_path):
    path = tmp_path / "cifar-10-binary.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name in ("cifar-10-batches-bin/data_batch_1.bin", "cifar-10-batches-bin/test_batch.bin"):
            info = tarfile.TarInfo(name)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"abc"))
    with pytest.raises(data.DatasetCorruptError, match="binary version"):
        data.load_cifar10(path)


# ---------------------------------------------------------------------------------------------
# handson data prepare and the course pickle


def test_prepare_cli_end_to_end(run_handson, tmp_path, tarball, batches):
    out = tmp_path / "out" / "cifar10_8px_50p.pickle.gz"
    r = run_handson("data", "prepare", "--cifar", tarball, "--size", 8, "--fraction", 0.5,
                    "--seed", 3, "--out", out)
    assert r.returncode == 0, r.stderr
    assert f"Wrote {out}: 10 train + 2 test images, 3x8x8 uint8" in r.stdout
    assert "resizing train: 10/10" in r.stdout
    assert out.is_file() and not (out.parent / (out.name + ".part")).exists()

    lines = []
    train, test, info = data.get_dataset(str(out), print_fn=lines.append)
    assert lines == [f"Using CIFAR10 dataset: {out}"]
    assert (info.n_train, info.n_test, info.shape, info.is_real) == (10, 2, (3, 8, 8), True)
    x, y = arrays(train)
    assert x.dtype == np.float32 and y.dtype == np.int32 and 0 <= x.min() and x.max() <= 1

    with gzip.open(out, "rb") as f:
        meta = pickle.load(f)["meta"]
    assert meta["size"] == 8 and meta["seed"] == 3 and meta["fraction"] == 0.5
    assert meta["class_names"] == CLASSES and meta["format_version"] == 1
    all_labels = sum((batches[f"data_batch_{i}"][b"labels"] for i in range(1, 6)), [])
    idx = meta["train_index"]
    assert idx == sorted(idx) and len(set(idx)) == 10
    assert y.tolist() == [all_labels[i] for i in idx]
    # constant-colour images stay that colour, plane by plane (R, G, B order kept)
    for k, i in enumerate(idx):
        if i == 0:
            continue
        rgb = np.array([i % 256, (7 * i + 3) % 256, (13 * i + 5) % 256]) / 255
        assert np.allclose(x[k], rgb[:, None, None].astype(np.float32), atol=1e-6), i


def test_prepare_cli_errors_are_messages_not_tracebacks(run_handson, tmp_path):
    missing = tmp_path / "missing" / "cifar-10-python.tar.gz"
    r = run_handson("data", "prepare", "--cifar", missing, "--size", 8, "--out", tmp_path / "x.pickle.gz")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert str(missing) in r.stderr and "cifar.html" in r.stderr

    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00truncated")
    r = run_handson("data", "prepare", "--cifar", broken, "--size", 8, "--out", tmp_path / "x.pickle.gz")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert str(broken) in r.stderr and "download" in r.stderr
    assert not (tmp_path / "x.pickle.gz").exists()


def test_prepare_subset_is_stratified_and_deterministic(tmp_path):
    big = cifar_batches(n_per_batch=40, n_test=20, seed=5)
    for name in [f"data_batch_{i}" for i in range(1, 6)]:   # 20 images of every class
        big[name][b"labels"] = [j % 10 for j in range(40)]
    path = write_cifar_tarball(tmp_path / "big.tar.gz", big)

    def run(seed, out):
        data.prepare_cifar_pickle(path, tmp_path / out, size=32, fraction=0.25, seed=seed,
                                  print_fn=lambda line: None)
        with gzip.open(tmp_path / out, "rb") as f:
            return pickle.load(f)

    a, b, c = run(0, "a.pickle.gz"), run(0, "b.pickle.gz"), run(1, "c.pickle.gz")
    assert a["meta"]["train_index"] == b["meta"]["train_index"]
    assert np.array_equal(a["train"][0], b["train"][0])
    assert a["meta"]["train_index"] != c["meta"]["train_index"]
    assert np.bincount(a["train"][1], minlength=10).tolist() == [5] * 10   # 50 of 200, stratified
    assert a["train"][0].shape == (50, 3, 32, 32) and a["meta"]["resize"].startswith("none")
    assert len(a["test"][1]) == 5


def test_prepare_main_default_output_name(isolated_data_dir, tarball, capsys):
    assert data.default_pickle_name() == "cifar10_256px_5p.pickle.gz"
    assert data.default_pickle_name(8, 0.5) == "cifar10_8px_50p.pickle.gz"
    import argparse
    parser = data.add_prepare_arguments(argparse.ArgumentParser())
    args = parser.parse_args(["--cifar", str(tarball), "--size", "4", "--fraction", "0.5"])
    assert isinstance(args, Namespace) and args.seed == 0 and args.test_fraction is None
    assert data.prepare_main(args) == 0
    out = isolated_data_dir / "cifar10_4px_50p.pickle.gz"
    assert out.is_file()
    assert str(out) in capsys.readouterr().out
    # and `cifar10` now finds it in the data folder
    _, _, info = data.get_dataset("cifar10", announce=False)
    assert info.source == str(out) and info.shape == (3, 4, 4)
    bad = parser.parse_args(["--cifar", str(tarball), "--fraction", "1.5"])
    assert data.prepare_main(bad) == 2


def test_course_pickle_loader_ndim_and_errors(tmp_path):
    x = np.arange(2 * 3 * 4 * 4, dtype=np.uint8).reshape(2, 3, 4, 4)
    good = {"train": (x, np.array([1, 2], dtype=np.int32)), "test": (x[:1], np.array([3], dtype=np.int32)),
            "meta": {"class_names": CLASSES, "size": 4}}
    path = tmp_path / "cifar10_4px_1p.pickle.gz"
    with gzip.open(path, "wb") as f:
        pickle.dump(good, f)
    train, test, meta = data.load_cifar_pickle(path)
    assert train[1][0][2, 3, 1] == pytest.approx(x[1, 2, 3, 1] / 255)
    assert arrays(train)[1].tolist() == [1, 2] and meta["size"] == 4
    flat, _, _ = data.load_cifar_pickle(path, ndim=1)
    assert flat[0][0].shape == (48,)

    truncated = tmp_path / "truncated.pickle.gz"
    truncated.write_bytes(path.read_bytes()[:-20])
    wrong = tmp_path / "wrong.pickle.gz"
    with gzip.open(wrong, "wb") as f:
        pickle.dump({"train": (x.astype(np.float32), np.array([1, 2])), "test": good["test"]}, f)
    mismatch = tmp_path / "mismatch.pickle.gz"
    with gzip.open(mismatch, "wb") as f:
        pickle.dump({"train": (x, np.array([1, 2, 3])), "test": good["test"]}, f)
    for bad, why in [(truncated, "cannot decompress/unpickle"), (wrong, "must be uint8"),
                     (mismatch, "2 images but labels")]:
        with pytest.raises(data.DatasetCorruptError) as exc:
            data.get_dataset(bad, announce=False)
        assert str(bad) in str(exc.value) and why in str(exc.value)
        assert "handson data prepare" in str(exc.value)

    missing = tmp_path / "cifar10_256px_5p.pickle.gz"
    with pytest.raises(data.DatasetNotFoundError) as exc:
        data.get_dataset(missing)
    assert str(missing) in str(exc.value) and "handson data prepare" in str(exc.value)
    assert "cifar-10-python.tar.gz" in str(exc.value)


def test_numpy_resize_matches_pillow_when_enlarging():
    from PIL import Image
    img = np.random.RandomState(0).randint(0, 256, (1, 3, 4, 4)).astype(np.uint8)
    ours = prepare.resize_numpy(img, 8)[0]
    pil = np.asarray(Image.fromarray(img[0].transpose(1, 2, 0)).resize((8, 8), Image.BILINEAR))
    assert np.abs(ours.astype(int) - pil.transpose(2, 0, 1).astype(int)).max() <= 1


# ---------------------------------------------------------------------------------------------
# MNIST idx files


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_idx_files(tmp_path, gz):
    raw = write_mnist(tmp_path / "mnist", gz=gz)
    train, test = data.load_mnist(tmp_path / "mnist")
    x, y = arrays(train)
    assert x.shape == (5, 784) and x.dtype == np.float32 and y.dtype == np.int32
    assert y.tolist() == raw["train_y"].tolist() and arrays(test)[1].tolist() == raw["test_y"].tolist()
    assert x[0][5 * 28 + 7] == 1.0 and np.count_nonzero(x[0]) == 1
    assert np.allclose(x[1], raw["train_x"][1].reshape(-1) / 255)
    train3, _ = data.load_mnist(tmp_path / "mnist", ndim=3)
    assert train3[0][0].shape == (1, 28, 28) and train3[0][0][0, 5, 7] == 1.0
    assert data.load_mnist(tmp_path / "mnist", ndim=2)[0][0][0].shape == (28, 28)
    lines = []
    _, _, info = data.get_dataset(tmp_path / "mnist", print_fn=lines.append)
    assert lines == [f"Using MNIST dataset: {tmp_path / 'mnist'}"]
    assert (info.name, info.n_train, info.n_test, info.shape, info.is_real) == ("mnist", 5, 3, (784,), True)


def test_mnist_errors(tmp_path):
    folder = tmp_path / "mnist"
    with pytest.raises(data.DatasetNotFoundError) as exc:
        data.get_dataset(folder, announce=False)
    msg = str(exc.value)
    assert str(folder) in msg and "train-images-idx3-ubyte.gz" in msg and "t10k-labels-idx1-ubyte.gz" in msg

    write_mnist(folder)
    (folder / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(data.DatasetNotFoundError, match="missing: t10k-labels-idx1-ubyte.gz"):
        data.load_mnist(folder)

    write_mnist(folder)
    labels = folder / "train-labels-idx1-ubyte.gz"
    labels.write_bytes(gzip.compress(idx_bytes(np.zeros(5), 0x803)))   # images magic on labels
    with pytest.raises(data.DatasetCorruptError) as exc:
        data.load_mnist(folder)
    assert "magic number is 0x00000803, expected 0x00000801" in str(exc.value)
    assert str(labels) in str(exc.value) and "download" in str(exc.value)

    write_mnist(folder)
    images = folder / "train-images-idx3-ubyte.gz"
    images.write_bytes(gzip.compress(idx_bytes(np.zeros((5, 28, 28)), 0x803)[:-100]))
    with pytest.raises(data.DatasetCorruptError, match="3920 bytes of data, found 3820"):
        data.load_mnist(folder)
    images.write_bytes(gzip.compress(idx_bytes(np.zeros((5, 28, 28)), 0x803))[:-10])
    with pytest.raises(data.DatasetCorruptError, match="cannot read/decompress"):
        data.load_mnist(folder)

    write_mnist(folder)
    labels.write_bytes(gzip.compress(idx_bytes(np.zeros(4), 0x801)))
    with pytest.raises(data.DatasetCorruptError, match="4 labels for 5 images"):
        data.load_mnist(folder)


def test_unknown_paths(tmp_path):
    odd = tmp_path / "notes.txt"
    odd.write_text("hello")
    with pytest.raises(data.DatasetError, match="do not know how to read"):
        data.get_dataset(odd)
    empty = tmp_path / "emptydir"
    empty.mkdir()
    with pytest.raises(data.DatasetError, match="holds neither CIFAR-10"):
        data.get_dataset(empty)


# ---------------------------------------------------------------------------------------------
# offline stand-ins


@pytest.mark.timed
def test_synthetic_data_is_made_in_a_moment():
    """Every script makes its synthetic set at start-up (about 0.5 s here): timed, so alone."""
    t0 = time.perf_counter()
    synthetic.synthetic_arrays(4000, 1000, seed=0)
    elapsed = time.perf_counter() - t0
    assert elapsed < 5, elapsed


def test_synthetic_is_deterministic_balanced_and_shaped():
    arrs = synthetic.synthetic_arrays(4000, 1000, seed=0)
    x, y, xt, yt = arrs
    assert x.shape == (4000, 3, 32, 32) and x.dtype == np.float32 and y.dtype == np.int32
    assert x.min() >= 0 and x.max() <= 1 and 0.3 < x.mean() < 0.7
    assert np.bincount(y, minlength=10).tolist() == [400] * 10
    assert np.bincount(yt, minlength=10).tolist() == [100] * 10
    again = synthetic.synthetic_arrays(4000, 1000, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(arrs, again))
    other = synthetic.synthetic_arrays(4000, 1000, seed=1)
    assert not np.array_equal(x, other[0])
    assert not np.array_equal(x[:1000], xt)

    train, test = data.synthetic_cifar(50, 20, seed=0)
    assert len(train) == 50 and len(test) == 20
    assert train[0][0].shape == (3, 32, 32) and train[0][0].dtype == np.float32
    assert isinstance(train[0][1], np.int32) or train[0][1].dtype == np.int32
    assert data.synthetic_cifar(10, 10, ndim=1)[0][0][0].shape == (3072,)
    assert data.synthetic_cifar(4, 4, size=64)[0][0][0].shape == (3, 64, 64)


def test_synthetic_is_learnable_but_not_trivial():
    x, y, xt, yt = synthetic.synthetic_arrays(2000, 500, seed=0)
    x, xt = x.reshape(len(x), -1), xt.reshape(len(xt), -1)
    means = np.stack([x[y == c].mean(0) for c in range(10)])
    dist = (xt ** 2).sum(1)[:, None] - 2 * xt @ means.T + (means ** 2).sum(1)[None]
    acc = (dist.argmin(1) == yt).mean()
    assert 0.4 < acc < 0.99, acc   # chance is 0.1; about 0.8 with this generator


def test_get_dataset_synthetic_default_and_env(monkeypatch):
    lines = []
    train, test, info = data.get_dataset(print_fn=lines.append)
    assert (info.name, info.is_real, info.n_train, info.n_test) == ("synthetic", False, 2500, 500)
    assert info.shape == (3, 32, 32) and info.n_class == 10 and info.source is None
    assert lines[0].startswith("Using synthetic CIFAR-shaped data (offline stand-in, NOT CIFAR-10): 2500 train")
    monkeypatch.setenv("HANDSON_DATASET", "digits")
    _, _, info = data.get_dataset(announce=False)
    assert info.name == "digits"


def test_digits_is_the_real_sklearn_set():
    train, test = data.digits()
    x, y = arrays(train)
    xt, yt = arrays(test)
    assert len(train) + len(test) == 1797 and len(test) == 359
    assert x.shape[1:] == (64,) and x.dtype == np.float32 and y.dtype == np.int32
    assert x.min() == 0 and x.max() == 1
    assert np.allclose(x * 16, np.round(x * 16))   # 17 gray levels
    assert set(yt.tolist()) == set(range(10))
    from sklearn.datasets import load_digits
    every = load_digits().data / 16
    assert sorted(map(tuple, np.concatenate([x, xt]))) == sorted(map(tuple, every.astype(np.float32)))
    again, _ = data.digits()
    assert np.array_equal(arrays(again)[0], x)
    other, _ = data.digits(seed=1)
    assert not np.array_equal(arrays(other)[1], y)
    three, _ = data.digits(ndim=3)
    assert three[0][0].shape == (1, 8, 8)
    lines = []
    _, _, info = data.get_dataset("digits", ndim=3, print_fn=lines.append)
    assert info.shape == (1, 8, 8) and info.is_real and info.n_train == 1438
    assert lines[0].startswith("Using scikit-learn digits (real 8x8 handwritten digits")
    small, small_test, info = data.get_dataset("digits", n_train=100, announce=False)
    assert (len(small), len(small_test), info.n_train) == (100, 359, 100)


def test_the_digits_are_read_as_load_digits_reads_them_without_importing_scikit_learn():
    """The ranks and the grader read scikit-learn's file themselves (importing scikit-learn cost
    each process a quarter of a CPU-second): the same arrays, to the bit and the dtype."""
    from handson_lib.data import sklearn_digits
    code = ("import sys; from handson_lib.data import sklearn_digits; sklearn_digits.digits(); "
            "print('sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    from sklearn.datasets import load_digits
    bunch = load_digits()
    read, target = sklearn_digits._digits_arrays()
    assert read.dtype == bunch.data.dtype and target.dtype == bunch.target.dtype
    assert np.array_equal(read, bunch.data) and np.array_equal(target, bunch.target)


def test_module_import_is_light():
    code = ("import sys, handson_lib.data; "
            "heavy = [m for m in ('chainer', 'sklearn', 'PIL', 'cupy') if m in sys.modules]; "
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# the course's pickles load on every supported NumPy (README "Supported stacks")

def test_a_prepared_pickle_names_no_numpy_core_module(tmp_path, tarball):
    """`handson data prepare` writes arrays as numpy.ndarray(shape, dtype, bytearray): a plain
    pickle.dump names numpy.core (NumPy 1) or numpy._core (NumPy 2), which the other cannot import."""
    out = tmp_path / "cifar10_8px_50p.pickle.gz"
    prepare.prepare_cifar_pickle(tarball, out, size=8, fraction=0.5, print_fn=lambda *a: None)
    raw = gzip.decompress(out.read_bytes())
    assert b"numpy.core" not in raw and b"numpy._core" not in raw
    with gzip.open(out, "rb") as f:
        plain = pickle.load(f)   # a student's own pickle.load, as the seed notebook did
    x, y = plain["train"]
    assert x.dtype == np.uint8 and x.shape[1:] == (3, 8, 8) and y.dtype == np.int32
    assert x.flags.writeable and y.flags.writeable
    x[0, 0, 0, 0] = 7
    loaded = load_pickle_arrays(out)
    assert np.array_equal(loaded["train_x"][1:], x[1:]) and np.array_equal(loaded["train_y"], y)


def test_portable_pickle_refuses_what_it_cannot_write_portably():
    with pytest.raises(pickle.PicklingError, match="store plain numbers"):
        data.reading.dump_portable({"n": np.int64(3)}, io.BytesIO())


def test_a_pickle_of_the_other_numpy_loads(tmp_path):
    """A file that an older course wrote with plain pickle.dump under the other NumPy major version
    (numpy.core <-> numpy._core) loads with the course's reader."""
    x = np.arange(2 * 3 * 4 * 4, dtype=np.uint8).reshape(2, 3, 4, 4)
    obj = {"train": (x, np.array([1, 2], dtype=np.int32)), "test": (x[:1], np.array([3], dtype=np.int32))}
    raw = pickle.dumps(obj, protocol=2)    # GLOBAL opcodes: module names as plain text lines
    ours = b"numpy._core." if np.__version__.startswith("2.") else b"numpy.core."
    theirs = b"numpy.core." if ours == b"numpy._core." else b"numpy._core."
    assert ours in raw
    path = tmp_path / "other.pickle.gz"
    path.write_bytes(gzip.compress(raw.replace(ours, theirs)))
    loaded = load_pickle_arrays(path)
    assert np.array_equal(loaded["train_x"], x) and loaded["test_y"].tolist() == [3]
