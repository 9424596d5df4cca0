"""Seed 004's speed-up levers, switched on in turn in one training script, measured here.

The talk (GTC Japan 2018, "Chainer における深層学習の高速化", Preferred Networks) took ResNet-50
training on one V100 from 4.18 to 15.54 iterations/sec (about 3.7x) with eight changed lines:
cuDNN, cuDNN autotune (+ workspace), FP16, a MultiprocessIterator, `@static_graph`, and, as a
bonus, a bigger batch. This module holds

* the levers as data (`LEVERS`): the talk's exact lines, the lines this course runs on
  Chainer 7.8.1, whether the lever needs a GPU, and a function that switches it on in a `RunConfig`;
* one training script (`python -m handson_lib.experiments.tuning --levers cudnn,autotune,...`) that trains
  with a set of levers and reports iterations/sec and images/sec with the warm-up excluded;
* `run_levers()`: every cumulative step in a fresh process, repeats alternating (A B C A B C),
  median and spread; `table()` and `bars_figure()`; `talk_result()` holds the seed's numbers in the
  same form; `compare_iterators()` measures a student's iterator against `SerialIterator` (its
  result carries the measurements, not the speed-up: computing that is the notebook's question).

A lever that needs a GPU is never measured on a CPU: its step says "needs a GPU: not applied" and
carries no figure. The loader decodes JPEG images and augments them (random crop, resize, flip) in
float32, as the talk's ImageNet loader does, so that `MultiprocessIterator` has work to hide.

No CuPy or matplotlib at import time: the `handson` command line imports this module.
"""

import argparse
import dataclasses
import io
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

from handson_lib import data, launch
from handson_lib.messages import tr
from handson_lib.experiments import stats
from handson_lib.runtime import devices, models, throughput
from handson_lib.sites import jobs
from handson_lib.plotting import pyplot

REPORT_PREFIX = "TUNING-REPORT "
BATCH_FACTOR = 4            # the talk: batch x4 in FP32 (x8 in FP16)
WORKSPACE_BYTES = 512 * 1024 * 1024   # the talk's chainer.cuda.set_max_workspace_size(512*1024*1024)
TALK_SOURCE = ("seed 004: GTC Japan 2018 talk \"Optimizing Deep Learning with Chainer\" (Preferred "
               "Networks); ResNet-50, ImageNet, one Tesla V100, batch 32")


# ----------------------------------------------------------------------------- the levers

@dataclasses.dataclass
class RunConfig:
    """What one training run switches on. The baseline is the talk's first run (no cuDNN)."""

    use_cudnn: str = "never"
    autotune: bool = False
    workspace_bytes: int = 0          # 0: CuPy's default
    dtype: str = "float32"            # or "mixed16"
    loss_scaling: bool = False
    tensor_core: bool = False         # use_cudnn_tensor_core='always' where compute capability >= 7.0
    iterator: str = "serial"          # or "multiprocess"
    static_graph: bool = False
    batch_factor: int = 1


@dataclasses.dataclass(frozen=True)
class Lever:
    name: str
    title: str
    needs_gpu: bool
    talk_lines: tuple
    lines: tuple
    what: str
    apply: object                     # function(RunConfig) -> None
    carried_on_cpu: bool = True       # kept in the later cumulative steps on a CPU


def _apply_cudnn(cfg):
    cfg.use_cudnn = "always"


def _apply_autotune(cfg):
    cfg.autotune = True
    cfg.workspace_bytes = WORKSPACE_BYTES


def _apply_fp16(cfg):
    cfg.dtype = "mixed16"
    cfg.loss_scaling = True
    cfg.tensor_core = True


def _apply_multiprocess(cfg):
    cfg.iterator = "multiprocess"


def _apply_static_graph(cfg):
    cfg.static_graph = True


def _apply_batch(cfg):
    cfg.batch_factor = BATCH_FACTOR


