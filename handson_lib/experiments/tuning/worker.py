"""The training script that runs once per measured step (`python -m handson_lib.experiments.tuning
--levers cudnn,autotune,...`): it trains with a set of levers and reports iterations/sec and
images/sec with the warm-up excluded."""

import argparse
import json
import os
import sys
import time

from handson_lib.experiments.tuning.images import encoded_dataset
from handson_lib.experiments.tuning.levers import LEVER_NAMES, configure, parse_levers
from handson_lib.messages import tr
from handson_lib.runtime import devices, models, throughput

REPORT_PREFIX = "TUNING-REPORT "


def default_n_processes():
    """Loader workers: one core is left to the training process."""
    return max(1, (os.cpu_count() or 2) - 1)


def _build_model(name, width, n_class, static):
    import chainer
    import chainer.links as L
    if width is not None:
        if name not in ("cnn", "cnn-bn"):
            raise ValueError(f"--width applies to the cnn models only, not {name!r}")
        predictor = models.SmallCNN(n_class, batchnorm=name == "cnn-bn", width=width)
    else:
        predictor = models.get_model(name, n_class, classifier=False)
    if static:
        from chainer.graph_optimizations.static_graph import static_graph

        class StaticForward(chainer.Chain):
            """The model's forward under @static_graph (the talk's one-line change)."""

            def __init__(self, model):
                super().__init__()
                with self.init_scope():
                    self.model = model

            @static_graph
            def forward(self, x):
                return self.model(x)

        predictor = StaticForward(predictor)
    return L.Classifier(predictor), predictor


def _gpu_facts(gpu):
    import cupy
    from chainer.backends import cuda
    props = cupy.cuda.runtime.getDeviceProperties(gpu)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    capability = int(cupy.cuda.Device(gpu).compute_capability)
    cudnn_version = cuda.libcudnn.getVersion() if cuda.cudnn_enabled else None
    return name, capability, cudnn_version


def _config_contexts(cfg, gpu, notes):
    """chainer.using_config(...) for every setting of `cfg` (restored when the run ends)."""
    import chainer
    import numpy
    settings = {"use_cudnn": cfg.use_cudnn, "autotune": cfg.autotune,
                "dtype": chainer.mixed16 if cfg.dtype == "mixed16" else numpy.dtype(cfg.dtype)}
    if cfg.tensor_core:
        if gpu is None:
            notes.append("TensorCore: needs a GPU: not applied (NumPy computes float16 on the CPU)")
        else:
            _, capability, _ = _gpu_facts(gpu)
            if capability >= 70:
                settings["use_cudnn_tensor_core"] = "always"
            else:
                notes.append(f"TensorCore: compute capability {capability / 10:.1f} < 7.0: not applied")
    return [chainer.using_config(key, value) for key, value in settings.items()]


def _open_device(gpu, cfg, applied, not_applied):
    """(chainer device, description) for `gpu` (None: NumPy); cuDNN is taken back when this CuPy
    has none."""
    import chainer
    if gpu is None:
        return chainer.get_device("@numpy"), "CPU (NumPy)"
    cupy, cupy_error = devices.import_cupy()
    if cupy is None:
        raise RuntimeError(f"--gpu needs CuPy (pip install cupy-cuda12x); it does not import "
                           f"here: {cupy_error}")
    name, capability, cudnn_version = _gpu_facts(gpu)
    device = chainer.get_device(f"@cupy:{gpu}")
    device.use()
    if cfg.use_cudnn == "always" and cudnn_version is None:
        cfg.use_cudnn = "never"
        applied.remove("cudnn")
        not_applied["cudnn"] = "this CuPy has no cuDNN: not applied"
    return device, f"GPU {gpu}: {name} (compute capability {capability / 10:.1f}, cuDNN {cudnn_version})"


def _enter_settings(stack, cfg, gpu, notes):
    """Chainer's configuration and CuPy's workspace for `cfg`, restored when `stack` closes."""
    for context in _config_contexts(cfg, gpu, notes):
        stack.enter_context(context)
    if cfg.workspace_bytes:
        from chainer.backends import cuda
        previous = cuda.get_max_workspace_size()
        cuda.set_max_workspace_size(cfg.workspace_bytes)
        stack.callback(cuda.set_max_workspace_size, previous)


def _training_iterator(cfg, train, batch, n_processes, make_iterator):
    import chainer
    if make_iterator is not None:
        train_iter = make_iterator(train, batch)
        _check_iterator(train_iter, batch)
        return train_iter
    if cfg.iterator == "multiprocess":
        return chainer.iterators.MultiprocessIterator(train, batch, n_processes=n_processes)
    return chainer.iterators.SerialIterator(train, batch)


