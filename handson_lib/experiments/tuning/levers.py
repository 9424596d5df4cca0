"""Seed 004's speed-up levers as data: the talk's lines, the lines this course runs on Chainer
7.8.1, whether a lever needs a GPU, and what it switches on in a `RunConfig`."""

import dataclasses

from handson_lib.messages import tr

BATCH_FACTOR = 4            # the talk: batch x4 in FP32 (x8 in FP16)

WORKSPACE_BYTES = 512 * 1024 * 1024   # the talk's chainer.cuda.set_max_workspace_size(512*1024*1024)


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
    what: object                      # () -> what it does, in the reader's language
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
          lambda: tr("convolutions by cuDNN instead of CuPy's im2col + GEMM"), _apply_cudnn),
    Lever("autotune", "autotune", True,
          ("chainer.global_config.autotune = True",
           "chainer.cuda.set_max_workspace_size(512*1024*1024)"),
          ("chainer.global_config.autotune = True",
           "chainer.cuda.set_max_workspace_size(512 * 1024 * 1024)"),
          lambda: tr("cuDNN tries every convolution algorithm once and keeps the fastest"), _apply_autotune),
    Lever("fp16", "FP16", False,
          ("chainer.global_config.dtype = np.dtype('float16')",
           "# and preprocessing forced to float32 (NumPy float16 is slow)"),
          ("chainer.global_config.dtype = chainer.mixed16",
           "optimizer.loss_scaling()      # dynamic loss scaling against fp16 underflow",
           "optimizer.use_fp32_update()   # fp32 master copy of the weights",
           "chainer.global_config.use_cudnn_tensor_core = 'always'   # GPU, compute capability >= 7.0",
           "# the loader stays float32; the converter casts each batch"),
          lambda: tr("float16 weights and activations; TensorCores on a GPU, plain NumPy on a CPU"),
          _apply_fp16, carried_on_cpu=False),
    Lever("multiprocess", "MultiprocessIterator", False,
          ("train_iter = chainer.iterators.MultiprocessIterator(",
           "    train, args.batchsize, n_processes=16)"),
          ("train_iter = chainer.iterators.MultiprocessIterator(",
           "    train, batchsize, n_processes=n_processes)"),
          lambda: tr("loading and augmentation in worker processes, prefetched while the model trains"),
          _apply_multiprocess),
    Lever("static_graph", "static_graph", False,
          ("@static_graph   # on the model's forward",),
          ("from chainer.graph_optimizations.static_graph import static_graph",
           "@static_graph   # on the model's forward"),
          lambda: tr("the first iteration records a schedule; later ones replay it with less Python overhead"),
          _apply_static_graph),
    Lever("batch", f"batch x{BATCH_FACTOR}", False,
          ("# batchsize x4 (FP32) or x8 (FP16); raise the learning rate by the same ratio",),
          (f"batchsize *= {BATCH_FACTOR}",
           f"lr *= {BATCH_FACTOR}   # linear scaling rule (seed 003)"),
          lambda: tr("more images per iteration: fixed per-iteration costs are shared by more images"),
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
        print_fn(f"+ {lever.title}: {lever.what()}")
        print_fn("    " + tr("talk:"))
        for line in lever.talk_lines:
            print_fn(f"      {line}")
        print_fn("    " + tr("here (Chainer 7.8.1):"))
        for line in lever.lines:
            print_fn(f"      {line}")