LEVERS = (
    Lever("cudnn", "cuDNN", True,
          ("pip install cupy-cuda92   # the CuPy wheel that bundles cuDNN",),
          ("chainer.global_config.use_cudnn = 'always'   # the baseline ran with 'never'",),
          "convolutions by cuDNN instead of CuPy's im2col + GEMM", _apply_cudnn),
    Lever("autotune", "autotune", True,
          ("chainer.global_config.autotune = True",
           "chainer.cuda.set_max_workspace_size(512*1024*1024)"),
          ("chainer.global_config.autotune = True",
           "chainer.cuda.set_max_workspace_size(512 * 1024 * 1024)"),
          "cuDNN tries every convolution algorithm once and keeps the fastest", _apply_autotune),
    Lever("fp16", "FP16", False,
          ("chainer.global_config.dtype = np.dtype('float16')",
           "# and preprocessing forced to float32 (NumPy float16 is slow)"),
          ("chainer.global_config.dtype = chainer.mixed16",
           "optimizer.loss_scaling()      # dynamic loss scaling against fp16 underflow",
           "optimizer.use_fp32_update()   # fp32 master copy of the weights",
           "chainer.global_config.use_cudnn_tensor_core = 'always'   # GPU, compute capability >= 7.0",
           "# the loader stays float32; the converter casts each batch"),
          "float16 weights and activations; TensorCores on a GPU, plain NumPy on a CPU",
          _apply_fp16, carried_on_cpu=False),
    Lever("multiprocess", "MultiprocessIterator", False,
          ("train_iter = chainer.iterators.MultiprocessIterator(",
           "    train, args.batchsize, n_processes=16)"),
          ("train_iter = chainer.iterators.MultiprocessIterator(",
           "    train, batchsize, n_processes=n_processes)"),
          "loading and augmentation in worker processes, prefetched while the model trains",
          _apply_multiprocess),
    Lever("static_graph", "static_graph", False,
          ("@static_graph   # on the model's forward",),
          ("from chainer.graph_optimizations.static_graph import static_graph",
           "@static_graph   # on the model's forward"),
          "the first iteration records a schedule; later ones replay it with less Python overhead",
          _apply_static_graph),
    Lever("batch", f"batch x{BATCH_FACTOR}", False,
          ("# batchsize x4 (FP32) or x8 (FP16); raise the learning rate by the same ratio",),
          (f"batchsize *= {BATCH_FACTOR}",
           f"lr *= {BATCH_FACTOR}   # linear scaling rule (seed 003)"),
          "more images per iteration: fixed per-iteration costs are shared by more images",
          _apply_batch),
)
LEVER_NAMES = tuple(lever.name for lever in LEVERS)
LEVERS_BY_NAME = {lever.name: lever for lever in LEVERS}


def parse_levers(levers):
    """A list of lever names from 'a,b' or an iterable; unknown or repeated names are errors."""
    if levers is None:
        return list(LEVER_NAMES)
    if isinstance(levers, str):
        levers = [name for name in levers.replace(" ", "").split(",") if name]
    names = list(levers)
    unknown = [name for name in names if name not in LEVERS_BY_NAME]
    if unknown:
        raise ValueError(f"unknown lever(s) {', '.join(map(repr, unknown))}; "
                         f"choose from {', '.join(LEVER_NAMES)}")
    if len(set(names)) != len(names):
        raise ValueError(f"a lever is named twice in {names}")
    return names


def configure(levers, gpu):
    """(RunConfig, applied, not_applied): GPU-only levers are not applied on a CPU, and say so."""
    cfg = RunConfig()
    applied, not_applied = [], {}
    for name in parse_levers(levers):
        lever = LEVERS_BY_NAME[name]
        if lever.needs_gpu and not gpu:
            not_applied[name] = "needs a GPU: not applied"
            continue
        lever.apply(cfg)
        applied.append(name)
    return cfg, applied, not_applied


def describe_levers(print_fn=print):
    """Each lever: what it does, the talk's lines and the lines run here. Which levers need a GPU
    is left out: notebook 05 asks it."""
    for lever in LEVERS:
        print_fn(f"+ {lever.title}: {lever.what}")
        print_fn("    talk:")
        for line in lever.talk_lines:
            print_fn(f"      {line}")
        print_fn("    here (Chainer 7.8.1):")
        for line in lever.lines:
            print_fn(f"      {line}")


# ----------------------------------------------------------------------------- data

