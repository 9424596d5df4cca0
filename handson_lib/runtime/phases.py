"""Forward, backward, allreduce and update of every iteration, timed and as NVTX ranges.

Training scripts switch it on with HANDSON_PHASES=1 (`training.instrument_phases`); the
experiments (`handson profile breakdown`) call `instrument` directly.

Besides the seconds per phase, the recorder keeps the spans (name, start, stop) of the last
SPAN_ITERATIONS iterations on a clock that the ranks share, so that a timeline of all ranks can
be drawn (`handson_lib.profiling.cpu_timeline`): `relative_timeline` puts them on one origin.
"""

import collections
import json
import socket
import statistics
import time
from pathlib import Path

from handson_lib import settings

PHASES = ("forward", "backward", "allreduce", "update")
ITERATION = "iteration"
OTHER = "other"
#: one colour per phase in every figure that shows phases (stacked bars, CPU timelines)
PHASE_COLORS = {"forward": "#4C72B0", "backward": "#55A868", "allreduce": "#C44E52",
                "update": "#8172B2", OTHER: "#BBBBBB"}
#: Iterations whose spans a recorder keeps (the newest): training scripts run thousands.
SPAN_ITERATIONS = 50
ENV_VAR = settings.variable("phases")
_MARK = "_handson_phase_recorder"


# ------------------------------------------------------------------------------ NVTX and device

def load_nvtx():
    """CuPy's NVTX module, or None when CuPy does not import (CPU-only installs)."""
    try:
        from cupy.cuda import nvtx
    except Exception:  # ImportError, or CUDA libraries that fail to load
        return None
    if getattr(nvtx, "available", True) is False:
        return None
    return nvtx


def _gpu_of(link):
    """The CuPy device that holds `link`'s parameters, or None on the CPU."""
    device = getattr(link, "device", None)
    if device is None or getattr(device, "xp", None) is None:
        return None
    if device.xp.__name__ != "cupy":
        return None
    return getattr(device, "device", None)


# ------------------------------------------------------------------------------ recorder

def epoch_offset():
    """time.time() - time.perf_counter(), read once with the perf_counter halves around it.

    perf_counter is precise but its zero is undefined (the boot of the machine on Linux), so two
    machines' readings do not compare; time.time() is the clock that all processes of a machine
    share, and machines synchronised by NTP nearly share (to about a millisecond)."""
    before = time.perf_counter()
    wall = time.time()
    after = time.perf_counter()
    return wall - (before + after) / 2


