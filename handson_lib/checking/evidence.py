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
import json
import os
import re
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


#: The most of a file left by a run (a log) that the grader reads.
LARGEST_LEFT = 512 << 20
#: The most of a record (JSON) a run left: a real one holds fingerprint lists, about 2 MB for
#: 50,000 images.
LARGEST_RECORD = 8 << 20
#: The most lists and objects a record may hold: json.loads builds each one before anything is
#: checked (32 MiB of `[],` made 2.2 GB), and a real record holds a few per rank and shard.
MOST_CONTAINERS = 100_000
#: The most of an .npz a run left, unpacked, and of all the arrays of one run together.
LARGEST_ARRAYS = 64 << 20
LARGEST_RUN_ARRAYS = 256 << 20
#: The most members of one .npz: the archive's directory is read whole before any is checked.
MOST_MEMBERS = 1000


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
            raise ValueError(f"{Path(path).name}: not a plain file of at most {_size(limit)}")
        return f.read(limit + 1)


def _size(limit):
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"


#: A JSON string (one left open runs to the end: no match fails, so no start is tried twice).
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\(?:.|\Z)[^"\\]*)*(?:"|\Z)', re.S)


def parse_record(text, most_containers=MOST_CONTAINERS, name="a record"):
    """The value of a JSON text a run left (untrusted), or ValueError: more than `most_containers`
    lists and objects (counted outside strings before json.loads builds them), nested deeper
    than the parser goes, or not JSON."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    bare = _JSON_STRING.sub("", text)
    containers = bare.count("[") + bare.count("{")
    del bare
    if containers > most_containers:
        raise ValueError(f"{name}: {containers} lists and objects (at most {most_containers})")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{name}: nested too deep") from None


def read_record(path, limit=LARGEST_RECORD):
    """The JSON value of a record a run left, read as `read_left` and parsed by `parse_record`, or
    None when there is none."""
    raw = read_left(path, limit)
    return None if raw is None else parse_record(raw, name=Path(path).name)


def load_arrays(path, limit=LARGEST_ARRAYS):
    """{name: array} of an .npz a run left (untrusted), or None: read as `read_left`, every member
    a plain array (no pickle) and all of them at most `limit` bytes once unpacked, as the archive
    and each array's header say before anything is unpacked."""
    raw = read_left(path, limit)
    if raw is None:
        return None
    name = Path(path).name
    if raw.count(b"PK\x01\x02") > MOST_MEMBERS:     # the signature of each directory entry
        raise ValueError(f"{name}: more than {MOST_MEMBERS} arrays")
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        members = archive.infolist()
        if sum(info.file_size for info in members) > limit:
            raise ValueError(f"{name}: more than {_size(limit)} of arrays")
        if sum(_array_bytes(archive, info) for info in members) > limit:
            raise ValueError(f"{name}: arrays of more than {_size(limit)}")
    with numpy.load(io.BytesIO(raw), allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}


_HEADER_READERS = {(1, 0): numpy.lib.format.read_array_header_1_0, (2, 0): numpy.lib.format.read_array_header_2_0}


def _array_bytes(archive, info):
    """The bytes the .npy header of a member says its array holds (numpy allocates them first)."""
    with archive.open(info) as member:
        version = numpy.lib.format.read_magic(member)
        if version not in _HEADER_READERS:
            raise ValueError(f"{info.filename}: an .npy of format {version}")
        shape, _, dtype = _HEADER_READERS[version](member)
    count = 1
    for n in shape:
        count *= n
    return count * dtype.itemsize


class RunArrays:
    """The arrays of one run, read file by file: each at most LARGEST_ARRAYS, all together at most
    LARGEST_RUN_ARRAYS."""

    def __init__(self):
        self.limit = self.left = LARGEST_RUN_ARRAYS

    def load(self, path):
        together = f"the run's arrays together: at most {_size(self.limit)}"
        if self.left <= 0:
            raise ValueError(f"{Path(path).name}: {together}")
        try:
            arrays = load_arrays(path, min(LARGEST_ARRAYS, self.left))
        except ValueError as error:
            raise ValueError(f"{error} ({together})" if self.left < LARGEST_ARRAYS else error) from None
        self.left -= sum(a.nbytes for a in (arrays or {}).values())
        return arrays


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
