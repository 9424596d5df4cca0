"""What the grader sees of a run for itself, to weigh what the observer inside the student's
processes recorded (trusted side only: the records are evidence, not a verdict).

The observer keeps the trained model's parameters (`model.npz`, or `model-rank0.npz`) and the
arguments the course's model class was made with. The grader rebuilds that model here, loads the
parameters as plain arrays, and measures its accuracy on images the run never trained on: for the
synthetic set, a stream of the same seed that no script draws; for real data, the test split. A
run whose recorded accuracy disagrees with the grader's is "tampering suspected".
"""

import os
import stat

import numpy

#: Images the grader evaluates a trained model on.
HELD_OUT_IMAGES = 1000
#: The largest integer argument a model may be rebuilt with (the course's widths are <= 1000):
#: the grader never allocates what a forged record asks.
LARGEST_ARGUMENT = 1024
#: The largest parameter file the grader reads.
LARGEST_FILE = 256 << 20


def agreement(recorded_images, measured_images):
    """How far a run's own accuracy may lie from the grader's before it counts as a contradiction:
    five standard deviations of the difference of two accuracies of that many images (at worst,
    50 %), at least 0.15 and at most 0.35 (a record cannot buy a wider margin by its image count)."""
    spread = 0.5 * ((1 / max(1, recorded_images)) + (1 / max(1, measured_images))) ** 0.5
    return min(0.35, max(0.15, 5 * spread))


def read_arrays(path):
    """{name: array} of an .npz a run wrote, or None when there is none; never through a link,
    never pickled objects, never more than LARGEST_FILE."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > LARGEST_FILE:
            raise ValueError("not a plain file of at most 256 MiB")
        with numpy.load(f, allow_pickle=False) as npz:
            return {name: npz[name] for name in npz.files}


def _argument(value):
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and 0 < value <= LARGEST_ARGUMENT:
        return value
    if isinstance(value, list) and len(value) <= 8:
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


def held_out(dataset):
    """(x, t) that the run never trained on, for its dataset record."""
    from handson_lib import data
    from handson_lib.data import synthetic
    shape = tuple(dataset["shape"])
    if dataset["name"] == "synthetic":
        size = shape[-1] if len(shape) == 3 else int(round((shape[0] / 3) ** 0.5))
        x, t = synthetic.synthetic_arrays(0, HELD_OUT_IMAGES, seed=int(dataset.get("seed") or 0), size=size,
                                          test_stream=synthetic.HELD_OUT_STREAM)[2:]
        return x.reshape((len(x), *shape)), t
    _, test, _ = data.get_dataset(dataset.get("source") or dataset["name"], ndim=len(shape),
                                  seed=int(dataset.get("seed") or 0), announce=False)
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


def measure(record, model_path):
    """{"accuracy": the grader's accuracy of the run's trained model or None, "images": how many,
    "why": what stopped the measurement}. Never raises: what a run left is untrusted."""
    try:
        if not (isinstance(record, dict) and record.get("finished")):
            return {"accuracy": None, "images": 0, "why": "the run did not finish"}
        arrays = read_arrays(model_path)
        if arrays is None:
            return {"accuracy": None, "images": 0, "why": "the run left no trained parameters"}
        model = rebuild(record.get("model"), arrays)
        x, t = held_out(record["dataset"])
        return {"accuracy": accuracy(model, x, t), "images": len(x), "why": ""}
    except Exception as error:   # a forged or broken file: said, never a crash of the grader
        return {"accuracy": None, "images": 0, "why": f"{type(error).__name__}: {str(error)[:300]}"}
