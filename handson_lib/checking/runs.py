"""Runs of a training script under the instrumenting launcher (handson_lib.harness.observe), each
with a watchdog: one process, or N local MPI ranks. The checks, the reference measurement, the
notebooks and the benchmarks all read what these return."""

import json
import os
import re
import stat
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy

from handson_lib import launch, settings
from handson_lib.checking import evidence
from handson_lib.messages import tr



@contextmanager
def run_folder(prefix, dir=None):
    """A temporary folder for one observed run (in `dir`, else the temporary folder). Under a
    sandboxing wrapper (the grader's cells) the run writes it as the grading account; once the
    run is over, whatever it left that is not a plain file or folder (a link to a file of the
    grader's, a FIFO) is removed (`defuse`) before the grader reads its records."""
    with tempfile.TemporaryDirectory(prefix=prefix, dir=dir) as tmp:
        if launch.wrapped():
            os.chmod(tmp, 0o777)
        yield tmp


def defuse(folder):
    """After a run under a sandboxing wrapper: remove every entry below `folder` that is neither a
    plain file nor a folder (never followed)."""
    if not launch.wrapped():
        return
    for parent, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            path = os.path.join(parent, name)
            mode = os.lstat(path).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                os.unlink(path)

def run_limit(timeout):
    """Seconds a single run may take: `timeout`, capped by HANDSON_RUN_TIMEOUT (set by the
    autograder) so that a deadlocked submission is stopped long before the cell limit."""
    cap = settings.current().grader.run_timeout
    return min(float(timeout), cap) if cap else float(timeout)


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
    evidence: dict = None   # what the grader measured itself (checking.evidence.measure)
    outside: dict = None    # what the grader saw of its processes from outside (launch.OutsideView)
    snapshots: dict = None  # {"main" / "workerI": {iteration: parameters}} kept where the grader asked

    @property
    def finished(self):
        return self.returncode == 0 and not self.timed_out and self.record.get("finished")

    @property
    def throughput(self):
        t = self.record.get("throughput")
        return t["images_per_sec"] if t else None


