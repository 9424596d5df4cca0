"""What the ranks allreduce and how the result is checked: the model's gradients (or a bare
buffer), rank-dependent known values, and their expected sum and mean."""

from handson_lib.runtime.models import MODELS, get_model

#: Input of the course models' dummy forward pass (CIFAR-shaped, like --dataset synthetic).
COURSE_INPUT_SHAPE = (3, 32, 32)


RTOL = 1e-6


# Elements checked at a time: keeps the temporaries of the check small for 100 MB buffers.
_CHUNK = 1 << 20


def build_gradient_link(model_name, input_shape=COURSE_INPUT_SHAPE, n_class=10):
    """The Chainer link whose parameters a training run allreduces, with every parameter
    allocated. 'resnet50' is Chainer's ResNet50Layers (1000 classes, random weights, no
    download); the course models are initialised lazily, so they see one dummy batch first."""
    import chainer
    import numpy as np
    if model_name == "resnet50":
        import chainer.links as L
        return L.ResNet50Layers(pretrained_model=None)
    check_model(model_name)
    model = get_model(model_name, n_class=n_class)
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        model.predictor(np.zeros((1,) + tuple(input_shape), dtype=np.float32))
    return model


def check_model(model_name):
    if model_name != "resnet50" and model_name not in MODELS:
        raise ValueError(f"unknown model {model_name!r}; choose resnet50 or one of {', '.join(MODELS)}")


def check_buffer(result, expected, rtol=RTOL):
    """(ok, max_abs_error): does `result` equal `expected` element by element, to `rtol`?"""
    import numpy as np
    result = np.asarray(result).ravel()
    expected = np.asarray(expected).ravel()
    if result.shape != expected.shape:
        return False, float("inf")
    worst, ok = 0.0, True
    for start in range(0, result.size, _CHUNK):
        got = result[start:start + _CHUNK].astype(np.float64)
        want = expected[start:start + _CHUNK].astype(np.float64)
        error = np.abs(got - want)
        if not np.all(np.isfinite(got)):
            return False, float("inf")
        worst = max(worst, float(error.max(initial=0.0)))
        ok = ok and bool(np.all(error <= rtol * np.abs(want)))
    return ok, worst


def pattern(n):
    """Known, element-dependent values (0..6): a shifted or truncated result cannot pass."""
    import numpy as np
    return (np.arange(n, dtype=np.int64) % 7).astype(np.float32)


def contribution(base, rank, corrupt_rank, out=None):
    """Rank r contributes base + (r + 1); the test hook spoils one element of one rank."""
    import numpy as np
    out = np.add(base, np.float32(rank + 1), out=out)
    if rank == corrupt_rank and out.size:
        out.flat[0] += np.float32(1000)
    return out


def expected_sum(base, p):
    """Sum over ranks of base + (r + 1), r = 0..p-1."""
    return base * p + p * (p + 1) / 2


def expected_mean(base, p):
    return base + (p + 1) / 2
