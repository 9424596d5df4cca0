"""A cost model fitted on the allreduce's own measurements, and the training step it predicts
(issue 51: predict before you scale).

The cost of one allreduce of S bytes over p processes is taken as linear in a few terms of (p, S)
whose coefficients the measurements decide: for the ring, T = 2(p-1)·alpha + 2(p-1)/p·S·(1/B),
so the terms are 2(p-1) and 2(p-1)/p·S and the coefficients alpha (seconds per step of the ring)
and 1/B (seconds per byte on the wire). Which terms is the student's answer in the notebook (and
the instructor's in handson_lib.autograder.answers): this module takes them as a function and fits
any such model.

The fit is weighted least squares on relative errors (times of 4 KiB and of 100 MB messages are
six orders apart: unweighted, the largest would decide alone); each coefficient comes with its
standard error and a 95 % interval (Student's t), each point with its relative residual. A fit
whose terms the measurements cannot tell apart (one message size, one p) is refused with what to
measure more.
"""

from dataclasses import dataclass, field

import numpy

#: The interval shown beside each coefficient.
CONFIDENCE = 0.95

#: The message sizes a fit measures: from a few KiB (where the steps' latency decides) up to seed
#: 001's L, ResNet-50's gradients (where the bytes do).
FIT_SWEEP = "4K,64K,1M,16M,102228384"


class FitError(ValueError):
    """The measurements cannot decide the model's coefficients; the message says what to add."""


@dataclass(frozen=True)
class Point:
    """One measurement: `seconds` for an allreduce of `nbytes` over `p` processes."""
    p: int
    nbytes: float
    seconds: float


@dataclass
class Fitted:
    """A fitted model: coefficients by name, their standard errors and 95 % intervals, the points
    and their relative residuals ((measured - predicted) / measured)."""
    names: tuple
    coefficients: dict
    errors: dict
    intervals: dict
    points: list
    residuals: list
    terms: object = field(repr=False, default=None)

    def predict(self, p, nbytes):
        """Seconds of one allreduce of `nbytes` over `p` processes, as the model says."""
        return float(numpy.dot(_row(self.terms, p, nbytes), [self.coefficients[n] for n in self.names]))

    def worst_residual(self):
        return max(abs(r) for r in self.residuals)

    def table(self):
        """The coefficients, one line each, with their interval."""
        from handson_lib.messages import tr
        lines = [f"{tr('coefficient'):<14}{tr('value'):>14}{tr('std. error'):>14}   "
                 + tr("{percent} % interval", percent=int(CONFIDENCE * 100))]
        for name in self.names:
            low, high = self.intervals[name]
            lines.append(f"{name:<14}{self.coefficients[name]:>14.4g}{self.errors[name]:>14.2g}"
                         f"   [{low:.4g}, {high:.4g}]")
        lines.append(tr("worst relative residual over {n} points: {worst}", n=len(self.points),
                        worst=f"{self.worst_residual():.1%}"))
        return "\n".join(lines)


def _row(terms, p, nbytes):
    row = numpy.asarray(terms(p, nbytes), dtype=float)
    if row.ndim != 1:
        raise ValueError(f"the terms of (p={p}, S={nbytes}) must be a flat list of numbers, got {row!r}")
    return row