class DecodeAugment:
    """JPEG bytes -> random crop (50-100 % of the area) -> resize -> random flip -> float32 CHW.

    The talk's loader did the same on ImageNet (random crop + flip). It works in float32 whatever
    Chainer's dtype: NumPy float16 is slow, the talk's own finding. Each process draws its own
    random numbers (forked MultiprocessIterator workers would otherwise repeat the same ones).
    """

    def __init__(self, blobs, labels, out_size=32, seed=0):
        self.blobs = blobs
        self.labels = labels
        self.out_size = out_size
        self.seed = seed
        self._rng = None
        self._pid = None

    def __len__(self):
        return len(self.blobs)

    def _random(self):
        import numpy
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._rng = numpy.random.default_rng([self.seed, self._pid])
        return self._rng

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        import numpy
        from PIL import Image
        rng = self._random()
        image = Image.open(io.BytesIO(self.blobs[index]))
        image.load()
        width, height = image.size
        side = int(min(width, height) * numpy.sqrt(rng.uniform(0.5, 1.0)))
        left = int(rng.integers(0, width - side + 1))
        top = int(rng.integers(0, height - side + 1))
        image = image.resize((self.out_size, self.out_size), Image.BILINEAR,
                             box=(left, top, left + side, top + side))
        x = numpy.asarray(image, dtype=numpy.float32) * numpy.float32(1.0 / 255.0)
        x = x[None] if x.ndim == 2 else x.transpose(2, 0, 1)
        if rng.random() < 0.5:
            x = x[:, :, ::-1]
        return numpy.ascontiguousarray(x), self.labels[index]


def encoded_dataset(dataset="synthetic", n_images=512, source_size=64, out_size=32, seed=0):
    """(DecodeAugment, description): `n_images` training images stored as JPEG bytes."""
    import numpy
    from PIL import Image
    if dataset == "synthetic":
        train, _ = data.synthetic_cifar(n_train=n_images, n_test=10, seed=seed, size=source_size,
                                        dtype=numpy.float32)
        what = f"synthetic CIFAR-shaped images at {source_size}px (not CIFAR-10)"
    else:
        train, _, info = data.get_dataset(dataset, ndim=3, n_train=n_images, seed=seed,
                                          dtype=numpy.float32, announce=False)
        what = info.description
    x, labels = train._datasets
    x, labels = x[:n_images], numpy.asarray(labels[:n_images], dtype=numpy.int32)
    pixels = numpy.clip(x * 255.0 + 0.5, 0, 255).astype(numpy.uint8)
    blobs = []
    for image in pixels:
        picture = Image.fromarray(image[0] if image.shape[0] == 1 else image.transpose(1, 2, 0))
        buffer = io.BytesIO()
        picture.save(buffer, format="JPEG", quality=90)
        blobs.append(buffer.getvalue())
    return (DecodeAugment(blobs, labels, out_size=out_size, seed=seed),
            f"{len(blobs)} JPEG images ({what}), decoded + random crop + resize to {out_size}px + flip")


# ----------------------------------------------------------------------------- the training script

def iterator_facts(make_iterator, batchsize, n_images=16):
    """What a test checks of a `make_iterator(dataset, batchsize)`, as data: the iterator's class
    name, whether it is a MultiprocessIterator, its batch size, repeat and worker processes, and
    the length and example shape of its first batch (a small encoded synthetic set)."""
    import chainer
    sample, _ = encoded_dataset("synthetic", n_images=n_images, source_size=40)
    iterator = make_iterator(sample, batchsize)
    try:
        facts = {"class": type(iterator).__name__,
                 "multiprocess": isinstance(iterator, chainer.iterators.MultiprocessIterator),
                 "batch_size": getattr(iterator, "batch_size", None), "repeat": bool(getattr(iterator, "repeat", False)),
                 "n_processes": getattr(iterator, "n_processes", None)}
        try:
            batch = iterator.next()
            facts.update(batch_length=len(batch), example_shape=list(batch[0][0].shape))
        except Exception as error:   # not an iterator of the dataset: the test's asserts say what is expected
            facts.update(batch_length=None, example_shape=None, error=f"{type(error).__name__}: {error}"[:300])
    finally:
        if hasattr(iterator, "finalize"):
            iterator.finalize()
    return facts


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
        optimizer = chainer.optimizers.MomentumSGD(lr * cfg.batch_factor)
        optimizer.setup(classifier)
        if cfg.loss_scaling:
            optimizer.loss_scaling()
            optimizer.use_fp32_update()
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
    images_per_sec, n_timed_images, seconds = result
    timed_iterations = meter.steps - warmup
    report = {
        "levers": parse_levers(levers), "applied": applied, "not_applied": not_applied, "notes": notes,
        "device": device_text, "backend": "cupy" if gpu is not None else "numpy",
        "model": model if width is None else f"{model} (width {width})", "data": data_text,
        "batchsize": batch, "iterations_timed": timed_iterations, "warmup": warmup,
        "seconds": seconds, "images": n_timed_images,
        "iterations_per_sec": timed_iterations / seconds, "images_per_sec": images_per_sec,
        "data_seconds": data_seconds, "data_fraction": min(1.0, data_seconds / seconds),
        "compute_dtype": str(compute_dtype), "param_dtype": param_dtype,
        "iterator": _iterator_text(train_iter), "static_graph": static_in_use, "config": config_now,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "loss_first": losses[0], "loss_last": losses[-1],
        "loss_finite": bool(numpy.all(numpy.isfinite(losses))),
    }
    if print_fn:
        _print_report(report, print_fn)
    return report


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


