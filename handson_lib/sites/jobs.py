"""PBS jobs from Python: submit with `qsub`, wait, read `NAME.oJOBID`; and MPI runs as jobs on the
course's local cluster (`handson cluster up`), whose nodes may have a shaped network between them.

Ships in the student edition: nothing here needs root. The notebooks submit the task job scripts
with it, and the experiments (`breakdown.measure`, `allreduce.measure`) put their ranks on the
cluster's nodes when a cluster with a link of its own is up (`handson cluster up --link 1gbe`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from handson_lib import launch, settings
from handson_lib.launch import MPIResult
from handson_lib.messages import tr
from handson_lib.sites.table import LINKS, format_walltime, get_site

DEFAULT_STATE_DIR = "/var/lib/handson-cluster"
#: environment of every job step on a shaped cluster (the cluster's TaskProlog exports them)
LINK_ENV = settings.variable("link")
LINK_RATE_ENV = settings.variable("link_rate_bps")
#: queue of the jobs the experiments submit (the local site's first queue: h-debug)
EXPERIMENT_QUEUE = next(iter(get_site("local").queues.values()))


#: sinfo's short node states of a cluster that can run jobs
USABLE_NODE_STATES = ("idle", "alloc", "mix", "comp", "resv")
#: A job query (qstat, scontrol) that fails is tried again after each of these pauses (seconds):
#: the controller may be busy or restarting for a moment. Then it is an error: a job whose state
#: nobody could read is not a finished job.
QUERY_PAUSES_S = (1.0, 3.0)
#: seconds one query may take (a Slurm client retries an absent controller for about 10 s)
QUERY_TIMEOUT_S = 30
#: What qstat says of a job it does not know (any more): Slurm's wrapper exits 153 with no output
#: (PBS's code for "Unknown Job Id"); PBS Pro says "Job has finished" without -x.
QSTAT_UNKNOWN_EXIT = 153
QSTAT_UNKNOWN = re.compile(r"Unknown Job Id|Job has finished", re.I)
#: What to do when a query fails, for the messages (the local cluster's commands, a site's qstat).
QUERY_ADVICE = ("Is the scheduler up? `qstat` by hand; on the course's local cluster "
                "`handson cluster status`, and as root `handson cluster up` restarts what stopped "
                "and keeps the jobs.")


class JobError(RuntimeError):
    """qsub refused a job, or a job did not finish; the message has the scheduler's words."""


class QueryError(JobError):
    """A job query (qstat, scontrol) failed every time it was tried: the job's state is unknown."""


