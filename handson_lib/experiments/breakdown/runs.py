"""The breakdown's runs: `measure` on one rank count (local ranks or a job on the local cluster,
with spinning fillers for the same share of the cores), `sweep` over several, and `load_sweep` for
the phase files of a scaling sweep's job."""

import contextlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from handson_lib import launch
from handson_lib.experiments.breakdown.worker import combine_ranks
from handson_lib.messages import tr
from handson_lib.runtime import models
from handson_lib.runtime.phases import relative_timeline
from handson_lib.sites import jobs

#: The ranks' working folder: the library's own (handson_lib/).
LIBRARY_FOLDER = Path(__file__).resolve().parents[2]

@contextlib.contextmanager
def cpu_fillers(count):
    """`count` processes that only spin while the block runs. With them a run on p ranks keeps as
    many processes busy as a run on more ranks: every rank gets the same share of the cores at
    every p, as one GPU per rank computes at the same speed however many ranks there are."""
    # A session each: with the kernel's autogroup scheduling every session shares the cores
    # equally, and each rank of a cluster job runs in its node's own session too.
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL,
                              start_new_session=True)
             for _ in range(max(0, int(count)))]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def busy_processes(counts, cores=None):
    """For a sweep over rank counts: the processes to keep busy at every p so that each rank's share
    of the cores stays the one of the largest run (None: the largest run fits the cores anyway)."""
    largest = max(counts)
    return largest if largest > (cores or launch.cpu_count()) else None


def measure(np=2, model="cnn", batchsize=32, iterations=20, warmup=3, dataset="synthetic",
            timeout=600, lr=0.02, seed=0, where="local", busy=None):
    """Phase breakdown of a short ChainerMN training on `np` CPU ranks (`naive`): local ranks,
    or with `where` 'cluster' (or 'auto' when one is up) a job across the nodes of the local
    cluster and its shaped link (`handson cluster up --link 1gbe`); the result's `link` says which.
    `busy`: keep that many processes busy during the run, filling up with spinning processes
    (`cpu_fillers`), so that a sweep's ranks compute at the same speed at every p; the result's
    `fillers` says how many ran.

    Returns a dict: np, model, batchsize, total_batch, gradient_bytes (L), phases_s (medians,
    averaged over ranks), iteration_s, throughput (images/s of all ranks), ranks (each rank's
    medians and every iteration's record, warm-up included at the front), timer_hook (rank 0's
    TimerHook table over the timed iterations).
    """
    for name, value, least in (("np", np, 1), ("batchsize", batchsize, 1), ("iterations", iterations, 1),
                               ("warmup", warmup, 1)):
        if not isinstance(value, int) or value < least:
            why = (" (the multi-node optimizer's first iteration broadcasts rank 0's weights "
                   "instead of updating: it is always warm-up)") if name == "warmup" else ""
            raise ValueError(f"{name} must be an integer >= {least}, not {value!r}{why}")
    if model not in models.MODELS:
        raise ValueError(f"unknown model {model!r}; choose one of {', '.join(models.MODELS)}")
    with tempfile.TemporaryDirectory(prefix="breakdown-") as tmp:
        out = Path(tmp) / "result.json"
        argv = ["-m", "handson_lib.experiments.breakdown", "--worker", "--model", model, "--batchsize", batchsize,
                "--iterations", iterations, "--warmup", warmup, "--dataset", dataset, "--lr", lr,
                "--seed", seed, "--result", out]
        fillers = max(0, (busy or 0) - np)
        with cpu_fillers(fillers):
            run = jobs.run_ranks(np, argv, timeout=timeout, where=where, name="breakdown",
                                 cwd=str(LIBRARY_FOLDER))
        if not run.ok or not out.exists():
            raise RuntimeError(f"the breakdown run on {np} rank(s) failed "
                               f"({'timed out' if run.timed_out else f'exit {run.returncode}'}):\n"
                               f"{run.tail(25)}")
        result = json.loads(out.read_text())
    result["seconds"] = run.seconds
    result["fillers"] = fillers
    return result