def _check_iterator(iterator, batchsize):
    from chainer.dataset import Iterator
    if iterator is None:
        raise NotImplementedError(tr("make_iterator returned None: fill in the `# PUT YOUR CODE HERE` "
                                     "part so that it returns a Chainer iterator"))
    if not isinstance(iterator, Iterator):
        raise TypeError(tr("make_iterator must return a chainer iterator, not {type}",
                           type=type(iterator).__name__))
    if getattr(iterator, "batch_size", None) != batchsize:
        raise ValueError(tr("the iterator's batch size is {size}, expected the batchsize argument ({batchsize})",
                            size=getattr(iterator, "batch_size", None), batchsize=batchsize))
    if not getattr(iterator, "repeat", True):
        raise ValueError(tr("the training iterator must repeat (repeat=True): it runs out after one epoch"))


def _timing_converter(marks):
    """concat_examples that notes when the batch arrived (the time before went to iterator.next())
    and casts the float32 batch to the model's dtype."""
    import chainer
    compute_dtype = chainer.get_dtype()

    @chainer.dataset.converter()
    def convert(examples, to_device):
        marks["data_ready"] = time.perf_counter()
        marks["images"] = len(examples)
        x, t = chainer.dataset.concat_examples(examples, to_device)
        if x.dtype != compute_dtype:
            x = x.astype(compute_dtype)
        return x, t

    return convert


def _timed_updates(updater, classifier, device, on_gpu, marks, iterations, warmup, max_seconds,
                   min_timed):
    """Run the updates; (meter, seconds waiting for data, losses). The first `warmup` are not timed;
    timing stops after `iterations`, or once `max_seconds` passed and `min_timed` were timed."""
    meter = throughput.ThroughputMeter(warmup=warmup)
    data_seconds, losses = 0.0, []
    for step in range(warmup + iterations):
        started = time.perf_counter()
        updater.update()
        timed = step + 1 - warmup
        last = step + 1 == warmup + iterations or (
            max_seconds is not None and timed >= min_timed and meter.started is not None
            and time.perf_counter() - meter.started >= max_seconds)
        if on_gpu and (last or step + 1 == warmup):
            device.device.synchronize()   # kernels run asynchronously; time the finished work
        meter.step(marks["images"])
        if timed > 0:
            data_seconds += marks["data_ready"] - started
        losses.append(classifier.loss.array)   # float() here would wait for the GPU
        if last:
            break
    return meter, data_seconds, [float(loss) for loss in losses]


def _settings_in_effect(on_gpu):
    import chainer
    settings = {key: str(getattr(chainer.config, key)) for key in
                ("use_cudnn", "autotune", "dtype", "use_cudnn_tensor_core")}
    if on_gpu:
        from chainer.backends import cuda
        settings["max_workspace_size"] = cuda.get_max_workspace_size()
    return settings


def _iterator_text(train_iter):
    text = type(train_iter).__name__
    if text == "MultiprocessIterator":
        text += f"(n_processes={train_iter.n_processes})"
    return text


def _print_report(report, print_fn):
    print_fn(f"# device: {report['device']}")
    print_fn(f"# levers: {', '.join(report['applied']) or 'none (baseline)'}")
    for name, why in report["not_applied"].items():
        print_fn(f"# {name}: {why}")
    for note in report["notes"]:
        print_fn(f"# {note}")
    print_fn(f"# model {report['model']}, batch {report['batchsize']}, dtype {report['compute_dtype']} "
             f"(parameters {report['param_dtype']}), iterator {report['iterator']}, static_graph "
             f"{'on' if report['static_graph'] else 'off'}")
    print_fn(f"# data: {report['data']}")
    print_fn(f"{report['iterations_per_sec']:.3f} iters/sec. ({report['iterations_timed']} iterations "
             f"after {report['warmup']} warm-up; {100 * report['data_fraction']:.0f}% of the time "
             f"waiting for data)")
    print_fn(throughput.throughput_line(report["images"], report["seconds"]))


def _make_optimizer(classifier, lr, cfg):
    """MomentumSGD at the rate scaled with the batch; with FP16, loss scaling and fp32 updates."""
    import chainer
    optimizer = chainer.optimizers.MomentumSGD(lr * cfg.batch_factor)
    optimizer.setup(classifier)
    if cfg.loss_scaling:
        optimizer.loss_scaling()
        optimizer.use_fp32_update()
    return optimizer


def _timing_fields(result, timed_iterations, warmup, data_seconds):
    """The report's timing entries from the meter's (images/sec, images, seconds)."""
    images_per_sec, n_timed_images, seconds = result
    return {"iterations_timed": timed_iterations, "warmup": warmup,
            "seconds": seconds, "images": n_timed_images,
            "iterations_per_sec": timed_iterations / seconds, "images_per_sec": images_per_sec,
            "data_seconds": data_seconds, "data_fraction": min(1.0, data_seconds / seconds)}


