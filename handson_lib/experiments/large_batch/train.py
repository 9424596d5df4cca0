"""One training run at a total batch: a model trained in this process for some epochs, its test
accuracy, whether it diverged; BLAS threads held down while it trains."""

import contextlib
import tempfile
import time

from handson_lib.runtime import models
from handson_lib.runtime.training import seed_everything

def make_model(name, n_class, hidden_units):
    import chainer.links as L
    if name == "mlp":
        return L.Classifier(models.MLP(n_units=hidden_units, n_class=n_class))
    return models.get_model(name, n_class)


def _finite(model):
    import numpy as np
    return all(np.isfinite(p.array).all() for p in model.params() if p.array is not None)


def _test_accuracy(model, test, chunk=1000):
    import chainer
    import chainer.functions as F
    import numpy as np
    x, y = test._datasets
    correct = 0
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        for start in range(0, len(y), chunk):
            scores = model.predictor(x[start:start + chunk]).array
            # Non-finite scores (a diverged run) count as wrong, not as class 0.
            ok = np.isfinite(scores).all(axis=1)
            correct += int(((F.argmax(scores, axis=1).array == y[start:start + chunk]) & ok).sum())
    return correct / len(y)


def train_once(train, test, batch, lr, epochs, seed=0, model="mlp", hidden_units=100, momentum=0.9,
               extension=None, n_class=10, optimizer_hook=None):
    """Train one model with total batch ``batch`` for ``epochs`` epochs; the test accuracy and more.

    ``lr`` is the optimizer's learning rate at the start; ``extension`` (optional) is added to the
    trainer and may change it (a warmup schedule); ``optimizer_hook`` (optional) may change the
    gradients before each update. Weights and data order depend on ``seed`` only,
    so runs that differ in their schedule start from the same model and see the same batches."""
    import chainer
    from chainer import training
    if batch > len(train):
        raise ValueError(f"batch {batch} is larger than the training set ({len(train)} examples)")
    seed_everything(seed)
    net = make_model(model, n_class, hidden_units)
    optimizer = chainer.optimizers.MomentumSGD(lr=lr, momentum=momentum)
    optimizer.setup(net)
    if optimizer_hook is not None:
        optimizer.add_hook(optimizer_hook)
    iterator = chainer.iterators.SerialIterator(train, batch, shuffle=True)
    updater = training.updaters.StandardUpdater(iterator, optimizer)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        trainer = training.Trainer(updater, (epochs, "epoch"), out=out)
        if extension is not None:
            trainer.extend(extension)
        trainer.run()
    finite = _finite(net)
    return {"accuracy": _test_accuracy(net, test), "diverged": not finite,
            "iterations": updater.iteration, "final_lr": float(optimizer.lr),
            "seconds": time.perf_counter() - started}


def blas_threads(threads):
    """Limit NumPy's BLAS threads while training (None: leave as is). The matrices here are small:
    one thread is several times faster than two fighting over a busy machine, and it leaves the
    other cores to the other processes. threadpoolctl comes with scikit-learn."""
    if threads is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=threads, user_api="blas")


def warmup_iterations_for(warmup_epochs, n_train, batch):
    """W for a warmup of ``warmup_epochs`` epochs at this batch (at least 1 when warmup_epochs > 0)."""
    if warmup_epochs < 0:
        raise ValueError(f"warmup_epochs must be >= 0, got {warmup_epochs!r}")
    if warmup_epochs == 0:
        return 0
    return max(1, round(warmup_epochs * n_train / batch))