def _worker_parser():
    parser = argparse.ArgumentParser(
        prog="python -m handson_lib.experiments.tuning",
        description="Train with some of seed 004's levers switched on; print iterations/sec.")
    parser.add_argument("--levers", default="",
                        help=f"comma-separated, from {','.join(LEVER_NAMES)} (empty: the baseline)")
    _add_run_arguments(parser)
    parser.add_argument("--report", action="store_true",
                        help=f"end with one line '{REPORT_PREFIX}<json>' for the benchmark")
    return parser


def _add_run_arguments(parser, iterations=20, warmup=3):
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


def _default_model(model, gpu):
    return model or ("resnet18" if gpu is not None else "cnn")


def worker_main(argv=None):
    args = _worker_parser().parse_args(argv)
    try:
        report = train_and_measure(
            parse_levers(args.levers), gpu=args.gpu, iterations=args.iterations, warmup=args.warmup,
            batchsize=args.batchsize, model=_default_model(args.model, args.gpu), dataset=args.dataset,
            width=args.width, image_size=args.image_size, source_size=args.source_size,
            n_processes=args.n_processes, max_seconds=args.max_seconds)
    except (ValueError, RuntimeError, NotImplementedError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.report:
        print(REPORT_PREFIX + json.dumps(report), flush=True)
    return 0


# ----------------------------------------------------------------------------- the benchmark

def plan_steps(levers=None, cumulative=True, gpu=False):
    """The steps to measure: [{label, lever, levers, runnable, note}], the baseline first.

    Cumulative (the talk's chart): each step adds one lever to the previous step's. On a CPU a
    GPU-only step is not run, and FP16 is not carried into the later steps (NumPy has no float16
    BLAS; the later levers are measured in float32). `cumulative=False`: each lever alone.
    """
    names = parse_levers(levers)
    steps = [{"label": "baseline", "lever": None, "levers": [], "runnable": True, "note": ""}]
    active = []
    for name in names:
        lever = LEVERS_BY_NAME[name]
        runnable = gpu or not lever.needs_gpu
        in_effect = (active if cumulative else []) + [name]
        note = "" if runnable else "needs a GPU: not applied"
        if runnable and cumulative and not gpu and not lever.carried_on_cpu:
            note = "measured; not carried into the later CPU steps (NumPy float16 has no BLAS)"
        steps.append({"label": f"+ {lever.title}", "lever": name, "levers": in_effect,
                      "runnable": runnable, "note": note})
        if cumulative and runnable and (gpu or lever.carried_on_cpu):
            active = in_effect
    return steps


def worker_command(step_levers, iterations, warmup, batchsize, device=None, model=None, width=None,
                   image_size=32, source_size=64, n_processes=None, max_seconds=None, dataset="synthetic"):
    cmd = [sys.executable, "-m", "handson_lib.experiments.tuning", "--report", "--levers", ",".join(step_levers),
           "--iterations", str(iterations), "--warmup", str(warmup), "--batchsize", str(batchsize),
           "--model", _default_model(model, device), "--dataset", dataset,
           "--image-size", str(image_size), "--source-size", str(source_size)]
    for flag, value in (("--gpu", device), ("--width", width), ("--n-processes", n_processes),
                        ("--max-seconds", max_seconds)):
        if value is not None:
            cmd += [flag, str(value)]
    return cmd


def parse_report(output):
    """The worker's JSON report from its output, or None."""
    for line in reversed(output.splitlines()):
        if line.startswith(REPORT_PREFIX):
            return json.loads(line[len(REPORT_PREFIX):])
    return None


def run_levers(levers=None, repeats=3, iterations=20, warmup=3, batchsize=32, device=None,
               cumulative=True, model=None, width=None, image_size=32, source_size=64,
               n_processes=None, max_seconds=None, dataset="synthetic", timeout=600, threads=1,
               print_fn=print):
    """Measure every step of `plan_steps` in a fresh process, repeats alternating (A B C A B C).

    device: None for the CPU, or a GPU id. `threads` OpenMP/BLAS threads for the training
    process (on a CPU the other cores are left to the MultiprocessIterator workers). Returns the
    result dict that `table()` and `bars_figure()` show (and `handson bench tuning` saves).
    """
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    steps = plan_steps(levers, cumulative, gpu=device is not None)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    runs = {i: [] for i, step in enumerate(steps) if step["runnable"]}
    for repeat in range(repeats):
        for i, reports in runs.items():
            step = steps[i]
            cmd = worker_command(step["levers"], iterations, warmup, batchsize, device, model, width,
                                 image_size, source_size, n_processes, max_seconds, dataset)
            outcome = launch.run_watched(cmd, timeout=timeout, env=env)
            report = parse_report(outcome.output)
            if not outcome.ok or report is None:
                raise RuntimeError(f"step {step['label']!r} failed (exit {outcome.returncode}):\n"
                                   f"{outcome.tail(25)}")
            reports.append(report)
            if print_fn:
                print_fn(f"  run {repeat + 1}/{repeats} {step['label']:24s} "
                         f"{report['iterations_per_sec']:8.2f} it/s {report['images_per_sec']:9.1f} img/s")
    return _assemble(steps, runs, {
        "benchmark": "tuning", "source": "measured here", "cumulative": cumulative,
        "repeats": repeats, "iterations": iterations, "warmup": warmup, "batchsize": batchsize,
        "max_seconds": max_seconds, "threads": threads,
        "device": next((r[-1]["device"] for r in runs.values() if r), None),
        "model": next((r[-1]["model"] for r in runs.values() if r), None),
        "data": next((r[-1]["data"] for r in runs.values() if r), None)})


def _assemble(steps, runs, meta, with_speedups=True):
    """The result dict: every step with the spread of its runs; `with_speedups` adds each step's
    speed-up over the baseline and the gain of its lever (`_add_speedups`)."""
    meta = {**meta, "link": jobs.job_link()}
    out = []
    for i, step in enumerate(steps):
        reports = runs.get(i, [])
        entry = dict(step, status="measured" if reports else step["note"] or "not run",
                     iterations_per_sec=None, images_per_sec=None, data_fraction=None, report=None)
        if reports:
            entry["iterations_per_sec"] = stats.spread_summary([r["iterations_per_sec"] for r in reports])
            entry["images_per_sec"] = stats.spread_summary([r["images_per_sec"] for r in reports])
            entry["data_fraction"] = statistics.median(r["data_fraction"] for r in reports)
            entry["report"] = reports[-1]
        out.append(entry)
    if with_speedups:
        _add_speedups(out)
    return {**meta, "steps": out}


def _add_speedups(steps):
    """Speed-up in images/sec vs the baseline, and vs the same configuration without the lever."""
    by_levers = {tuple(s["levers"]): s for s in steps if s["images_per_sec"]}
    base = steps[0]["images_per_sec"]
    for step in steps:
        rate = step["images_per_sec"]
        step["speedup"] = stats.ratio_of_medians(rate, base) if rate and base else None
        step["speedup_range"] = stats.ratio_range(rate, base) if rate and base else None
        without = tuple(n for n in step["levers"] if n != step["lever"])
        previous = by_levers.get(without)
        step["gain"] = (stats.ratio_of_medians(rate, previous["images_per_sec"])
                        if rate and previous and step["lever"] else None)


def effects(result):
    """One line per measured lever: its gain, and whether the runs of the two configurations overlap.

    A lever is called faster (slower) only when every run with it beat (lost to) every run without
    it; otherwise the difference is within the noise of this machine.
    """
    by_levers = {tuple(s["levers"]): s for s in result["steps"] if s["images_per_sec"]}
    lines = []
    for step in result["steps"]:
        if not step.get("lever"):
            continue
        if step["images_per_sec"] is None:
            lines.append(f"{step['label']}: {shown_text(step['status'])}")
            continue
        without = by_levers.get(tuple(n for n in step["levers"] if n != step["lever"]))
        if without is None:
            continue
        outcome = stats.verdict(step["images_per_sec"], without["images_per_sec"])
        fields = dict(label=step['label'], gain=step['gain'], other=without['label'])
        if outcome == "faster":
            lines.append(tr("{label}: x{gain:.2f} images/sec vs {other} (faster in every run)", **fields))
        elif outcome == "slower":
            lines.append(tr("{label}: x{gain:.2f} images/sec vs {other} (slower in every run)", **fields))
        else:
            lines.append(tr("{label}: x{gain:.2f} images/sec vs {other} (no clear difference: the runs "
                            "overlap)", **fields))
    return lines


# ----------------------------------------------------------------------------- the talk's numbers

# (label, iterations/sec, batch): read off the progress bars on the slides.
TALK_STEPS = (
    ("baseline", 4.1826, 32, ""),
    ("+ cuDNN", 8.3241, 32, ""),
    ("+ autotune", 8.9338, 32, ""),
    ("+ FP16", 5.0744, 32, "slower: fp16 preprocessing in NumPy"),
    ("+ fp32 preprocessing", 7.6856, 32, "the fix: preprocess in float32"),
    ("+ MultiprocessIterator", 11.89, 32, "FP32 reference: 10.695"),
    ("+ static_graph", 15.539, 32, "3.7x the baseline"),
    ("batch x8 (FP16)", 2.7979, 256, "FP32 batch x4: 2.908 it/s"),
)


def talk_result():
    """The seed's measurements in the form `run_levers` returns (one run each, no spread)."""
    steps = []
    for label, rate, batch, note in TALK_STEPS:
        steps.append({"label": label, "lever": None, "levers": [], "runnable": True, "note": note,
                      "status": "measured", "iterations_per_sec": stats.spread_summary([rate]),
                      "images_per_sec": stats.spread_summary([rate * batch]), "data_fraction": None,
                      "report": {"batchsize": batch}})
    _add_speedups(steps)
    return {"benchmark": "tuning", "source": TALK_SOURCE, "device": "Tesla V100 (16GB)",
            "model": "ResNet-50", "batchsize": 32, "repeats": 1, "steps": steps}


# ----------------------------------------------------------------------------- table and chart

#: The texts of a result (its source, the notes and statuses of its steps) as the reader reads them
#: (HANDSON_LANG): the result keeps the English (its JSON, the tests); `shown_text` translates
#: each piece when it is shown. (pattern of the whole text, its translation from the named groups)
SHOWN_TEXTS = (
    (r"measured here", lambda: tr("measured here")),
    (r"needs a GPU: not applied", lambda: tr("needs a GPU: not applied")),
    (r"measured; not carried into the later CPU steps \(NumPy float16 has no BLAS\)",
     lambda: tr("measured; not carried into the later CPU steps (NumPy float16 has no BLAS)")),
    (r"not run", lambda: tr("not run")),
    (r"static schedule in use", lambda: tr("static schedule in use")),
    (r"params (?P<dtype>\w+)", lambda dtype: tr("params {dtype}", dtype=dtype)),
    (r"TensorCore: needs a GPU: not applied \(NumPy computes float16 on the CPU\)",
     lambda: tr("TensorCore: needs a GPU: not applied (NumPy computes float16 on the CPU)")),
    (r"TensorCore: compute capability (?P<capability>\S+) < 7\.0: not applied",
     lambda capability: tr("TensorCore: compute capability {capability} < 7.0: not applied",
                           capability=capability)),
    # the talk's notes (TALK_STEPS)
    (r"slower: fp16 preprocessing in NumPy", lambda: tr("slower: fp16 preprocessing in NumPy")),
    (r"the fix: preprocess in float32", lambda: tr("the fix: preprocess in float32")),
    (r"FP32 reference: (?P<rate>\S+)", lambda rate: tr("FP32 reference: {rate}", rate=rate)),
    (r"(?P<times>\S+)x the baseline", lambda times: tr("{times}x the baseline", times=times)),
    (r"FP32 batch x4: (?P<rate>\S+) it/s", lambda rate: tr("FP32 batch x4: {rate} it/s", rate=rate)),
)


def shown_text(text):
    """`text` (a source, note or status of a result) in the reader's language; as it is when
    SHOWN_TEXTS does not know it (code such as an iterator's repr, a label)."""
    for pattern, translated in SHOWN_TEXTS:
        match = re.fullmatch(pattern, text or "")
        if match:
            return translated(**match.groupdict())
    return text


def table(result):
    """The result as a text table: it/s (median, range), img/s, speed-ups, time waiting for data
    (its prose in the reader's language, HANDSON_LANG; the result's own texts stay English)."""
    source = shown_text(result.get('source', ''))
    if result.get("repeats", 1) > 1:
        lines = [tr("{source}: {device}, {model}; median of {repeats} runs, warm-up excluded",
                    source=source, device=result.get('device') or '', model=result.get('model') or '',
                    repeats=result['repeats'])]
    else:
        lines = [f"{source}: {result.get('device') or ''}, {result.get('model') or ''}"]
    header = (f"{'step':24s} {'batch':>5s} {'it/s':>8s} {'(range)':>15s} {'img/s':>8s} "
              f"{'x base':>7s} {'x lever':>7s} {'data':>5s}  note")
    lines += [header, "-" * len(header)]
    for step in result["steps"]:
        rate = step["iterations_per_sec"]
        if rate is None:
            lines.append(f"{step['label']:24s} {'':>5s} {'-':>8s} {'':>15s} {'-':>8s} {'-':>7s} "
                         f"{'-':>7s} {'':>5s}  {shown_text(step['status'])}")
            continue
        batch = (step.get("report") or {}).get("batchsize", "")
        spread = f"({rate['min']:.2f}-{rate['max']:.2f})" if len(rate["runs"]) > 1 else ""
        gain = f"{step['gain']:.2f}" if step.get("gain") else "-"
        over_base = f"{step['speedup']:.2f}" if step.get("speedup") else "-"
        data = f"{100 * step['data_fraction']:.0f}%" if step.get("data_fraction") is not None else ""
        note = step.get("note") or ""
        report = step.get("report") or {}
        extras = []
        if report.get("param_dtype") and report["param_dtype"] != "float32":
            extras.append(f"params {report['param_dtype']}")
        if report.get("iterator", "").startswith("Multiprocess"):
            extras.append(report["iterator"])
        if report.get("static_graph"):
            extras.append("static schedule in use")
        extras += report.get("notes", [])
        note = "; ".join(dict.fromkeys(shown_text(x) for x in [note, *extras] if x))
        lines.append(f"{step['label']:24s} {batch!s:>5s} {rate['median']:8.2f} {spread:>15s} "
                     f"{step['images_per_sec']['median']:8.1f} {over_base:>7s} {gain:>7s} "
                     f"{data:>5s}  {note}")
    lines.append(tr("x base: images/sec over the baseline's; x lever: over the same configuration without "
                    "this step's lever; data: share of the time spent waiting for the next batch"))
    return "\n".join(lines)


def bars_figure(result, title=None):
    """The talk's chart: iterations/sec per step (left), images/sec with the speed-up (right).

    Steps that need a GPU and were not run are grey outlines marked "needs GPU".
    """
    plt = pyplot()
    steps = result["steps"]
    labels = [s["label"] for s in steps]
    fig, axes = plt.subplots(1, 2, figsize=(max(10, 1.9 * len(steps)), 4.2))
    panels = (("iterations_per_sec", "iterations/sec."), ("images_per_sec", "images/sec."))
    for ax, (key, ylabel) in zip(axes, panels):
        measured = [s[key]["median"] for s in steps if s[key]]
        top = max(measured) if measured else 1.0
        for x, step in enumerate(steps):
            value = step[key]
            if value is None:
                ax.bar(x, top * 0.15, color="none", edgecolor="grey", hatch="//", linestyle="--")
                ax.text(x, top * 0.17, "needs GPU" if "GPU" in step["status"] else step["status"],
                        ha="center", va="bottom", fontsize=8, color="grey", rotation=90)
                continue
            color = "#C44E52" if step.get("lever") == "fp16" or step["label"] == "+ FP16" else "#4C72B0"
            ax.bar(x, value["median"], color=color,
                   yerr=[[value["median"] - value["min"]], [value["max"] - value["median"]]]
                   if len(value["runs"]) > 1 else None, capsize=3)
            text = (f"x{step['speedup']:.2f}" if key == "images_per_sec" and step.get("speedup")
                    else f"{value['median']:.2f}")
            ax.text(x, value["max"] * 1.01, text, ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(steps)))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, top * 1.25)
    axes[0].set_title("iterations/sec. (the talk's measure)", fontsize=10)
    axes[1].set_title("images/sec., speed-up over the baseline on top", fontsize=10)
    fig.suptitle(title or f"{result.get('source', '')}: {result.get('device') or ''}, "
                 f"{result.get('model') or ''}", fontsize=10)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- the notebook's exercise