def train_and_measure(levers=(), gpu=None, iterations=20, warmup=3, batchsize=32, model="cnn",
                      dataset="synthetic", width=None, image_size=32, source_size=64, n_images=512,
                      n_processes=None, max_seconds=None, min_timed=2, lr=0.02, seed=0,
                      make_iterator=None, print_fn=print):
    """Train with `levers` switched on; return a report dict (iterations/sec, images/sec, ...).

    The first `warmup` iterations are not timed (allocation, worker start-up, autotune, the static
    schedule). Timing stops after `iterations` timed iterations, or earlier once `max_seconds` have
    passed and `min_timed` were timed. `make_iterator(dataset, batchsize)` replaces the iterator
    the levers would build (the notebook's exercise).
    """
    import contextlib

    import chainer
    import numpy
    if iterations < 1 or warmup < 0 or batchsize < 1:
        raise ValueError("need iterations >= 1, warmup >= 0 and batchsize >= 1")
    cfg, applied, not_applied = configure(levers, gpu is not None)
    notes = []
    device, device_text = _open_device(gpu, cfg, applied, not_applied)
    batch = batchsize * cfg.batch_factor
    train, data_text = encoded_dataset(dataset, max(n_images, 2 * batch), source_size, image_size, seed)

    with contextlib.ExitStack() as stack:
        _enter_settings(stack, cfg, gpu, notes)
        numpy.random.seed(seed)
        classifier, predictor = _build_model(model, width, 10, cfg.static_graph)
        classifier.to_device(device)
        optimizer = _make_optimizer(classifier, lr, cfg)
        train_iter = _training_iterator(cfg, train, batch, n_processes or default_n_processes(),
                                        make_iterator)
        stack.callback(train_iter.finalize)
        compute_dtype = chainer.get_dtype()
        marks = {}
        updater = chainer.training.updaters.StandardUpdater(
            train_iter, optimizer, converter=_timing_converter(marks), device=device)
        meter, data_seconds, losses = _timed_updates(updater, classifier, device, gpu is not None, marks,
                                                     iterations, warmup, max_seconds, min_timed)
        result = meter.result()
        param_dtype = str(next(iter(classifier.params())).dtype)
        config_now = _settings_in_effect(gpu is not None)
        static_in_use = bool(cfg.static_graph and getattr(predictor, "schedule_manager", None))

    if result is None:
        raise RuntimeError(f"no iteration was timed ({warmup} warm-up, {iterations} asked)")
    report = {
        "levers": parse_levers(levers), "applied": applied, "not_applied": not_applied, "notes": notes,
        "device": device_text, "backend": "cupy" if gpu is not None else "numpy",
        "model": model if width is None else f"{model} (width {width})", "data": data_text,
        "batchsize": batch, **_timing_fields(result, meter.steps - warmup, warmup, data_seconds),
        "compute_dtype": str(compute_dtype), "param_dtype": param_dtype,
        "iterator": _iterator_text(train_iter), "static_graph": static_in_use, "config": config_now,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "loss_first": losses[0], "loss_last": losses[-1],
        "loss_finite": bool(numpy.all(numpy.isfinite(losses))),
    }
    if print_fn:
        _print_report(report, print_fn)
    return report


def _worker_parser():
    parser = argparse.ArgumentParser(
        prog="python -m handson_lib.experiments.tuning",
        description="Train with some of seed 004's levers switched on; print iterations/sec.")
    parser.add_argument("--levers", default="",
                        help=f"comma-separated, from {','.join(LEVER_NAMES)} (empty: the baseline)")
    add_run_arguments(parser)
    parser.add_argument("--report", action="store_true",
                        help=f"end with one line '{REPORT_PREFIX}<json>' for the benchmark")
    return parser


def add_run_arguments(parser, iterations=20, warmup=3):
    parser.add_argument("--gpu", type=int, default=None, help="GPU id (default: CPU, NumPy)")
    parser.add_argument("--iterations", type=int, default=iterations, help="timed iterations")
    parser.add_argument("--warmup", type=int, default=warmup, help="iterations left out of the timing")
    parser.add_argument("--batchsize", "-b", type=int, default=32)
    parser.add_argument("--model", "-m", default=None,
                        help="cnn, cnn-bn, resnet18 or mlp (default: cnn on CPU, resnet18 on GPU)")
    parser.add_argument("--width", type=int, default=None, help="channels of the cnn (default 32)")
    parser.add_argument("--dataset", "-d", default="synthetic",
                        help="'synthetic', 'digits' or a CIFAR / MNIST file (see handson_lib.data)")
    parser.add_argument("--image-size", type=int, default=32, help="pixels the model sees")
    parser.add_argument("--source-size", type=int, default=64, help="pixels of the stored JPEGs")
    parser.add_argument("--n-processes", type=int, default=None,
                        help="MultiprocessIterator workers (default: cores - 1)")
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="stop timing after this many seconds (at least 2 timed iterations)")


def default_model(model, gpu):
    return model or ("resnet18" if gpu is not None else "cnn")


def worker_main(argv=None):
    args = _worker_parser().parse_args(argv)
    try:
        report = train_and_measure(
            parse_levers(args.levers), gpu=args.gpu, iterations=args.iterations, warmup=args.warmup,
            batchsize=args.batchsize, model=default_model(args.model, args.gpu), dataset=args.dataset,
            width=args.width, image_size=args.image_size, source_size=args.source_size,
            n_processes=args.n_processes, max_seconds=args.max_seconds)
    except (ValueError, RuntimeError, NotImplementedError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.report:
        print(REPORT_PREFIX + json.dumps(report), flush=True)
    return 0
