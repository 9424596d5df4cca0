"""Task #1 backends for `chainer.training.updaters.MultiprocessParallelUpdater`.

On a host with GPUs and NCCL the student's code runs Chainer's real updater. Elsewhere
`install_parallel_updater()` puts `CPUParallelUpdater` under the same name: the same constructor
`(iterators, optimizer, devices)`, one real worker process per device entry, each computing
gradients on its own iterator; the gradients are summed into the main process before every
update, the learning rate divided by the number of workers (as Chainer's updater does), and
the new parameters sent back to every worker. The run says on screen which backend ran.
"""

import atexit
import multiprocessing
import os
import statistics
import sys
import time
import warnings

import numpy

import chainer
from chainer.dataset import convert
from chainer.training import updaters as _chainer_updaters

from handson_lib import settings
from handson_lib.messages import tr
# nccl_status is also what notebooks 01 and 04 ask (`multigpu.nccl_status()`).
from handson_lib.runtime.devices import gpu_count, gpu_count_apart, nccl_status

CHAINER_MPU = _chainer_updaters.MultiprocessParallelUpdater

#: Set by `install_parallel_updater()`: the backend that `MultiprocessParallelUpdater(...)` creates.
BACKEND = {"name": None, "reason": None}


def cuda_context_initialized():
    """True when this process already holds a CUDA context (Chainer issue 4709)."""
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return False
    try:
        return bool(cupy.cuda.driver.ctxGetCurrent())
    except Exception:
        return False


def refuse_cuda_before_fork():
    """MultiprocessParallelUpdater forks its workers; a CUDA context made before that breaks them."""
    if cuda_context_initialized() and multiprocessing.get_start_method() not in ("spawn", "forkserver"):
        raise RuntimeError(tr(
            "CUDA was initialised before MultiprocessParallelUpdater created its worker processes "
            "(Chainer issue 4709): the forked workers would hang or crash. Do not move the model to a "
            "GPU, call cupy or chainer.cuda.get_device_from_id(...).use() before the updater is "
            "built: the updater moves the model to each device itself."))


def _ordered_devices(devices):
    if isinstance(devices, dict):
        if "main" not in devices:
            raise KeyError(tr("the devices dict must name its main device 'main', e.g. "
                              "{example} (MultiprocessParallelUpdater reports and updates "
                              "on the 'main' device)", example="{'main': 0, 'gpu1': 1}"))
        rest = {k: v for k, v in devices.items() if k != "main"}
        return ["main", *rest], [devices["main"], *rest.values()]
    devices = list(devices)
    return [f"device{i}" for i in range(len(devices))], devices


def _param_layout(link):
    """(name, shape, offset) of every parameter, in a fixed order, and the total size."""
    layout, offset = [], 0
    for name, param in sorted(link.namedparams()):
        if param.array is None:
            raise RuntimeError(f"parameter {name} is not initialised")
        layout.append((name, param.shape, offset))
        offset += param.size
    return layout, offset


def _views(link, buffer, layout):
    """(parameter, the part of the flat buffer that holds it, shaped like it) in layout order."""
    params = dict(link.namedparams())
    for name, shape, offset in layout:
        size = int(numpy.prod(shape))
        yield params[name], buffer[offset:offset + size].reshape(shape)


def _params_to(link, buffer, layout):
    for param, view in _views(link, buffer, layout):
        view[...] = param.array


def _params_from(link, buffer, layout):
    for param, view in _views(link, buffer, layout):
        param.array[...] = view


def _grads_to(link, buffer, layout):
    for param, view in _views(link, buffer, layout):
        view[...] = 0 if param.grad is None else param.grad


def _limit_threads(n):
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(limits=n)
    except Exception:
        pass


#: The folder where the observer (handson_lib.harness.observe, which sets it) keeps each worker's arrays.
OBSERVE_DIR_ENV = settings.variable("observe_dir")