def compare_iterators(make_iterator, repeats=3, iterations=10, warmup=2, batchsize=32, width=None,
                      source_size=64, max_seconds=None, threads=1, label=None, print_fn=print):
    """SerialIterator vs `make_iterator(dataset, batchsize)` in this process, alternating runs.

    Same model, data and float32 settings; BLAS limited to `threads` threads as in `run_levers`.
    Returns a result dict with the steps "baseline" and `label` (default "+ your iterator").
    """
    from threadpoolctl import threadpool_limits
    label = label or "+ your iterator"
    steps = [{"label": "baseline", "lever": None, "levers": [], "runnable": True,
              "note": "SerialIterator"},
             {"label": label, "lever": "yours", "levers": ["yours"], "runnable": True, "note": ""}]
    runs = {0: [], 1: []}
    common = {"iterations": iterations, "warmup": warmup, "batchsize": batchsize, "model": "cnn",
              "width": width, "source_size": source_size, "max_seconds": max_seconds, "print_fn": None}
    with threadpool_limits(threads):
        for repeat in range(repeats):
            for i, maker in ((0, None), (1, make_iterator)):
                report = train_and_measure((), make_iterator=maker, **common)
                runs[i].append(report)
                if print_fn:
                    print_fn(f"  run {repeat + 1}/{repeats} {steps[i]['label']:24s} "
                             f"{report['iterations_per_sec']:8.2f} it/s ({report['iterator']})")
    steps[1]["note"] = runs[1][-1]["iterator"]
    # No speed-up in this result: notebook 05 asks the student to compute it from the runs.
    return _assemble(steps, runs, with_speedups=False, meta={"benchmark": "tuning-iterator", "source": "measured here",
                                   "repeats": repeats, "iterations": iterations, "warmup": warmup,
                                   "batchsize": batchsize, "device": runs[0][-1]["device"],
                                   "model": runs[0][-1]["model"], "threads": threads})


