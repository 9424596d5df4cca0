"""``handson data prepare``: build a ``cifar10_<size>px_<pct>p.pickle.gz`` from the official tarball.

The format is described in :mod:`handson_lib.data.cifar_pickle`. Pillow is imported inside the
function that resizes (a NumPy filter stands in when it is missing).
"""

from __future__ import annotations

import gzip
import os
import sys
import time
from pathlib import Path

import numpy as np

from handson_lib.data.arrays import stratified_indices
from handson_lib.data.cifar import load_cifar10_arrays
from handson_lib.data.cifar_pickle import PICKLE_FORMAT_VERSION
from handson_lib.data.dataset import announcer
from handson_lib.data.errors import DatasetError, cifar_missing, describe_exc
from handson_lib.data.reading import dump_portable
from handson_lib.messages import tr
from handson_lib.data.sources import CIFAR10_DIRNAME, CIFAR10_TARBALL, data_dir, default_pickle_name


def resize_numpy(images, size):
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
                out[i:i + chunk] = resize_numpy(images[i:i + chunk], size)
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
    say = announcer(print_fn)
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
        idx = stratified_indices(y, k, np.random.RandomState([seed, stream]))
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
            dump_portable(obj, f, protocol=5)
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
            print(f"handson data prepare: {cifar_missing(d / CIFAR10_TARBALL)}", file=sys.stderr)
            return 2
    out = args.out or data_dir() / default_pickle_name(args.size, args.fraction)
    try:
        s = prepare_cifar_pickle(cifar, out, size=args.size, fraction=args.fraction,
                                 test_fraction=args.test_fraction, seed=args.seed)
    except (DatasetError, ValueError) as exc:
        print(f"handson data prepare: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print("handson data prepare: " + tr("cannot write {path}: {error}", path=out, error=describe_exc(exc)),
              file=sys.stderr)
        return 1
    mb = s["bytes"] / 1e6
    shape = "x".join(map(str, s["shape"]))
    print(f"Wrote {s['path']}: {s['n_train']} train + {s['n_test']} test images, {shape} uint8, "
          f"{mb:.1f} MB ({s['uncompressed_bytes'] / 1e6:.1f} MB uncompressed) in "
          f"{s['seconds']:.1f} s", flush=True)
    print(f"Load it with --dataset {s['path']}  (prints: Using CIFAR10 dataset: {s['path']})",
          flush=True)
    return 0
