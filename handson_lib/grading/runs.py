"""Runs of a training script under the instrumenting launcher (handson_lib.grading.observe), each
with a watchdog: one process, or N local MPI ranks. The checks, the reference measurement, the
notebooks and the benchmarks all read what these return."""

import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy

from handson_lib import launch


def run_limit(timeout):
    """Seconds a single run may take: `timeout`, capped by HANDSON_RUN_TIMEOUT (set by the
    autograder) so that a deadlocked submission is stopped long before the cell limit."""
    cap = os.environ.get("HANDSON_RUN_TIMEOUT")
    return min(float(timeout), float(cap)) if cap else float(timeout)


@dataclass
class Observation:
    """One observed run: the launcher's record, worker files, the output and the exit status."""
    returncode: int
    timed_out: bool
    output: str
    record: dict
    workers: dict
    seconds: float
    limit: float = None
    progress: dict = None   # the watchdog's view: first_progress, longest_gap, stalled, stall, waited

    @property
    def finished(self):
        return self.returncode == 0 and not self.timed_out and self.record.get("finished")

    @property
    def throughput(self):
        t = self.record.get("throughput")
        return t["images_per_sec"] if t else None


#: Graded MPI ranks yield the core while they wait: a deadlocked run does not spin at 100 %.
YIELD_WHEN_IDLE = {"OMPI_MCA_mpi_yield_when_idle": "1", "OMPI_MCA_threads_pthreads_yield_strategy": "nanosleep"}


def _progress(res, watch):
    return {"first_progress": watch.first, "longest_gap": watch.longest, "stalled": res.stalled,
            "stall": watch.stall, "waited": round(res.waited, 2)}


def _log_part(part, obs):
    """Append one run to HANDSON_PROFILE_LOG (set per student by `handson autograde`)."""
    log = os.environ.get("HANDSON_PROFILE_LOG")
    if log and part:
        with open(log, "a") as f:
            f.write(json.dumps({"part": part, "seconds": round(obs.seconds, 2), **obs.progress}) + "\n")


def run_observed(script, args, timeout=300, env=None, timed=False, stall=None, part=None):
    """Run `python SCRIPT ARGS` under the instrumenting launcher and a watchdog.

    `timed`: the run's time is scored, so it holds the machine's timing slot alone (launch.timing_slot);
    `stall`: stop it once no training iteration has come for that many seconds;
    `part`: its name in the grading profile (HANDSON_PROFILE_LOG)."""
    timeout = run_limit(timeout)
    with tempfile.TemporaryDirectory(prefix="handson-observe-") as tmp:
        outdir = Path(tmp) / "observed"
        workdir = Path(tmp) / "run"
        workdir.mkdir()
        full_env = dict(os.environ if env is None else env)
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        full_env.setdefault("MPLBACKEND", "Agg")
        cmd = [sys.executable, "-m", "handson_lib.grading.observe", str(outdir), str(Path(script).resolve()),
               *args, "--out", str(workdir / "result")]
        watch = launch.ProgressWatch(outdir, stall)
        res = launch.run_watched(cmd, timeout, env=full_env, cwd=str(workdir), timed=timed, progress=watch)
        record = {}
        if (outdir / "observed.json").exists():
            record = json.loads((outdir / "observed.json").read_text())
        workers = {}
        for path in sorted(outdir.glob("worker*.npz")) if outdir.exists() else []:
            with numpy.load(path) as npz:
                workers[int(npz["index"])] = {k: npz[k] for k in npz.files}
        obs = Observation(res.returncode, res.timed_out, res.output, record, workers, res.seconds, timeout,
                          _progress(res, watch))
        _log_part(part, obs)
        return obs


@dataclass
class MPIObservation:
    """One observed `mpiexec -n N` run: each rank's record and parameters, the tagged output."""
    np: int
    returncode: int
    timed_out: bool
    output: str
    ranks: dict
    params: dict
    seconds: float
    limit: float = None
    progress: dict = None   # the watchdog's view: first_progress, longest_gap, stalled, stall, waited

    @property
    def finished(self):
        return (self.returncode == 0 and not self.timed_out and len(self.ranks) == self.np
                and all(r.get("finished") for r in self.ranks.values()))

    @property
    def throughput(self):
        t = self.ranks.get(0, {}).get("throughput")
        return t["images_per_sec"] if t else None

    def rank_output(self, rank, lines=6):
        tag = f",{rank}]<std"
        mine = [line.split(": ", 1)[-1] for line in self.output.splitlines() if tag in line.split(" ")[0]]
        return "\n".join(mine[-lines:])


def run_observed_mpi(script, np, args, timeout=300, timed=False, stall=None, part=None):
    """Run SCRIPT on `np` local ranks under the launcher (each rank observed) and a watchdog;
    `timed`, `stall` and `part` as in run_observed."""
    timeout = run_limit(timeout)
    with tempfile.TemporaryDirectory(prefix="handson-observe-") as tmp:
        outdir = Path(tmp) / "observed"
        workdir = Path(tmp) / "run"
        workdir.mkdir()
        argv = ["-m", "handson_lib.grading.observe", str(outdir), str(Path(script).resolve()), *args,
                "--out", str(workdir / "result")]
        watch = launch.ProgressWatch(outdir, stall)
        res = launch.run_mpi(np, argv, timeout=timeout, cwd=str(workdir), extra_args=["--output", "tag"],
                             env={**os.environ, "MPLBACKEND": "Agg", **YIELD_WHEN_IDLE}, timed=timed,
                             progress=watch)
        ranks, params = {}, {}
        for path in sorted(outdir.glob("observed-rank*.json")) if outdir.exists() else []:
            ranks[int(path.stem.split("rank")[1])] = json.loads(path.read_text())
        for path in sorted(outdir.glob("params-rank*.npz")) if outdir.exists() else []:
            with numpy.load(path) as npz:
                params[int(path.stem.split("rank")[1])] = npz["params"]
        obs = MPIObservation(np, res.returncode, res.timed_out, res.output, ranks, params, res.seconds,
                             timeout, _progress(res, watch))
        _log_part(part, obs)
        return obs
