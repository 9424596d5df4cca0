"""What the grader sees of a run for itself, to weigh what the observer inside the student's
processes recorded (trusted side only: the records are evidence, not a verdict).

The observer keeps the trained model's parameters (`model.npz`, or `model-rank0.npz`) and the
arguments the course's model class was made with. The grader rebuilds that model here, loads the
parameters as plain arrays, and measures its accuracy on images the run never trained on: for the
synthetic set, images of the seed's classes from a stream drawn at random then; for the digits,
their test split. A run whose recorded accuracy disagrees with the grader's is "tampering
suspected". Everything a run left is read here as untrusted (`read_left`, `load_arrays`).
"""

import io
import os
import secrets
import stat
import zipfile
from pathlib import Path

import numpy

#: Images the grader evaluates a trained model on.
HELD_OUT_IMAGES = 1000
#: The largest integer argument a model may be rebuilt with (the course's widths are <= 1000):
#: the grader never allocates what a forged record asks.
LARGEST_ARGUMENT = 1024


def agreement(recorded_images, measured_images):
    """How far a run's own accuracy may lie from the grader's before it counts as a contradiction:
    five standard deviations of the difference of two accuracies of that many images (at worst,
    50 %), at least 0.15 and at most 0.35 (a record cannot buy a wider margin by its image count)."""
    spread = 0.5 * ((1 / max(1, recorded_images)) + (1 / max(1, measured_images))) ** 0.5
    return min(0.35, max(0.15, 5 * spread))


#: The most of a file left by a run (a record, a log, an npz's arrays together) that the grader reads.
LARGEST_LEFT = 512 << 20


def read_left(path, limit=LARGEST_LEFT):
    """The bytes of a file a run left (untrusted), or None when there is none: never through a
    link, never a FIFO or device (no wait), never more than `limit`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            raise ValueError(f"{Path(path).name}: not a plain file of at most {limit >> 20} MiB")
        return f.read(limit + 1)


def load_arrays(path, limit=LARGEST_LEFT):
    """{name: array} of an .npz a run left (untrusted), or None: read as `read_left`, every member
    a plain array (no pickle) and all of them at most `limit` bytes once unpacked."""
    raw = read_left(path, limit)
    if raw is None:
        return None
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        if sum(info.file_size for info in archive.infolist()) > limit:
            raise ValueError(f"{Path(path).name}: more than {limit >> 20} MiB of arrays")
    with numpy.load(io.BytesIO(raw), allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}



def _argument(value):
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and 0 < value <= LARGEST_ARGUMENT:
        return value
    if isinstance(value, list) and len(value) <= 4:
        return tuple(_argument(v) for v in value)
    raise ValueError(f"a model argument the grader does not rebuild: {value!r}")


def rebuild(model_record, arrays):
    """The course's model of `model_record` ({"class", "args", "kwargs"}), its parameters loaded."""
    from chainer import serializers

    from handson_lib.runtime import models
    model_class = models.CLASSES.get((model_record or {}).get("class"))
    if model_class is None:
        raise ValueError("the trained model is not one of the course's (handson_lib.runtime.models)")
    args = [_argument(a) for a in model_record.get("args", [])]
    kwargs = {str(k): _argument(v) for k, v in (model_record.get("kwargs") or {}).items()}
    model = model_class(*args, **kwargs)
    serializers.NpzDeserializer(arrays, strict=True).load(model)
    return model


#: The data sets the grader evaluates on, and the image shapes it accepts for each (what the course's
#: scripts load): a record names one of them, never a path.
EVALUATED = {"synthetic": {(3, 32, 32), (3072,)}, "digits": {(64,), (8, 8), (1, 8, 8)},
             "cifar10": {(3, 32, 32), (3072,)}, "mnist": {(784,), (28, 28), (1, 28, 28)}}


def held_out(dataset, seed=None):
    """(x, t) that the run never trained on, for its dataset record: for the synthetic set, images
    of the seed's classes from a stream drawn now at random (no script can have seen them); for
    real data, its test split (up to HELD_OUT_IMAGES of it), read from the grader's own data
    folder. Anything else is not evaluated."""
    from handson_lib import data
    from handson_lib.data import synthetic
    # `seed`: the one the grader gave the run (its classes are unknown before the run: a model
    # trained elsewhere does not fit them), whatever the record says.
    name, shape = dataset.get("name"), tuple(dataset.get("shape") or ())
    seed = (dataset.get("seed") or 0) if seed is None else seed
    if shape not in EVALUATED.get(name, ()) or not (isinstance(seed, int) and 0 <= seed < 2 ** 31):
        raise ValueError(f"the grader evaluates only {', '.join(EVALUATED)} of the course's shapes "
                         f"(the run loaded {name!r}, {shape})")
    if name == "synthetic":
        stream = synthetic.HELD_OUT_STREAM + secrets.randbelow(2 ** 31)
        x, t = synthetic.synthetic_arrays(0, HELD_OUT_IMAGES, seed=seed, size=32, test_stream=stream)[2:]
        return x.reshape((len(x), *shape)), t
    _, test, _ = data.get_dataset(name, ndim=len(shape), seed=seed, announce=False,
                                  n_test=None if name == "digits" else HELD_OUT_IMAGES)
    x, t = (numpy.stack(a) for a in zip(*[test[i] for i in range(len(test))]))
    return x.reshape((len(x), *shape)), t


def accuracy(model, x, t):
    import chainer
    correct = 0
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        for start in range(0, len(x), 250):
            y = model(x[start:start + 250].astype(numpy.float32))
            correct += int((y.array.argmax(axis=1) == t[start:start + 250]).sum())
    return correct / len(x)


def measure(record, model_path, seed=None):
    """{"accuracy": the grader's accuracy of the run's trained model or None, "images": how many,
    "why": what stopped the measurement}. Never raises: what a run left is untrusted."""
    try:
        if not (isinstance(record, dict) and record.get("finished")):
            return {"accuracy": None, "images": 0, "why": "the run did not finish"}
        arrays = load_arrays(model_path)
        if arrays is None:
            return {"accuracy": None, "images": 0, "why": "the run left no trained parameters"}
        model = rebuild(record.get("model"), arrays)
        x, t = held_out(record["dataset"], seed)
        return {"accuracy": accuracy(model, x, t), "images": len(x), "why": ""}
    except Exception as error:   # a forged or broken file: said, never a crash of the grader
        return {"accuracy": None, "images": 0, "why": f"{type(error).__name__}: {str(error)[:300]}"}