def fit(points, terms, names):
    """Fit `seconds = sum(coefficient_i * terms(p, nbytes)[i])` to `points` (Point, or (p, nbytes,
    seconds)); `names` the coefficients' names, in the order of the terms. Returns a Fitted."""
    points = [p if isinstance(p, Point) else Point(*p) for p in points]
    names = tuple(names)
    if any(pt.seconds <= 0 for pt in points):
        raise FitError("every measured time must be positive")
    design = numpy.array([_row(terms, pt.p, pt.nbytes) for pt in points])
    if design.shape[1] != len(names):
        raise FitError(f"the terms give {design.shape[1]} values per point but {len(names)} names")
    measured = numpy.array([pt.seconds for pt in points])
    sizes, ranks = {pt.nbytes for pt in points}, {pt.p for pt in points}
    if len(sizes) < 2:
        raise FitError(f"every point has one message size ({sorted(sizes)[0]:.0f} bytes): a cost per byte "
                       "and a cost per message cannot be told apart on one size; measure several, from a "
                       "few KiB to the gradients' L")
    if len(points) <= len(names):
        raise FitError(f"{len(points)} points cannot fit {len(names)} coefficients and say how well: "
                       "measure more message sizes or process counts")
    weighted = design / measured[:, None]     # relative errors: each row divided by its time
    if numpy.linalg.matrix_rank(weighted) < len(names):
        raise FitError(f"the measurements cannot tell the coefficients {', '.join(names)} apart "
                       f"(message sizes {sorted(sizes)}, process counts {sorted(ranks)}): measure "
                       "several sizes, from a few KiB to the gradients' L, at several process counts")
    coefficients, *_ = numpy.linalg.lstsq(weighted, numpy.ones(len(points)), rcond=None)
    predicted = design @ coefficients
    residuals = (measured - predicted) / measured
    dof = len(points) - len(names)
    variance = float(residuals @ residuals) / dof
    covariance = variance * numpy.linalg.inv(weighted.T @ weighted)
    errors = numpy.sqrt(numpy.maximum(numpy.diag(covariance), 0.0))
    from scipy import stats
    spread = float(stats.t.ppf(0.5 + CONFIDENCE / 2, dof))
    return Fitted(names, dict(zip(names, map(float, coefficients))), dict(zip(names, map(float, errors))),
                  {n: (float(c - spread * e), float(c + spread * e)) for n, c, e in zip(names, coefficients, errors)},
                  points, [float(r) for r in residuals], terms)


# ----------------------------------------------------------------------------- the training step

def step_seconds(compute, allreduce, overlap=0.0):
    """One training step: the compute (forward, backward, update), the allreduce, less the part of
    the allreduce that runs while the backward pass still computes (`overlap`, seconds)."""
    if overlap < 0 or overlap > min(compute, allreduce):
        raise ValueError(f"the overlap ({overlap} s) must lie between 0 and the shorter of the compute "
                         f"({compute} s) and the allreduce ({allreduce} s)")
    return compute + allreduce - overlap


def scaling(processes, compute, allreduce_of, batch_per_process, overlap=0.0):
    """{p: (images/s, efficiency)} for each p of `processes`, from the compute of one step (the
    same on every process: data parallel), `allreduce_of(p)` seconds, and the images one process
    trains per step; efficiency = throughput(p) / (p * throughput(1))."""
    one = batch_per_process / step_seconds(compute, allreduce_of(1), min(overlap, allreduce_of(1)))
    out = {}
    for p in processes:
        seconds = step_seconds(compute, allreduce_of(p), min(overlap, allreduce_of(p)))
        rate = p * batch_per_process / seconds
        out[p] = (rate, rate / (p * one))
    return out


# ----------------------------------------------------------------------------- from the benchmark

def points_of(result, path="mpi4py"):
    """[Point] of a `handson bench allreduce` result (one p, one or several sizes): the median time
    of each size on `path`; a record whose allreduce was wrong, or with no time, is left out."""
    return [Point(int(result["ranks"]), float(r["bytes"]), float(r["time_s"]))
            for r in result.get("results", [])
            if r.get("path") == path and r.get("correct") and isinstance(r.get("time_s"), (int, float))
            and r["time_s"] > 0]


def measure_points(processes, sizes=FIT_SWEEP, iterations=5, warmup=2, where="auto", timeout=600,
                   algorithm="ring", print_fn=print):
    """{p: [[p, bytes, seconds], ...]}: the median time of one allreduce (mpi4py, one buffer, Open
    MPI's ring algorithm unless `algorithm` says otherwise: the model's) of each message size on
    each number of processes `p`, as plain lists (a notebook's answers are data).
    `where`: local ranks, the local cluster's nodes, or auto (the cluster when one is up). Sizes
    whose allreduce came out wrong are left out and said."""
    from handson_lib.experiments.allreduce.launcher import measure
    from handson_lib.experiments.allreduce.units import human_bytes, parse_sizes
    from handson_lib.messages import tr
    wanted = parse_sizes(sizes)
    out = {}
    for p in processes:
        print_fn(tr("measuring the allreduce on {p} processes: {n} sizes from {first} to {last} ...",
                    p=p, n=len(wanted), first=human_bytes(min(wanted)), last=human_bytes(max(wanted))))
        result = measure(np=int(p), sizes=wanted, iterations=iterations, warmup=warmup, timeout=timeout, where=where,
                         algorithm=algorithm)
        points = points_of(result)
        missing = sorted(set(wanted) - {int(pt.nbytes) for pt in points})
        if missing:
            print_fn(tr("  left out (a wrong result or no time): {sizes}",
                        sizes=", ".join(human_bytes(m) for m in missing)))
        profile = (result.get("link") or {}).get("profile") or "none"
        print_fn(tr("  across the nodes of the local cluster, link {profile}", profile=profile) if profile != "none"
                 else tr("  local ranks on this machine: the bytes move through shared memory, no network"))
        out[int(p)] = [[pt.p, int(pt.nbytes), pt.seconds] for pt in points]
    return out


