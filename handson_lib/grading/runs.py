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

    @property
    def finished(self):
        return self.returncode == 0 and not self.timed_out and self.record.get("finished")

    @property
    def throughput(self):
        t = self.record.get("throughput")
        return t["images_per_sec"] if t else None


def run_observed(script, args, timeout=300, env=None):
    """Run `python SCRIPT ARGS` under the instrumenting launcher and a watchdog."""
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
        res = launch.run_watched(cmd, timeout, env=full_env, cwd=str(workdir))
        record = {}
        if (outdir / "observed.json").exists():
            record = json.loads((outdir / "observed.json").read_text())
        workers = {}
        for path in sorted(outdir.glob("worker*.npz")) if outdir.exists() else []:
            with numpy.load(path) as npz:
                workers[int(npz["index"])] = {k: npz[k] for k in npz.files}
        return Observation(res.returncode, res.timed_out, res.output, record, workers, res.seconds, timeout)


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


def run_observed_mpi(script, np, args, timeout=300):
    """Run SCRIPT on `np` local ranks under the launcher (each rank observed) and a watchdog."""
    timeout = run_limit(timeout)
    with tempfile.TemporaryDirectory(prefix="handson-observe-") as tmp:
        outdir = Path(tmp) / "observed"
        workdir = Path(tmp) / "run"
        workdir.mkdir()
        argv = ["-m", "handson_lib.grading.observe", str(outdir), str(Path(script).resolve()), *args,
                "--out", str(workdir / "result")]
        res = launch.run_mpi(np, argv, timeout=timeout, cwd=str(workdir), extra_args=["--output", "tag"],
                          env={**os.environ, "MPLBACKEND": "Agg"})
        ranks, params = {}, {}
        for path in sorted(outdir.glob("observed-rank*.json")) if outdir.exists() else []:
            ranks[int(path.stem.split("rank")[1])] = json.loads(path.read_text())
        for path in sorted(outdir.glob("params-rank*.npz")) if outdir.exists() else []:
            with numpy.load(path) as npz:
                params[int(path.stem.split("rank")[1])] = npz["params"]
        return MPIObservation(np, res.returncode, res.timed_out, res.output, ranks, params, res.seconds,
                              timeout)