class _Observer:
    """Hands the grader what each worker did (set by handson_lib.checking.checks when it runs a script)."""

    def __init__(self):
        current = settings.current()
        self.directory, self.snapshots = current.observe_dir, current.observe_snapshots

    def save(self, name, **arrays):
        if self.directory:
            numpy.savez(os.path.join(self.directory, name), **arrays)

    def keep(self, index, updates, params):
        """A worker's parameters after `updates` updates, where the grader asked for them
        (HANDSON_OBSERVE_SNAPSHOTS): set beside its replay of the training."""
        if self.directory and updates in self.snapshots:
            self.save(f"snapshot-worker{index}-{updates}.npz", params=params.copy(), iteration=updates)


def _worker_main(index, conn, model, iterator, converter, params, grads, layout, threads):
    _limit_threads(threads)
    observer = _Observer()
    params_np = numpy.frombuffer(params, dtype=numpy.float32)
    grads_np = numpy.frombuffer(grads, dtype=numpy.float32).reshape(-1, params_np.size)[index - 1]
    served = []
    reporter = chainer.Reporter()  # this worker's reports are dropped, as in Chainer's updater
    reporter.add_observer("main", model)
    clock = time.perf_counter
    try:
        while True:
            waiting = clock()
            message = conn.recv()
            if message == "update":
                t0 = clock()
                _params_from(model, params_np, layout)
                observer.keep(index, len(served), params_np)
                t1 = clock()
                batch = next(iterator)
                served.append(len(batch))
                in_arrays = convert._call_converter(converter, batch, None)
                t2 = clock()
                model.cleargrads()
                with reporter.scope({}):
                    loss = model(*in_arrays) if isinstance(in_arrays, tuple) else model(in_arrays)
                loss.backward()
                del loss
                t3 = clock()
                _grads_to(model, grads_np, layout)
                t4 = clock()
                conn.send(("done", {"idle": t0 - waiting, "copy": (t1 - t0) + (t4 - t3),
                                    "data": t2 - t1, "compute": t3 - t2}))
            elif message == "finalize":
                _params_from(model, params_np, layout)
                observer.keep(index, len(served), params_np)   # after the last update
                observer.save(f"worker{index}.npz", pid=os.getpid(), index=index,
                              images=numpy.sum(served, dtype=numpy.int64),
                              params=params_np.copy())
                conn.send("bye")
                return
    except (EOFError, KeyboardInterrupt):
        return
    except BaseException as err:
        conn.send(("error", f"{type(err).__name__}: {err}"))
        raise


def _end_workers(workers):
    """At the exit of a process whose updater was not finalized: its workers end with it."""
    for worker in workers:
        if worker.is_alive():
            worker.terminate()


