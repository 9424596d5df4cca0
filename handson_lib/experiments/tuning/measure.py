"""The benchmark: every step of the levers in a fresh training process (`worker`), the repeats
alternating (A B C A B C), and the result as the median and spread of each step's runs."""

import json
import os
import statistics
import sys

from handson_lib import launch
from handson_lib.experiments import stats
from handson_lib.experiments.tuning.levers import LEVERS_BY_NAME, parse_levers
from handson_lib.experiments.tuning.worker import REPORT_PREFIX, default_model
from handson_lib.sites import jobs

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
           "--model", default_model(model, device), "--dataset", dataset,
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
    return assemble(steps, runs, {
        "benchmark": "tuning", "source": "measured here", "cumulative": cumulative,
        "repeats": repeats, "iterations": iterations, "warmup": warmup, "batchsize": batchsize,
        "max_seconds": max_seconds, "threads": threads,
        "device": next((r[-1]["device"] for r in runs.values() if r), None),
        "model": next((r[-1]["model"] for r in runs.values() if r), None),
        "data": next((r[-1]["data"] for r in runs.values() if r), None)})


def assemble(steps, runs, meta, with_speedups=True):
    """The result dict: every step with the spread of its runs; `with_speedups` adds each step's
    speed-up over the baseline and the gain of its lever (`add_speedups`)."""
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
        add_speedups(out)
    return {**meta, "steps": out}


def add_speedups(steps):
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
