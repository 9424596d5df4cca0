"""The task models build, run forward and backward, and give class scores of the right shape."""

import chainer
import numpy
import pytest

from handson_lib.runtime import models


@pytest.mark.parametrize("name,shape", [("cnn", (3, 32, 32)), ("cnn-bn", (3, 32, 32)),
                                        ("resnet18", (3, 32, 32)), ("mlp", (64,)), ("cnn", (1, 8, 8))])
def test_forward_backward(name, shape):
    numpy.random.seed(0)
    model = models.get_model(name, n_class=10)
    x = numpy.random.rand(4, *shape).astype(numpy.float32)
    t = numpy.array([0, 1, 2, 3], dtype=numpy.int32)
    model(x, t)  # lazy parameters get their shapes (and NaN gradients) here
    model.cleargrads()
    loss = model(x, t)
    loss.backward()
    assert model.predictor(x).shape == (4, 10)
    assert all(p.grad is not None and numpy.isfinite(p.grad).all() for p in model.params())


def test_small_cnn_without_batchnorm_has_no_batch_statistics():
    assert not any("bn" in name for name, _ in models.get_model("cnn").namedlinks())
    assert any("bn" in name for name, _ in models.get_model("cnn-bn").namedlinks())


def test_unknown_model_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown model 'vgg'; choose one of cnn, cnn-bn, resnet18, mlp"):
        models.get_model("vgg")


@pytest.mark.slow
def test_small_cnn_learns_the_synthetic_set_quickly():
    from handson_lib import data
    train, test, _ = data.get_dataset("synthetic", n_train=1000, n_test=300, announce=False)
    numpy.random.seed(0)
    model = models.get_model("cnn")
    optimizer = chainer.optimizers.MomentumSGD(lr=0.02)
    optimizer.setup(model)
    it = chainer.iterators.SerialIterator(train, 32)
    for _ in range(90):
        optimizer.update(model, *chainer.dataset.concat_examples(it.next()))
    x, t = chainer.dataset.concat_examples(test)
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        accuracy = float(chainer.functions.accuracy(model.predictor(x), t).array)
    assert accuracy > 0.3, accuracy