class CPUParallelUpdater(chainer.training.updaters.StandardUpdater):
    """MultiprocessParallelUpdater's CPU stand-in: one worker process per device entry."""

    class _BackendName:
        """What notebook 01 prints as the backend, in the reader's language (read when shown)."""

        def __get__(self, obj, owner):
            return tr("CPU stand-in (worker processes, NOT GPUs)")

    backend_name = _BackendName()

    def __init__(self, iterators, optimizer, devices, converter=convert.concat_examples,
                 auto_new_epoch=True, threads_per_worker=None):
        names, ids = _ordered_devices(devices)
        if len(iterators) != len(ids):
            raise ValueError(tr("MultiprocessParallelUpdater needs one iterator per device: got "
                                "{iterators} iterator(s) for {devices} device(s)",
                                iterators=len(iterators), devices=len(ids)))
        for it in iterators[1:]:
            if len(it.dataset) != len(iterators[0].dataset):
                raise ValueError(tr("every iterator must have a dataset of the same length "
                                    "(use chainer.datasets.split_dataset_n_random)"))
        self._device_names = names
        self._worker_count = len(ids)
        self._mpu_iterators = iterators
        n = len(ids)
        # Same correction as Chainer's updater: gradients are summed, not averaged.
        optim = optimizer.__class__.__name__
        if optim in ("Adam", "AdaGrad", "RMSprop"):
            optimizer.eps *= n
            warnings.warn(f"optimizer.eps is changed to {optimizer.eps} by MultiprocessParallelUpdater "
                          "for new batch size.", stacklevel=3)
        elif optim in ("RMSpropGraves", "AdaDelta"):
            optimizer.eps *= n ** 2
            warnings.warn(f"optimizer.eps is changed to {optimizer.eps} by MultiprocessParallelUpdater "
                          "for new batch size.", stacklevel=3)
        elif hasattr(optimizer, "lr"):
            optimizer.lr /= n
            warnings.warn(f"optimizer.lr is changed to {optimizer.lr} by MultiprocessParallelUpdater "
                          "for new batch size.", stacklevel=3)
        super().__init__(iterators[0], optimizer, converter=converter, auto_new_epoch=auto_new_epoch)
        # One device = one core: each process computes with one BLAS thread, as the baseline
        # (single_device) does, so that N workers compare with one device and not N cores.
        self._threads = threads_per_worker or 1
        #: per step: {"main": {phase: s}, "<device name>": {phase: s}} (see phase_summary)
        self.phase_log = []
        self._workers = []
        self._conns = []
        self._layout = None
        self._params = self._grads = None

    @property
    def workers(self):
        return list(self._workers)

    def _initialise_lazy_params(self, model):
        # Links like L.Linear(None, n) get their shapes from the first batch: do it before forking.
        if all(p.array is not None for p in model.params()):
            return
        example = self._mpu_iterators[0].dataset[0]
        in_arrays = convert._call_converter(self.converter, [example], None)
        with chainer.using_config("train", False), chainer.no_backprop_mode():
            model(*in_arrays) if isinstance(in_arrays, tuple) else model(in_arrays)

    def setup_workers(self):
        if self._layout is not None:
            return
        model = self.get_optimizer("main").target
        self._initialise_lazy_params(model)
        self._layout, size = _param_layout(model)
        ctx = multiprocessing.get_context("fork")
        self._params = ctx.RawArray("f", size)
        self._grads = ctx.RawArray("f", max(1, (self._worker_count - 1) * size))
        _params_to(model, numpy.frombuffer(self._params, dtype=numpy.float32), self._layout)
        for index in range(1, self._worker_count):
            parent, child = ctx.Pipe()
            # Not daemonic: a worker may start processes of its own (Chainer's MultiprocessIterator,
            # its data's pool); finalize() ends every worker, and so does an exit without it (atexit).
            worker = ctx.Process(
                target=_worker_main, daemon=False, name=f"handson-mpu-{self._device_names[index]}",
                args=(index, child, model, self._mpu_iterators[index], self.converter,
                      self._params, self._grads, self._layout, self._threads))
            worker.start()
            child.close()
            self._workers.append(worker)
            self._conns.append(parent)
        atexit.register(_end_workers, list(self._workers))
        _limit_threads(self._threads)

    def _receive(self, conn, index):
        try:
            reply = conn.recv()
        except EOFError:
            raise RuntimeError(tr("worker {name} died (exit code {code})", name=self._device_names[index],
                                  code=self._workers[index - 1].exitcode)) from None
        if isinstance(reply, tuple) and reply[0] == "error":
            raise RuntimeError(tr("worker {name} failed: {error}", name=self._device_names[index],
                                  error=reply[1]))
        return reply[1] if isinstance(reply, tuple) and reply[0] == "done" else reply

    def update_core(self):
        self.setup_workers()
        clock = time.perf_counter
        t0 = clock()
        for conn in self._conns:
            conn.send("update")
        optimizer = self.get_optimizer("main")
        model = optimizer.target
        batch = self.get_iterator("main").next()
        in_arrays = convert._call_converter(self.converter, batch, None)
        t1 = clock()
        model.cleargrads()
        loss = model(*in_arrays) if isinstance(in_arrays, tuple) else model(in_arrays)
        loss.backward()
        del loss
        t2 = clock()
        step = {"main": None}
        for index, conn in enumerate(self._conns, 1):
            step[self._device_names[index]] = self._receive(conn, index)
        t3 = clock()
        if self._conns:
            size = numpy.frombuffer(self._params, dtype=numpy.float32).size
            grads = numpy.frombuffer(self._grads, dtype=numpy.float32).reshape(-1, size)
            total = grads.sum(axis=0)
            for param, extra in _views(model, total, self._layout):
                if param.grad is None:
                    param.grad = extra.copy()
                else:
                    param.grad += extra
        t4 = clock()
        optimizer.update()
        t5 = clock()
        _params_to(model, numpy.frombuffer(self._params, dtype=numpy.float32), self._layout)
        t6 = clock()
        step["main"] = {"data": t1 - t0, "compute": t2 - t1, "wait": t3 - t2, "reduce": t4 - t3,
                        "update": t5 - t4, "copy": t6 - t5}
        self.phase_log.append(step)
        if self.auto_new_epoch and self.get_iterator("main").is_new_epoch:
            optimizer.new_epoch(auto=True)

    def phase_summary(self, warmup=2):
        """Median seconds per step of every phase, per process: {"main": {...}, "gpu1": {...}}.

        main: data (its batch), compute (forward + backward), wait (for the workers' gradients),
        reduce (their sum), update (the optimizer), copy (new parameters to the shared buffer);
        a worker: idle (waiting for the next step), data, compute, copy (parameters in,
        gradients out). None before any step after the warm-up."""
        steps = self.phase_log[warmup:]
        if not steps:
            return None
        return {who: {phase: statistics.median(step[who][phase] for step in steps) for phase in phases}
                for who, phases in steps[0].items() if phases}

    def finalize(self):
        conns, workers = self._conns, self._workers
        self._conns, self._workers = [], []
        for index, conn in enumerate(conns, 1):
            try:
                conn.send("finalize")
                self._receive(conn, index)
            except Exception:
                pass
        for worker in workers:
            worker.join(timeout=10)
            if worker.is_alive():
                worker.terminate()
        if self._layout is not None:
            _Observer().save("worker0.npz", pid=os.getpid(), index=0,
                             params=numpy.frombuffer(self._params, dtype=numpy.float32).copy())
        super().finalize()