# ----------------------------------------------------------------------------- `handson bench tuning`

def add_arguments(parser):
    parser.add_argument("--levers", default=",".join(LEVER_NAMES),
                        help="levers in the order they are switched on (default: the talk's order)")
    parser.add_argument("--each", action="store_true",
                        help="each lever alone against the baseline instead of cumulative steps")
    parser.add_argument("--repeats", type=int, default=3, help="runs per step, alternating")
    _add_run_arguments(parser, iterations=30, warmup=3)
    parser.set_defaults(max_seconds=20.0)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads of the training process")
    parser.add_argument("--timeout", type=float, default=900, help="seconds before a run is stopped")
    parser.add_argument("--out", default="results/bench", help="folder for tuning.json")
    parser.add_argument("--plot", default=None, help="bar chart PNG (default: OUT/tuning.png)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def main(args):
    progress = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else print
    try:
        result = run_levers(parse_levers(args.levers), repeats=args.repeats, iterations=args.iterations,
                            warmup=args.warmup, batchsize=args.batchsize, device=args.gpu,
                            cumulative=not args.each, model=args.model, width=args.width,
                            image_size=args.image_size, source_size=args.source_size,
                            n_processes=args.n_processes, max_seconds=args.max_seconds,
                            dataset=args.dataset, timeout=args.timeout, threads=args.threads,
                            print_fn=progress)
    except (ValueError, RuntimeError) as error:
        print(f"handson bench tuning: {error}", file=sys.stderr)
        return 2
    os.environ.setdefault("MPLBACKEND", "Agg")   # a file, no display
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tuning.json").write_text(json.dumps(result, indent=2))
    plot = Path(args.plot) if args.plot else out / "tuning.png"
    plot.parent.mkdir(parents=True, exist_ok=True)
    bars_figure(result).savefig(plot, dpi=110)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(table(result))
        print(f"wrote {out / 'tuning.json'} and {plot}")
    return 0


if __name__ == "__main__":
    sys.exit(worker_main())