def points_table(measured):
    """The measurements of `measure_points`, a line per size, a column per p (milliseconds)."""
    from handson_lib.experiments.allreduce.units import human_bytes
    ps = sorted(measured)
    sizes = sorted({int(s) for p in ps for _, s, _ in measured[p]})
    times = {(int(p), int(s)): t for p in ps for p, s, t in measured[p]}
    lines = [f"{'bytes':>14}" + "".join(f"{f'p = {p} [ms]':>14}" for p in ps)]
    for s in sizes:
        cells = "".join(f"{times[(p, s)] * 1e3:>14.4g}" if (p, s) in times else f"{'-':>14}" for p in ps)
        lines.append(f"{human_bytes(s):>14}{cells}")
    return "\n".join(lines)


def held_out(fitted, points):
    """[(point, predicted seconds, relative error (predicted - measured) / measured)] of points
    the fit did not see."""
    out = []
    for pt in points:
        predicted = fitted.predict(pt.p, pt.nbytes)
        out.append((pt, predicted, (predicted - pt.seconds) / pt.seconds))
    return out


def fit_figure(fitted, unseen=(), ax=None):
    """Measured against predicted, log-log, one marker per p; the points the fit did not see hollow."""
    from handson_lib.messages import tr
    from handson_lib.plotting import pyplot
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 4.5))
    groups = {}
    for pt in fitted.points:
        groups.setdefault((pt.p, True), []).append(pt)
    for pt in unseen:
        groups.setdefault((pt.p, False), []).append(pt)
    every = [pt.seconds for group in groups.values() for pt in group]
    low, high = min(every) / 1.5, max(every) * 1.5
    ax.plot([low, high], [low, high], color="grey", lw=1, label=tr("predicted = measured"))
    for (p, seen), group in sorted(groups.items()):
        ax.scatter([pt.seconds for pt in group], [fitted.predict(pt.p, pt.nbytes) for pt in group],
                   marker="o", facecolors=None if seen else "none", edgecolors=f"C{p % 10}", color=f"C{p % 10}",
                   label=f"p = {p}" if seen else tr("p = {p} (held out)", p=p))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_xlabel(tr("measured allreduce time [s]"))
    ax.set_ylabel(tr("predicted by the fitted model [s]"))
    ax.legend(fontsize=8)
    return ax.figure


def efficiency_figure(curve, measured=None, ax=None):
    """A predicted efficiency curve ({p: efficiency}) against p on a log axis, and measured points
    ({p: efficiency}) beside it."""
    from handson_lib.messages import tr
    from handson_lib.plotting import pyplot
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    ps = sorted(curve)
    ax.plot(ps, [curve[p] for p in ps], marker="o", label=tr("predicted by the step model"))
    for p, value in sorted((measured or {}).items()):
        ax.scatter([p], [value], marker="D", color="C3", zorder=3, label=tr("the seeds' figure"))
    ax.set_xscale("log", base=2)
    ax.set_xticks(ps)
    ax.set_xticklabels([str(p) for p in ps])
    ax.set_ylim(min([0.8] + [curve[p] for p in ps] + list((measured or {}).values())) - 0.02, 1.01)
    ax.set_xlabel(tr("number of GPUs"))
    ax.set_ylabel(tr("efficiency against one node"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return ax.figure