class PhaseRecorder:
    """Wall time of named phases per iteration, with matching NVTX ranges.

    `iterations` holds one dict per finished iteration: phase -> seconds (a phase entered twice
    in one iteration is summed) and "iteration" -> seconds of the whole iteration.

    `recent_spans` holds (iteration index, spans) of the last `span_iterations` finished
    iterations; spans are (name, start, stop) in `clock() + epoch_offset` seconds (epoch seconds
    with the default clock; a clock of your own is taken as shared already), sorted by start,
    the iteration's own span first: it contains its phases.
    """

    def __init__(self, nvtx=None, sync=None, clock=time.perf_counter, span_iterations=SPAN_ITERATIONS):
        # nvtx: a module with RangePush/RangePop, True/None (CuPy's when it imports), or False.
        self.nvtx = load_nvtx() if nvtx in (None, True) else (nvtx or None)
        self.nvtx_error = None
        self.nvtx_calls = 0
        self.sync = sync          # a callable, or None: synchronise the target's GPU if it has one
        self.clock = clock
        self.iterations = []
        self.epoch_offset = epoch_offset() if clock is time.perf_counter else 0.0
        self.recent_spans = collections.deque(maxlen=span_iterations)
        self._current = None
        self._spans = None        # spans closed so far in the running iteration
        self._stack = []          # (name, start time)
        self._link = None         # the model, to find its device
        self._undo = []           # (object, attribute, previous instance value or _MISSING)

    # -- clock
    def _sync_device(self):
        if self.sync is not None:
            self.sync()
            return
        gpu = _gpu_of(self._link) if self._link is not None else None
        if gpu is not None:
            # CUDA kernels run asynchronously: without waiting for them, the clock would only
            # measure how long the launches took, and GPU work would land in the next phase.
            gpu.synchronize()

    def now(self):
        self._sync_device()
        return self.clock()

    # -- NVTX (a failing NVTX library switches NVTX off instead of breaking the training)
    def _nvtx_call(self, name, *args):
        if self.nvtx is None:
            return
        try:
            getattr(self.nvtx, name)(*args)
            self.nvtx_calls += 1
        except Exception as err:
            self.nvtx_error = f"{type(err).__name__}: {err}"
            self.nvtx = None

    # -- ranges
    @property
    def open_phases(self):
        return [name for name, _ in self._stack]

    def push(self, name):
        self._stack.append((name, self.now()))
        self._nvtx_call("RangePush", name)

    def pop(self, name):
        if not self._stack or self._stack[-1][0] != name:
            raise RuntimeError(f"phase {name!r} closed while {self.open_phases} are open")
        stop = self.now()
        _, start = self._stack.pop()
        self._nvtx_call("RangePop")
        if self._current is not None and name != ITERATION:
            self._current[name] = self._current.get(name, 0.0) + (stop - start)
        if self._spans is not None:
            self._spans.append((name, start + self.epoch_offset, stop + self.epoch_offset))
        return stop - start

    @property
    def in_iteration(self):
        return self._current is not None

    def begin_iteration(self):
        if self._current is not None:
            raise RuntimeError("an iteration is already running")
        self._current = {}
        self._spans = []
        self.push(ITERATION)

    def end_iteration(self, completed=True):
        # Close what an exception left open, so that the NVTX stack stays balanced.
        while self._stack and self._stack[-1][0] != ITERATION:
            self.pop(self._stack[-1][0])
        record, self._current = self._current, None
        seconds = self.pop(ITERATION)
        spans, self._spans = self._spans, None
        if completed and record is not None:
            record[ITERATION] = seconds
            # (start, -stop): where a coarse clock gives the iteration and its first phase the
            # same start, the longer span (the iteration, which contains it) comes first.
            spans.sort(key=lambda span: (span[1], -span[2]))
            self.recent_spans.append((len(self.iterations), spans))
            self.iterations.append(record)

    # -- results
    def timed(self, warmup=0):
        """The iterations after the first `warmup` ones."""
        if warmup < 0:
            raise ValueError("warmup must be >= 0")
        return self.iterations[warmup:]

    def summary(self, warmup=0):
        return summarize(self.timed(warmup), warmup=warmup)

    def timed_spans(self, warmup=0):
        """[name, start, stop] of the kept iterations after the first `warmup` ones, oldest first
        (JSON-ready lists)."""
        if warmup < 0:
            raise ValueError("warmup must be >= 0")
        return [list(span) for index, spans in self.recent_spans if index >= warmup for span in spans]

    # -- wrapping
    def _patch(self, obj, name, replacement):
        previous = vars(obj).get(name, _MISSING)
        # object.__setattr__: _MultiNodeOptimizer forwards setattr to the optimizer it wraps.
        object.__setattr__(obj, name, replacement)
        self._undo.append((obj, name, previous))

    def remove(self):
        """Put every wrapped method back."""
        while self._undo:
            obj, name, previous = self._undo.pop()
            if previous is _MISSING:
                object.__delattr__(obj, name)
            else:
                object.__setattr__(obj, name, previous)


_MISSING = object()


def summarize(iterations, warmup=0):
    """Medians over iterations: phase -> seconds (a phase missing from one counts 0 there)."""
    names = [p for p in PHASES if any(p in it for it in iterations)]
    names += sorted({k for it in iterations for k in it} - set(PHASES) - {ITERATION})
    medians = {name: statistics.median(it.get(name, 0.0) for it in iterations) for name in names} \
        if iterations else {}
    others = [it[ITERATION] - sum(v for k, v in it.items() if k != ITERATION) for it in iterations]
    if iterations:
        medians[OTHER] = statistics.median(others)
    total = sum(it[ITERATION] for it in iterations)
    return {
        "timed_iterations": len(iterations),
        "warmup": warmup,
        "phases_s": medians,
        "iteration_s": statistics.median(it[ITERATION] for it in iterations) if iterations else None,
        "total_s": total,
    }


# ------------------------------------------------------------------------------ instrument

def _is_updater(obj):
    return hasattr(obj, "get_optimizer") and hasattr(obj, "update_core")