class MultiprocessParallelUpdater:
    """Chooses the backend when the student's code calls MultiprocessParallelUpdater(...)."""

    def __new__(cls, iterators, optimizer, devices, *args, **kwargs):
        usable, reason = nccl_status(count=gpu_count_apart)   # CUDA stays uninitialised for the fork
        if usable:
            refuse_cuda_before_fork()
            BACKEND.update(name="chainer", reason=reason)
            print(tr("MultiprocessParallelUpdater backend: Chainer's (NCCL, {n} GPU processes)",
                     n=len(iterators)), flush=True)
            return CHAINER_MPU(iterators, optimizer, devices, *args, **kwargs)
        BACKEND.update(name="cpu", reason=reason)
        print(tr("MultiprocessParallelUpdater backend: CPU stand-in (worker processes, NOT GPUs), "
                 "{n} worker processes; Chainer's needs GPUs and NCCL: {reason}",
                 n=len(iterators), reason=reason), flush=True)
        return CPUParallelUpdater(iterators, optimizer, devices, *args, **kwargs)

    @staticmethod
    def available():
        return True


def install_parallel_updater():
    """Make `chainer.training.updaters.MultiprocessParallelUpdater` choose its backend: Chainer's
    where GPUs and NCCL exist, the CPU stand-in elsewhere (said on screen)."""
    _chainer_updaters.MultiprocessParallelUpdater = MultiprocessParallelUpdater
    chainer.training.updaters.MultiprocessParallelUpdater = MultiprocessParallelUpdater
    return MultiprocessParallelUpdater


def single_device(gpu_id):
    """The baseline's device: GPU `gpu_id` when there is one, else the CPU, said on screen."""
    if gpu_id >= 0 and gpu_count().count > gpu_id:
        return chainer.get_device(gpu_id)
    _limit_threads(1)
    print(tr("No GPU {gpu} on this host: the single-device baseline runs on the CPU (@numpy), "
             "one core (one BLAS thread), as each worker of the CPU stand-in.", gpu=gpu_id), flush=True)
    return chainer.get_device("@numpy")


def evaluation_device(main_id):
    """Where the evaluator runs: the main GPU under Chainer's updater, the CPU under the stand-in."""
    if BACKEND["name"] == "chainer":
        return chainer.get_device(main_id)
    return chainer.get_device("@numpy")