def query(cmd, run, unknown=lambda result: False, advice=""):
    """Run the scheduler query `cmd` with `run(cmd, timeout)` (a CompletedProcess, text) until it
    answers: its result, or None when `unknown(result)` says that the scheduler does not know the
    job (any more). A failure (non-zero exit, no answer in time) is tried again after each pause
    of QUERY_PAUSES_S, then raises QueryError with the command's own words and `advice`."""
    started = time.monotonic()
    tries = 0
    for pause in (*QUERY_PAUSES_S, None):
        tries += 1
        try:
            result = run(cmd, QUERY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            failure = f"no answer within {QUERY_TIMEOUT_S} s"
        except OSError as err:
            failure = str(err)
            pause = None  # a missing command does not come back by waiting
        else:
            if result.returncode == 0:
                return result
            if unknown(result):
                return None
            said = (result.stderr or "").strip() or (result.stdout or "").strip() or "no output"
            failure = f"exit {result.returncode}: {said}"
        if pause is None:
            break
        time.sleep(pause)
    raise QueryError(f"`{' '.join(map(str, cmd))}` failed {tries} time(s) over "
                     f"{time.monotonic() - started:.0f} s ({failure}); the job's state is unknown "
                     f"(not taken as finished). {advice}".rstrip())


def _env(env=None):
    """The venv first on PATH, so that a job finds the course's Python and mpiexec."""
    env = dict(os.environ if env is None else env)
    venv = str(Path(sys.executable).parent)
    if not env.get("PATH", "").startswith(venv + os.pathsep):
        env["PATH"] = f"{venv}{os.pathsep}{env.get('PATH', '')}"
    return env


def scheduler_found(env=None):
    """qsub and qstat are on PATH (whether a scheduler answers them: scheduler_answers)."""
    path = (env or os.environ).get("PATH")
    return bool(shutil.which("qsub", path=path) and shutil.which("qstat", path=path))


#: Seconds a notebook waits for `qstat` to answer before it submits: a Slurm client retries a
#: controller it cannot reach for about 10 s before it gives up.
PROBE_TIMEOUT_S = 20


def scheduler_answers(env=None, timeout=PROBE_TIMEOUT_S):
    """Whether a scheduler answers here: qsub and qstat on PATH, and `qstat` exits 0 in time.
    Slurm's PBS commands installed where no controller runs are on PATH but reach none (they print
    `fatal: Could not establish a configuration source`): that is no scheduler either."""
    env = _env(env)
    if not scheduler_found(env):
        return False
    try:
        result = subprocess.run(["qstat"], capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def refusal_message(output):
    """The scheduler's reason in a refused qsub's output (`sbatch: error: ...`)."""
    found = re.findall(r"sbatch: error: (?:Batch job submission failed: )?(.+)", output)
    return found[-1].strip().strip("'") if found else ""


def qsub(script, cwd, *qsub_args, env=None, timeout=60):
    """`qsub [ARGS] SCRIPT` in `cwd`; the job id (a string). JobError with the scheduler's reason
    when the job is refused (a walltime over the queue's limit, too many nodes, ...)."""
    result = subprocess.run(["qsub", *map(str, qsub_args), str(script)], cwd=cwd, env=_env(env),
                            capture_output=True, text=True, timeout=timeout)
    output = (result.stdout + result.stderr).strip()
    jobid = output.splitlines()[-1].strip() if output else ""
    if result.returncode != 0 or not jobid.split(".")[0].isdigit():
        raise JobError(refusal_message(output) or output or f"qsub exit code {result.returncode}")
    return jobid


def _qstat_unknown(result):
    text = (result.stdout or "") + (result.stderr or "")
    return ((result.returncode == QSTAT_UNKNOWN_EXIT and not text.strip())
            or bool(QSTAT_UNKNOWN.search(text)))


def qstat_state(jobid, env=None, advice=QUERY_ADVICE):
    """The PBS state letter from `qstat JOBID` (Q queued, R running, C completed, ...); None when
    the scheduler does not know the job (any more). QueryError when qstat fails (a controller that
    does not answer) after a few tries: never None for that, which would read as "done"."""
    def run(cmd, timeout):
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env(env))
    result = query(["qstat", str(jobid)], run, unknown=_qstat_unknown, advice=advice)
    if result is None:
        return None
    for line in result.stdout.split("\n"):
        fields = line.split()
        if fields and fields[0].split(".")[0] == str(jobid).split(".")[0] and len(fields) >= 5:
            return fields[-2]
    return None


def job_done(jobid, env=None, advice=QUERY_ADVICE):
    """True once `qstat JOBID` no longer lists the job as queued or running (QueryError when qstat
    fails, with `advice`)."""
    return qstat_state(jobid, env, advice) in ("C", "E", "F", None)


def output_file(workdir, jobid):
    """The job's output file (NAME.oJOBID) in `workdir`, or None."""
    found = sorted(Path(workdir).glob(f"*.o{str(jobid).split('.')[0]}"))
    return found[0] if found else None


def wait_for_output(workdir, jobid, timeout, poll=1.0, env=None):
    """The job's `NAME.oJOBID` once the job is done; None after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = output_file(workdir, jobid)
        if found and job_done(jobid, env):
            return found
        time.sleep(poll)
    return None


def qdel(jobid, env=None):
    """`qdel JOBID`: "" when the scheduler took it, else what failed (the job may still run)."""
    try:
        result = subprocess.run(["qdel", str(jobid)], capture_output=True, text=True, timeout=60,
                                env=_env(env))
    except (OSError, subprocess.TimeoutExpired) as err:
        return str(err)
    if result.returncode != 0:
        said = (result.stderr or "").strip() or (result.stdout or "").strip()
        return f"exit {result.returncode}" + (f": {said}" if said else "")
    return ""


#: Words of PBS's `state = ...` line of a node that takes no job.
PBS_NODE_UNUSABLE = ("down", "offline", "unknown", "stale", "state-unknown")


def parse_pbsnodes(text):
    """The nodes `pbsnodes -a` (PBS Pro, Torque) lists as usable: each node's name starts a line,
    its attributes follow indented (`state = free`)."""
    nodes, name = [], None
    for line in text.splitlines():
        if line.strip() and not line[0].isspace():
            name = line.strip()
            nodes.append(name)
        elif name and line.strip().startswith("state =") and \
                any(word in line.split("=", 1)[1] for word in PBS_NODE_UNUSABLE):
            nodes.remove(name)
            name = None
    return nodes


def pbs_nodes(env=None):
    """parse_pbsnodes of `pbsnodes -a` here ([] where it fails)."""
    try:
        result = subprocess.run(["pbsnodes", "-a"], capture_output=True, text=True, timeout=60, env=_env(env))
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_pbsnodes(result.stdout) if result.returncode == 0 else []


class Terminated(BaseException):
    """SIGTERM arrived while this process waited for a job it submitted (a watchdog stopping it)."""


@contextlib.contextmanager
def _sigterm_raises():
    """Within it, SIGTERM raises Terminated, so that the job is cancelled before the process goes;
    then the process ends by SIGTERM as it would have. Only where nothing else handles SIGTERM."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL):
        yield
        return

    def handler(signum, frame):
        raise Terminated()
    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        raise
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stopped_by(err):
    if isinstance(err, KeyboardInterrupt):
        return tr("interrupted")
    if isinstance(err, Terminated):
        return tr("stopped by SIGTERM")
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


class SubmittedJob:
    """A job this code submitted; `done` once the wait saw it finish (see `cancelled_unless_done`)."""

    def __init__(self, jobid):
        self.jobid = jobid
        self.done = False


@contextlib.contextmanager
def cancelled_unless_done(jobid, env=None, say=None):
    """Around the wait for a job that this code submitted: unless the wait marks it done, the job is
    cancelled with qdel when the block ends (a timeout, an error, Ctrl-C, a watchdog's SIGTERM), so
    that no abandoned job holds nodes or runs on; `say` (default: stderr) tells which job and why.

        with jobs.cancelled_unless_done(jobid) as job:
            job.done = wait_for_output(folder, jobid, timeout) is not None
    """
    say = say or (lambda text: print(text, file=sys.stderr, flush=True))
    job = SubmittedJob(jobid)
    with _sigterm_raises():
        try:
            yield job
        except BaseException as err:
            if not job.done:
                _cancel(job, _stopped_by(err), env, say)
            raise
        if not job.done:
            _cancel(job, tr("gave up waiting"), env, say)


def _cancel(job, why, env, say):
    failed = qdel(job.jobid, env)
    if failed:
        say(tr("job {jobid}: `qdel {jobid}` failed ({error}); the job may still run: cancel it by "
               "hand ({why})", jobid=job.jobid, error=failed, why=why))
    else:
        say(tr("job {jobid}: cancelled with `qdel {jobid}` ({why})", jobid=job.jobid, why=why))


# ----------------------------------------------------------------------------- the local cluster

def state_dir() -> Path:
    """Where `handson cluster up` keeps its state ($HANDSON_CLUSTER_DIR or /var/lib/handson-cluster)."""
    return Path(settings.current().cluster_dir or DEFAULT_STATE_DIR)


def link_state_file() -> Path:
    return state_dir() / "link.json"


def shaped_cluster():
    """The local cluster's link record ({"profile": {...}, "nodes": [...], ...}) when a cluster
    with a network of its own is up and its scheduler answers; None otherwise."""
    try:
        state = json.loads(link_state_file().read_text())
    except (OSError, ValueError):
        return None
    if not scheduler_found():
        return None
    try:
        answer = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True,
                                timeout=15, env=_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    states = answer.stdout.split()
    # A node between jobs is "comp"(leting) for a moment; "*" marks one that does not answer.
    if answer.returncode != 0 or not states or not all(s.rstrip("*~#") in USABLE_NODE_STATES
                                                       and not s.endswith("*") for s in states):
        return None
    return state


def job_link(environ=None):
    """The link a run's ranks talked over, for its result: the profile's name and rate where a
    shaped cluster's job set them, else 'none' (ranks on one host)."""
    carried = settings.read(environ)
    name = (carried.link or "").strip()
    if not name:
        return {"profile": "none", "rate_bps": None,
                "note": "not a job of a shaped cluster: every rank on one host, no network"}
    rate = carried.link_rate_bps or ""
    profile = LINKS.get(name)
    return {"profile": name, "rate_bps": int(rate) if rate.isdigit() else (profile and profile.rate_bps),
            "note": profile.title if profile else "a profile this course does not know"}


@dataclass(frozen=True)
class Placement:
    """How `np` ranks sit on the cluster's nodes: as few ranks per node as the nodes allow."""
    np: int
    nodes: int
    per_node: int

    @classmethod
    def spread(cls, np, nodes_available):
        nodes = max(1, min(int(np), int(nodes_available)))
        per_node = math.ceil(int(np) / nodes)
        nodes = math.ceil(int(np) / per_node)
        return cls(int(np), nodes, per_node)

    @property
    def text(self):
        return f"{self.np} rank(s) on {self.nodes} node(s), {self.per_node} per node"


def mpi_job_script(placement: Placement, argv, name, walltime_s=600, queue=None, mpi_args=()):
    """A PBS job script that runs `python ARGV` on the placement's ranks, one `ppr` per node
    (`mpi_args`: mpiexec's own options before the program, e.g. `--mca KEY VALUE`)."""
    queue = queue or EXPERIMENT_QUEUE
    walltime = format_walltime(min(max(60, int(walltime_s)), queue.max_walltime))
    command = " ".join(_shell_word(a) for a in argv)
    options = "".join(" " + _shell_word(a) for a in mpi_args)
    return f"""#!/bin/bash
# Written by handson_lib.sites.jobs for {placement.text}.
#PBS -q {queue.name}
#PBS -l select={placement.nodes}:mpiprocs={placement.per_node}:ompthreads=1
#PBS -l walltime={walltime}
#PBS -N {name}
#PBS -j oe
cd "$PBS_O_WORKDIR"
echo "nodes: $(sort -u "${{PBS_NODEFILE:-/dev/null}}" | tr '\\n' ' ')link: ${{{LINK_ENV}:-none}}"
mpiexec -n {placement.np} --map-by ppr:{placement.per_node}:node{options} python {command}
"""


def _shell_word(text):
    text = str(text)
    return text if re.fullmatch(r"[\w./:=,+-]+", text) else "'" + text.replace("'", "'\\''") + "'"


def run_mpi_job(np, argv, nodes_available, name="handson-run", timeout=600, workdir=None, mpi_args=()):
    """Run `python ARGV` on `np` ranks as a job of the local cluster and wait for it (qdel after
    `timeout` s). An MPIResult like launch.run_mpi's: the job's output, its exit status read from
    the output's end marker, seconds from submission to the end."""
    placement = Placement.spread(np, nodes_available)
    folder = Path(workdir or tempfile.mkdtemp(prefix="handson-job-"))
    script = folder / f"{name}.sh"
    script.write_text(mpi_job_script(placement, argv, name, walltime_s=timeout + 60, mpi_args=mpi_args)
                      + 'echo "handson-job-exit: $?"\n')
    started = time.monotonic()
    jobid = qsub(script.name, folder)
    # Cancelled when the wait ends any other way than with the job done: the timeout, a failed
    # qstat, Ctrl-C.
    with cancelled_unless_done(jobid) as job:
        found = wait_for_output(folder, jobid, timeout)
        job.done = found is not None
    timed_out = found is None
    if timed_out:
        found = wait_for_output(folder, jobid, 30)  # what the job printed before qdel
    text = found.read_text(errors="replace") if found else ""
    exit_codes = re.findall(r"^handson-job-exit: (\d+)$", text, flags=re.M)
    returncode = int(exit_codes[-1]) if exit_codes else 1
    command = ["qsub", str(script), f"({placement.text}, job {jobid})"]
    return MPIResult(command, returncode, text, time.monotonic() - started, timed_out=timed_out)


WHERE = ("auto", "local", "cluster")


def where_ranks_run(where="auto"):
    """(the shaped cluster's record, or None for local ranks) for `where`: 'local', 'cluster' (a
    JobError when no shaped cluster is up) or 'auto' (the cluster when one is up)."""
    if where not in WHERE:
        raise ValueError(f"where={where!r}: choose one of {', '.join(WHERE)}")
    if where == "local":
        return None
    state = shaped_cluster()
    if state is None and where == "cluster":
        raise JobError("no local cluster with a network of its own is up: as root, "
                       "`handson cluster up --link 1gbe` (or run the ranks here: where='local')")
    return state


def run_ranks(np, argv, timeout=600, where="auto", name="handson-run", echo=False, cwd=None, mpi_args=()):
    """`python ARGV` on `np` ranks: as a job across the shaped cluster's nodes when `where` picks
    it (see where_ranks_run), else on local ranks under launch.run_mpi's watchdog (`mpi_args`:
    mpiexec's own options)."""
    state = where_ranks_run(where)
    if state is None:
        return launch.run_mpi(np, argv, timeout=timeout, echo=echo, cwd=cwd, extra_args=tuple(mpi_args))
    result = run_mpi_job(np, argv, len(state["nodes"]), name=name, timeout=timeout, mpi_args=mpi_args)
    if echo:
        print(result.output, end="", flush=True)
    return result