def instrument(target, nvtx=None, sync=None, recorder=None):
    """Time the phases of every iteration of an updater or optimizer; returns the PhaseRecorder.

    target: a Chainer updater (iteration = its `update()`, data loading included), or an
    optimizer: a plain one, or ChainerMN's multi-node optimizer (allreduce recorded apart).
    `recorder.remove()` undoes it. ChainerMN's double-buffering optimizer overlaps the allreduce
    with the next iteration: its allreduce is not a phase of its own here.
    """
    updater = target if _is_updater(target) else None
    optimizer = updater.get_optimizer("main") if updater is not None else target
    if not callable(getattr(optimizer, "update", None)):
        raise TypeError(f"instrument() needs a Chainer updater or optimizer, not {type(target).__name__}")
    if vars(optimizer).get(_MARK) is not None or (updater is not None and vars(updater).get(_MARK)):
        raise RuntimeError("this optimizer/updater is already instrumented; call .remove() first")
    rec = recorder or PhaseRecorder(nvtx=nvtx, sync=sync)

    state = vars(optimizer)
    actual = state.get("actual_optimizer")          # set by chainermn's _MultiNodeOptimizer
    communicator = state.get("communicator")
    _time_optimizer_update(rec, optimizer, plain=actual is None)
    if actual is not None:
        _time_inner_update(rec, actual)
    if communicator is not None and hasattr(communicator, "multi_node_mean_grad"):
        _time_allreduce(rec, communicator)
    if updater is not None:
        _time_updater_update(rec, updater, optimizer)
    return rec


def _watch_device_of(rec, optimizer):
    """Let the recorder synchronise the device that holds the optimizer's model."""
    try:
        rec._link = optimizer.target
    except AttributeError:
        rec._link = None


def _time_backward(rec, loss, plain):
    """Time `loss.backward()`; after it, a plain optimizer's update phase starts."""
    backward = getattr(loss, "backward", None)
    if backward is None:
        return

    def timed_backward(*args, **kwargs):
        rec.push("backward")
        try:
            return backward(*args, **kwargs)
        finally:
            rec.pop("backward")
            # The wrapper refers to the loss through `backward`: drop it, or the loss and the
            # whole graph behind it stay alive until the garbage collector finds the cycle
            # (that made the heap grow and every step slower while the phases were timed).
            try:
                del loss.backward
            except AttributeError:
                pass
            # A plain optimizer updates the parameters right after backward in the same call.
            if plain and rec.in_iteration:
                rec.push("update")
    try:
        loss.backward = timed_backward
    except AttributeError:
        pass  # a loss object that refuses attributes: its backward counts as `other`


def _timed_lossfun(rec, lossfun, plain):
    """`lossfun` timed as the forward phase, its loss's backward as the backward phase."""
    def timed_forward(*args, **kwargs):
        rec.push("forward")
        try:
            loss = lossfun(*args, **kwargs)
        finally:
            rec.pop("forward")
        _time_backward(rec, loss, plain)
        return loss
    return timed_forward


def _time_optimizer_update(rec, optimizer, plain):
    """optimizer.update(lossfun, ...): one iteration unless an updater's iteration is running."""
    original_update = optimizer.update

    def timed_optimizer_update(lossfun=None, *args, **kwds):
        own = not rec.in_iteration
        if own:
            _watch_device_of(rec, optimizer)
            rec.begin_iteration()
        completed = False
        try:
            if lossfun is not None:
                lossfun = _timed_lossfun(rec, lossfun, plain)
            elif plain:
                rec.push("update")  # gradients given: the whole call is the update
            result = original_update(lossfun, *args, **kwds)
            if "update" in rec.open_phases:
                rec.pop("update")
            completed = True
            return result
        finally:
            if own:
                rec.end_iteration(completed)

    rec._patch(optimizer, "update", timed_optimizer_update)
    rec._patch(optimizer, _MARK, rec)


def _time_inner_update(rec, actual):
    """The update of the optimizer that ChainerMN's multi-node optimizer wraps."""
    actual_update = actual.update

    def timed_actual_update(*args, **kwds):
        rec.push("update")
        try:
            return actual_update(*args, **kwds)
        finally:
            rec.pop("update")
    rec._patch(actual, "update", timed_actual_update)


def _time_allreduce(rec, communicator):
    """The communicator's gradient averaging, as the allreduce phase of an iteration."""
    mean_grad = communicator.multi_node_mean_grad

    def timed_mean_grad(*args, **kwargs):
        if not rec.in_iteration:  # someone else's call: not part of an iteration
            return mean_grad(*args, **kwargs)
        rec.push("allreduce")
        try:
            return mean_grad(*args, **kwargs)
        finally:
            rec.pop("allreduce")
    rec._patch(communicator, "multi_node_mean_grad", timed_mean_grad)


def _time_updater_update(rec, updater, optimizer):
    """updater.update() is the iteration (data loading included)."""
    updater_update = updater.update

    def timed_updater_update(*args, **kwargs):
        _watch_device_of(rec, optimizer)
        rec.begin_iteration()
        completed = False
        try:
            result = updater_update(*args, **kwargs)
            completed = True
            return result
        finally:
            rec.end_iteration(completed)
    rec._patch(updater, "update", timed_updater_update)
    rec._patch(updater, _MARK, rec)