def load_sweep(folder):
    """results_by_np from a scaling sweep run with HANDSON_PHASES=1 (jobscripts/*/run_scaling_sweep.sh).

    Reads FOLDER/p<ranks>/phases_rank<r>.json (every rank) and throughput.json (rank 0's
    `Throughput:` figure); rank counts without phase files are left out. Where every rank's file
    carries its spans, the result has the "timeline" that `measure` gives too."""
    results = {}
    for sub in sorted(Path(folder).glob("p*")):
        if not (sub.is_dir() and sub.name[1:].isdigit()):
            continue
        files = sorted(sub.glob("phases_rank*.json")) or sorted(sub.glob("phases.json"))
        if not files:
            continue
        ranks = [json.loads(f.read_text()) for f in files]
        ranks.sort(key=lambda r: r.get("rank") or 0)
        p = int(sub.name[1:])
        result = {"np": p, "ranks": ranks, "model": None, "batchsize": None, "source": str(sub),
                  "gradient_bytes": ranks[0].get("gradient_bytes")}
        result.update(combine_ranks(ranks, total_batch=0))
        if all(r.get("spans") for r in ranks):
            result["timeline"], result["timeline_epoch_s"] = relative_timeline(
                [{"rank": r.get("rank"), "host": r.get("host"), "spans": r["spans"]} for r in ranks])
        meter = sub / "throughput.json"
        result["throughput"] = json.loads(meter.read_text())["images_per_sec"] if meter.exists() else None
        results[p] = result
    if not results:
        raise FileNotFoundError(f"no p<ranks>/phases_rank*.json under {folder}: run the sweep with "
                                f"HANDSON_PHASES=1 (qsub -v HANDSON_PHASES=1 run_scaling_sweep.sh)")
    return results


def sweep(counts=None, where="auto", same_cpu_share=None, print_fn=print, **settings):
    """`measure` for each rank count, saying where the ranks run: {p: result}.

    On the local cluster with a network (`where` 'cluster', or 'auto' when one is up) each run is a
    job across its nodes, by default for p = 1, 2, 4, every rank with the same share of this
    machine's cores at every p (`same_cpu_share`, default on there: `busy_processes`); elsewhere
    local ranks, by default p = 1, 2, and a note that no network is involved."""
    state = jobs.where_ranks_run(where)
    counts = tuple(counts or ((1, 2, 4) if state else (1, 2)))
    if same_cpu_share is None:
        same_cpu_share = state is not None
    busy = busy_processes(counts) if same_cpu_share else None
    if state:
        profile = state["profile"]
        print_fn(tr("ranks: jobs (qsub) across the local cluster's nodes {nodes}, linked at {gbit:g} "
                    "Gbit/s ({profile}); p = {counts}", nodes=', '.join(state['nodes']),
                    gbit=profile['rate_bps'] / 1e9, profile=profile['name'],
                    counts=', '.join(map(str, counts))))
    else:
        print_fn(tr("ranks: local processes on this machine, p = {counts}: they share memory, no network "
                    "is involved (with `handson cluster up --link 1gbe`, run by an admin as root, the same "
                    "call runs them as jobs across nodes)", counts=', '.join(map(str, counts))))
    if busy:
        print_fn(tr("same share of the cores at every p: {busy} processes busy in every run ({busy} ranks "
                    "share {cores} cores at the largest p; smaller runs get spinning fillers), so that "
                    "compute per rank does not grow with p on this machine", busy=busy,
                    cores=launch.cpu_count()))
    results = {}
    for p in counts:
        print_fn(tr("measuring {model} on {np} rank(s) ...", model=settings.get('model', 'cnn'), np=p))
        results[p] = measure(np=p, where="cluster" if state else "local", busy=busy, **settings)
    return results