#: In the grading sandbox, ranks talk over TCP on the sandbox's own loopback (not shared memory):
#: the bytes they send each other are then seen from outside (launch.OutsideView), the gradients'
#: allreduce among them. Both sides of a paired timing run so, alike.
SANDBOX_TRANSPORT = {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,tcp", "OMPI_MCA_btl_tcp_if_include": "lo"}


def transport():
    """SANDBOX_TRANSPORT when runs go through the grading sandbox, else nothing."""
    return dict(SANDBOX_TRANSPORT) if launch.wrapped() else {}


def argument(args, name, default=None):
    """The value of option `name` in a run's arguments (the grader's own), or `default`."""
    args = list(map(str, args))
    for i, arg in enumerate(args[:-1]):
        if arg == name:
            return args[i + 1]
    return default


def seed_of(args):
    """The --seed of a run's arguments (the grader's own choice), or None."""
    seed = argument(args, "--seed")
    return None if seed is None else int(seed)


#: Graded MPI ranks yield the core while they wait: a deadlocked run does not spin at 100 %.
#: Each idle poll sleeps 100 us (Open MPI's default, 1 ns, still used about a third of a core
#: per blocked rank; 100 us uses a seventh, and left a 2-rank training's throughput unchanged).
YIELD_WHEN_IDLE = {"OMPI_MCA_mpi_yield_when_idle": "1", "OMPI_MCA_threads_pthreads_yield_strategy": "nanosleep",
                   "OMPI_MCA_threads_pthreads_nanosleep_time": "100000"}


def _progress(res, watch):
    """The watchdog's view of a run: when it first progressed, its longest gap, whether it was stopped
    for a stall or for its CPU, the iterations it had done and how long before its end the last came."""
    return {"first_progress": watch.first, "longest_gap": watch.longest, "stalled": res.stalled,
            "stall": watch.stalled_after or watch.stall, "waited": round(res.waited, 2), "stepped_aside": res.stepped_aside,
            "contended": res.contended, "over_cpu": res.over_cpu, "iterations": watch.iterations(),
            "since_progress": round(watch.since_last(), 1)}


def log_part(part, seconds, **extra):
    """Append one part of a student's grading to HANDSON_PROFILE_LOG (set per student by
    the course's grader)."""
    log = settings.current().grader.profile_log
    if log and part:
        with open(log, "a") as f:
            f.write(json.dumps({"part": part, "seconds": round(seconds, 2), "ended": time.time(), **extra}) + "\n")


def _log_part(part, obs):
    log_part(part, obs.seconds, **obs.progress)


#: The launcher that observes a run from inside its processes (`python -m`).
OBSERVE_MODULE = "handson_lib.harness.observe"


def _observed_folders(tmp):
    """(where the launcher records, where the run works) inside a run's folder."""
    workdir = Path(tmp) / "run"
    workdir.mkdir()
    if launch.wrapped():   # the run, as the grading account, writes its --out there
        os.chmod(workdir, 0o777)
    return Path(tmp) / "observed", workdir


def staged(script, tmp):
    """A copy of the script alone, in a folder of the run's own: a run imports nothing that lies
    beside the script as handed in (only the assignment's files are graded: a module next to the
    script is not part of it, checking.scripts.beside_the_script says so before the run)."""
    folder = Path(tmp) / "script"
    folder.mkdir()
    copy = folder / Path(script).name
    copy.write_bytes(Path(script).read_bytes())
    if launch.wrapped():
        os.chmod(folder, 0o755)
        os.chmod(copy, 0o644)
    return copy


def _watchers(outdir, probe_at, rank=None):
    """(OutsideView, DependenceProbe or None) of a run: the bytes beside the iterations of the process
    that marks them, and, where the grader picked an iteration `probe_at`, the probe there."""
    heartbeat = outdir / ("heartbeat" if rank is None else f"heartbeat-rank{rank}")
    probe = launch.DependenceProbe(heartbeat, probe_at, rank) if probe_at else None
    return launch.OutsideView(heartbeat=heartbeat), probe


def _seen(outside, probe):
    seen = outside.result()
    seen["dependence"] = None if probe is None else probe.result
    return seen


def run_observed(script, args, timeout=300, env=None, timed=False, stall=None, part=None, say=None, snapshots=(),
                 cpu_limit=None, probe_at=None):
    """Run `python SCRIPT ARGS` under the instrumenting launcher and a watchdog.

    `timed`: the run's time is scored, so it holds the machine's timing slot alone (launch.timing_slot);
    `stall`: stop it once no training iteration has come for that many seconds;
    `part`: its name in the grading profile (HANDSON_PROFILE_LOG); `say`: told how far the run got
    every 10 s (launch.ProgressWatch); `snapshots`: the iterations at which the run keeps its
    parameters (Observation.snapshots); `cpu_limit`: the CPU-seconds its processes may use;
    `probe_at`: an iteration (the grader's, never told to the run) at which its other processes are
    stopped for a moment (launch.DependenceProbe: Observation.outside["dependence"])."""
    timeout = run_limit(timeout)
    with run_folder("handson-observe-") as tmp:
        outdir, workdir = _observed_folders(tmp)
        full_env = settings.child_env(env, changes={"observe_snapshots": tuple(snapshots)})
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        full_env.setdefault("MPLBACKEND", "Agg")
        cmd = [sys.executable, "-m", OBSERVE_MODULE, str(outdir), str(staged(script, tmp)),
               *args, "--out", str(workdir / "result")]
        watch = launch.ProgressWatch(outdir, stall, say=say)
        outside, probe = _watchers(outdir, probe_at)
        res = launch.run_watched(cmd, timeout, env=full_env, cwd=str(workdir), timed=timed, progress=watch,
                                 outside=outside, cpu_limit=cpu_limit, probe=probe)
        defuse(tmp)
        (record, workers, kept), refused = _read_left(_observed_records, outdir)
        obs = Observation(res.returncode, res.timed_out, res.output + refused, record, workers, res.seconds,
                          timeout, _progress(res, watch),
                          evidence.measure(record, outdir / "model.npz", seed_of(args)), _seen(outside, probe), kept)
        _log_part(part, obs)
        return obs


#: The most worker files (worker*.npz) the grader reads of one run: the course's runs have a few.
MOST_WORKER_FILES = 64
#: The most parameter snapshots (snapshot*.npz) the grader reads of one run: a few per worker or rank.
MOST_SNAPSHOTS = 64
#: A snapshot's name: snapshot[-workerI | -rankR]-ITERATION.npz (harness.controls.snapshot_name).
_SNAPSHOT_NAME = re.compile(r"snapshot(?:-(worker\d{1,3}|rank\d{1,3}))?-(\d{1,7})\.npz")


def _left_files(outdir, pattern, most):
    """The files matching `pattern` a run left in `outdir` (never through a link), at most `most`."""
    paths = sorted(outdir.glob(pattern)) if outdir.is_dir() and not outdir.is_symlink() else []
    if len(paths) > most:
        raise ValueError(f"{len(paths)} files {pattern} (at most {most})")
    return paths


def read_snapshots(outdir, arrays_read=None):
    """{who: {iteration: parameters}} of the snapshots a run left ("main" for a one-process run's own)."""
    kept, arrays_read = {}, arrays_read or evidence.RunArrays()
    for path in _left_files(outdir, "snapshot*.npz", MOST_SNAPSHOTS):
        match = _SNAPSHOT_NAME.fullmatch(path.name)
        if not match:
            continue
        arrays = arrays_read.load(path) or {}
        if "params" in arrays:
            kept.setdefault(match.group(1) or "main", {})[int(match.group(2))] = arrays["params"]
    return kept


def _observed_records(outdir):
    """(record, {worker index: arrays}, snapshots) of a one-process run."""
    record = evidence.read_record(outdir / "observed.json") or {}
    if not isinstance(record, dict):
        raise ValueError("observed.json: not a record")
    workers, arrays_read = {}, evidence.RunArrays()
    for path in _left_files(outdir, "worker*.npz", MOST_WORKER_FILES):
        arrays = arrays_read.load(path)
        workers[int(arrays["index"])] = arrays
    return record, workers, read_snapshots(outdir, arrays_read)


def _rank_records(outdir, np):
    """({rank: record}, {rank: parameters}, snapshots) of an MPI run of `np` ranks."""
    ranks, params, arrays_read = {}, {}, evidence.RunArrays()
    for path in _left_files(outdir, "observed-rank*.json", np):
        ranks[int(path.stem.split("rank")[1])] = evidence.read_record(path)
    for path in _left_files(outdir, "params-rank*.npz", np):
        params[int(path.stem.split("rank")[1])] = arrays_read.load(path)["params"]
    if not all(isinstance(record, dict) for record in ranks.values()):
        raise ValueError("observed-rank*.json: not a record")
    return ranks, params, read_snapshots(outdir, arrays_read)


def _read_left(read, outdir, *args):
    """What `read` finds of a run's records, and "" -- or, when a file is over a cap or broken, the
    records of a run that left none, and a line for its output that says why."""
    try:
        return read(outdir, *args), ""
    except Exception as error:   # whatever a run left: said in its output, never a crash of the grader
        return ({}, {}, {}), "\n[grader] " + tr("the run's records were not read: {error}",
                                                 error=f"{type(error).__name__}: {str(error)[:300]}") + "\n"


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
    evidence: dict = None   # what the grader measured itself of rank 0's model (checking.evidence.measure)
    outside: dict = None    # what the grader saw of its processes from outside (launch.OutsideView)
    snapshots: dict = None  # {"rankR": {iteration: parameters}} kept where the grader asked

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


def run_observed_mpi(script, np, args, timeout=300, timed=False, stall=None, part=None, say=None, snapshots=(),
                     cpu_limit=None, probe_at=None):
    """Run SCRIPT on `np` local ranks under the launcher (each rank observed) and a watchdog;
    `timed`, `stall`, `part`, `say`, `snapshots`, `cpu_limit` and `probe_at` (the other ranks
    stopped, rank 0 watched) as in run_observed."""
    timeout = run_limit(timeout)
    with run_folder("handson-observe-") as tmp:
        outdir, workdir = _observed_folders(tmp)
        argv = ["-m", OBSERVE_MODULE, str(outdir), str(staged(script, tmp)), *args,
                "--out", str(workdir / "result")]
        watch = launch.ProgressWatch(outdir, stall, say=say)
        outside, probe = _watchers(outdir, probe_at, rank=0)
        env = settings.child_env(changes={"observe_snapshots": tuple(snapshots)}, MPLBACKEND="Agg",
                                 **YIELD_WHEN_IDLE, **transport())
        res = launch.run_mpi(np, argv, timeout=timeout, cwd=str(workdir), extra_args=["--output", "tag"],
                             env=env, timed=timed, progress=watch, outside=outside, cpu_limit=cpu_limit,
                             probe=probe)
        defuse(tmp)
        (ranks, params, kept), refused = _read_left(_rank_records, outdir, np)
        obs = MPIObservation(np, res.returncode, res.timed_out, res.output + refused, ranks, params, res.seconds,
                             timeout, _progress(res, watch),
                             evidence.measure(ranks.get(0, {}), outdir / "model-rank0.npz", seed_of(args)),
                             _seen(outside, probe), kept)
        _log_part(part, obs)
        return obs


# ----------------------------------------------------------------------------- runs kept as data

#: A kept run (the session's reference, a student's untimed run, a course demo) is plain data:
#: JSON for its scalars, records and output, an .npz beside it for its arrays, read back with
#: allow_pickle=False and checked field by field, so that reading one back never runs code,
#: whoever wrote the file.
RUN_FORMAT = 3
_NUMBER = (int, float)
#: Each kind's fields: a type (or types) its JSON value must have, or "arrays" (kept in the .npz).
_SCHEMA = {
    "Observation": {"returncode": int, "timed_out": bool, "output": str, "record": dict, "workers": "arrays",
                    "seconds": _NUMBER, "limit": (*_NUMBER, type(None)), "progress": (dict, type(None)),
                    "evidence": (dict, type(None)), "outside": (dict, type(None))},
    "MPIObservation": {"np": int, "returncode": int, "timed_out": bool, "output": str, "ranks": dict,
                       "params": "arrays", "seconds": _NUMBER, "limit": (*_NUMBER, type(None)),
                       "progress": (dict, type(None)), "evidence": (dict, type(None)), "outside": (dict, type(None))},
    "MPIResult": {"command": list, "returncode": int, "output": str, "seconds": _NUMBER, "timed_out": bool,
                  "killed": list, "stalled": bool, "waited": _NUMBER, "stepped_aside": bool, "contended": bool,
                  "over_cpu": bool},
}


def _arrays_out(name, value):
    """{npz key: array} of an arrays field: workers {index: {name: array}}, params {rank: array}."""
    if name == "workers":
        return {f"workers/{i}/{k}": numpy.asarray(a) for i, w in value.items() for k, a in w.items()}
    return {f"params/{rank}": numpy.asarray(a) for rank, a in value.items()}


def _arrays_in(name, npz):
    if name == "workers":
        workers = {}
        for key in npz.files:
            _, index, part = key.split("/")
            workers.setdefault(int(index), {})[part] = npz[key]
        return workers
    return {int(key.split("/")[1]): npz[key] for key in npz.files if key.startswith("params/")}


def save_run(run, path):
    """Keep `run` (an Observation, MPIObservation or launch.MPIResult) at PATH (.json, and an .npz
    beside it for its arrays)."""
    path = Path(path)
    kind = type(run).__name__
    plain, arrays = {}, {}
    for name, expected in _SCHEMA[kind].items():
        value = getattr(run, name)
        if expected == "arrays":
            arrays.update(_arrays_out(name, value))
        elif name == "ranks":
            plain[name] = {str(rank): record for rank, record in value.items()}
        else:
            plain[name] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    if arrays:
        with open(path.with_suffix(".npz"), "wb") as f:
            numpy.savez(f, **arrays)
    path.write_text(json.dumps({"format": RUN_FORMAT, "kind": kind, "fields": plain}))


def load_run(path, kind):
    """The run of `kind` (Observation, MPIObservation or launch.MPIResult) kept at PATH, or None
    when the file is not such a run (another format, a field missing or of another type): the
    caller runs it again."""
    path = Path(path)
    try:
        kept = json.loads(path.read_text())
        schema = _SCHEMA[kind.__name__]
        if kept.get("format") != RUN_FORMAT or kept.get("kind") != kind.__name__:
            return None
        plain = kept["fields"]
        values = {}
        for name, expected in schema.items():
            if expected == "arrays":
                npz_path = path.with_suffix(".npz")
                if npz_path.exists():
                    with numpy.load(npz_path, allow_pickle=False) as npz:
                        values[name] = _arrays_in(name, npz)
                else:
                    values[name] = {}
            elif not isinstance(plain.get(name), expected) or (expected is int and isinstance(plain[name], bool)):
                return None
            elif name == "ranks":
                values[name] = {int(rank): record for rank, record in plain[name].items()}
            else:
                values[name] = plain[name]
        if set(plain) - set(schema):
            return None
        return kind(**values)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