# ------------------------------------------------------------------------------ scripts' switch

def _env_mode(environ=None):
    value = (settings.read(environ).phases or "").strip().lower()
    if value in ("", "0", "off", "no", "false"):
        return None
    if value in ("1", "on", "yes", "true"):
        return "phases"
    if value == "nvtx":
        return "nvtx"
    raise ValueError(f"{ENV_VAR}={value!r}: use 1 (phase times and NVTX ranges), nvtx (NVTX ranges "
                     f"only, no timing) or 0 (off)")


def enable_from_environment(target, out=None, warmup=2, rank=None, print_fn=print, environ=None,
                            at_exit=True):
    """What `training.instrument_phases` does: nothing unless HANDSON_PHASES is set.

    HANDSON_PHASES=1: phase times and NVTX ranges; the medians are printed when the process exits
    (`at_exit`, or by calling `recorder.report()`) and written to `out/phases[_rank<r>].json`.
    HANDSON_PHASES=nvtx: NVTX ranges only (no device synchronisation, no timing report).
    """
    mode = _env_mode(environ)
    if mode is None:
        return None
    if mode == "nvtx":
        nvtx = load_nvtx()
        if nvtx is None:
            if print_fn:
                print_fn(f"{ENV_VAR}=nvtx: CuPy does not import here, no NVTX ranges")
            return None
        return instrument(target, nvtx=nvtx, sync=lambda: None)
    rec = instrument(target)
    # MultiprocessParallelUpdater (and the course's stand-in) computes the loss itself instead of
    # handing it to optimizer.update: only the update is a phase of its own there.
    note = ("forward, backward and the gradient reduction of all devices are in `other`: "
            "MultiprocessParallelUpdater runs them itself") if hasattr(target, "_mpu_iterators") else None
    if rank is None:
        optimizer = target.get_optimizer("main") if _is_updater(target) else target
        rank = getattr(vars(optimizer).get("communicator"), "rank", None)

    def report():
        if len(rec.iterations) <= warmup:
            return None
        summary = rec.summary(warmup)
        if print_fn:
            print_fn(phase_line(summary, rank=rank, nvtx=rec.nvtx is not None)
                     + (f" ({note})" if note else ""))
        if out is not None:
            Path(out).mkdir(parents=True, exist_ok=True)
            name = "phases.json" if rank is None else f"phases_rank{rank}.json"
            size = gradient_bytes_of(rec._link) if rec._link is not None else None
            Path(out, name).write_text(json.dumps(
                {**summary, "rank": rank, "note": note, "gradient_bytes": size,
                 "iterations": rec.iterations, "host": socket.gethostname(),
                 "spans": rec.timed_spans(warmup)}, indent=1))
        return summary

    rec.report = report
    if at_exit:
        import atexit
        atexit.register(report)
    return rec


def relative_timeline(ranks):
    """(timeline, origin): every rank's spans in seconds from the earliest start of all ranks.

    ranks: dicts with "rank" and "spans" ([name, start, stop] on the shared clock, as
    `PhaseRecorder.timed_spans` gives them); their other keys (host, processor) are kept. The
    timeline is sorted by rank; origin is the shared clock's reading (epoch seconds) at 0."""
    starts = [span[1] for r in ranks for span in r["spans"]]
    if not starts:
        raise ValueError("no spans to put on a timeline (no timed iteration was recorded)")
    origin = min(starts)
    timeline = [{**{k: v for k, v in r.items() if k != "spans"},
                 "spans": [[name, start - origin, stop - origin] for name, start, stop in r["spans"]]}
                for r in sorted(ranks, key=lambda r: r["rank"] or 0)]
    return timeline, origin


def phase_line(summary, rank=None, nvtx=False):
    """`Phases (rank 0, median ms/iteration over 40): forward 12.1 | backward ... | iteration 50.2`."""
    who = "" if rank is None else f"rank {rank}, "
    parts = [f"{name} {seconds * 1e3:.2f}" for name, seconds in summary["phases_s"].items()]
    parts.append(f"iteration {summary['iteration_s'] * 1e3:.2f}")
    return (f"Phases ({who}median ms/iteration over {summary['timed_iterations']}"
            f"{', NVTX ranges on' if nvtx else ''}): " + " | ".join(parts))


# ------------------------------------------------------------------------------ measurement

def gradient_bytes_of(link):
    """L: bytes of all gradients the allreduce averages (seed 001 measured 102228384 for ResNet-50)."""
    total = 0
    for param in link.params():
        array = param.grad if param.grad is not None else param.array
        if array is not None:
            total += array.size * array.dtype.itemsize
    return int(total)
