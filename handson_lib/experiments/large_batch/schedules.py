"""A student's learning-rate schedule checked: the rate it gives at one iteration, and the rates a
real trainer applies with it."""

import tempfile

def check_positive(**values):
    """ValueError naming the first of `values` that is not a positive number."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")


def rate_at(extension_factory, base_lr, base_batch, batch, warmup_iterations, iteration):
    """The rate an extension built by ``extension_factory`` gives the update after ``iteration``
    finished ones (its ``lr_at``), as a float."""
    return float(extension_factory(base_lr, base_batch, batch, warmup_iterations).lr_at(iteration))


def lr_trace(extension_factory, base_lr=0.1, base_batch=32, batch=256, warmup_iterations=10,
             iterations=15):
    """The learning rate of each of the first ``iterations`` updates, as a real trainer applies it.

    A tiny linear model trains on random data with the extension from ``extension_factory(
    base_lr=, base_batch=, batch=, warmup_iterations=)``; the optimizer's ``lr`` is read just
    before every update. Returns a list of floats (update 0 first)."""
    import chainer
    import chainer.links as L
    import numpy as np
    from chainer import training

    rng = np.random.RandomState(0)
    dataset = chainer.datasets.TupleDataset(rng.rand(8, 3).astype(np.float32),
                                            rng.randint(0, 2, 8).astype(np.int32))
    model = L.Classifier(L.Linear(3, 2))
    optimizer = chainer.optimizers.MomentumSGD(lr=-1.0)  # a value no schedule would set
    optimizer.setup(model)
    seen = []
    update = optimizer.update

    def update_and_record(*args, **kwargs):
        seen.append(float(optimizer.lr))
        return update(*args, **kwargs)

    optimizer.update = update_and_record
    iterator = chainer.iterators.SerialIterator(dataset, 4, shuffle=False)
    updater = training.updaters.StandardUpdater(iterator, optimizer)
    with tempfile.TemporaryDirectory() as out:
        trainer = training.Trainer(updater, (iterations, "iteration"), out=out)
        trainer.extend(extension_factory(base_lr=base_lr, base_batch=base_batch, batch=batch,
                                         warmup_iterations=warmup_iterations))
        trainer.run()
    return seen
