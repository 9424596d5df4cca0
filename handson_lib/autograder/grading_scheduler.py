"""The scheduler a cluster grading session submits its jobs to: the course's local Slurm cluster
(`handson cluster up`) when it runs, else the site's own PBS/Slurm `qsub` on PATH; the grading
jobs' script; and a job's state, read as one of queued / running / done. `ThisMachine` runs the
same jobs as processes of this machine (the classroom's grading service without a cluster).

A grading job is never requeued by the scheduler itself (`--no-requeue`, PBS `-r n`): Slurm's
default requeues the job of a node that died and starts it again elsewhere, after the grader
has sent its students to a new job (found grading a class of 48 on 4 nodes). The grader alone
requeues, student by student.
"""

import dataclasses
import math
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from handson_lib import settings
from handson_lib.sites import jobs, table

#: A job's state, as the session reads it.
QUEUED, RUNNING, DONE = "queued", "running", "done"
#: Slurm's states of a job still queued or running (scontrol show job).
SLURM_QUEUED = ("PENDING", "CONFIGURING", "REQUEUED", "RESV_DEL_HOLD", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED",
                "STOPPED")
SLURM_RUNNING = ("RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING")
#: Seconds a grading job asks for before its students: the node's reference measurements.
REFERENCE_ALLOWANCE = 900
#: Seconds a grading job asks for each of its students (a correct task2 student takes about a
#: minute on a 2-core node; the head requeues the students of a job that runs past its walltime).
PER_STUDENT_ALLOWANCE = 300


class SchedulerError(Exception):
    """No scheduler to submit to, or one that refused a job; the message says what to do."""


@dataclasses.dataclass
class Scheduler:
    """Where the grading jobs go. `local`: the course's local cluster (its nodes share this
    machine's cores); else a site's scheduler (`site`: the site table's row, for its queues)."""
    local: bool
    site: table.Site
    nodes: list          # the node names known (the local cluster's), else []

    @property
    def pbs(self):
        """A PBS scheduler (the site's, not the local Slurm cluster's PBS commands)."""
        return not self.local and "PBS" in self.site.scheduler

    def usable_hosts(self, excluded):
        """PBS has no option that leaves nodes out: the nodes `pbsnodes -a` lists as usable, less
        `excluded`, for a job that names the node it runs on ([] where they cannot be listed)."""
        if not (self.pbs and excluded):
            return []
        return [n for n in jobs.pbs_nodes() if n not in excluded]

    def submit(self, script, cwd):
        try:
            if self.local:
                from handson_lib.sites import cluster_jobs
                return cluster_jobs.qsub(script, cwd)
            return jobs.qsub(script, cwd)
        except Exception as err:  # ClusterError, JobError: the scheduler's own words
            raise SchedulerError(f"the scheduler refused a grading job: {err}") from None

    def state(self, jobid):
        """QUEUED, RUNNING or DONE (with Slurm's word for how it ended, where known: ('done',
        'TIMEOUT')). A query that fails is an error (jobs.QueryError / ClusterError), never done."""
        if self.local:
            from handson_lib.sites import cluster_jobs
            word = cluster_jobs.job_info(jobid).get("JobState", "")
            if word in SLURM_QUEUED:
                return QUEUED, word
            if word in SLURM_RUNNING:
                return RUNNING, word
            return DONE, word or "gone"
        letter = jobs.qstat_state(jobid)
        if letter in ("Q", "H", "W", "T", "S", "U", "M"):   # queued, held, suspended, moved: not over
            return QUEUED, letter
        if letter in ("R", "E", "B"):
            return RUNNING, letter
        return DONE, letter or "gone"

    def cancel(self, jobid):
        """qdel: "" when the scheduler took it, else what failed."""
        if self.local:
            from handson_lib.sites.cluster_daemons import cluster_env
            return jobs.qdel(jobid, env=cluster_env())
        return jobs.qdel(jobid)

    def queue_for(self, seconds, wanted=None):
        """(queue name, walltime in seconds): the queue named `wanted`, else the first of the site's
        queues whose longest walltime covers `seconds` (else its longest); the walltime is
        `seconds` capped by the queue's limit."""
        queues = list(self.site.queues.values())
        if wanted:
            if wanted not in self.site.queues:
                raise SchedulerError(f"no queue {wanted!r} on {self.site.name}: {', '.join(self.site.queues)}")
            queue = self.site.queues[wanted]
        else:
            fitting = [q for q in queues if q.max_walltime >= seconds]
            queue = fitting[0] if fitting else max(queues, key=lambda q: q.max_walltime)
        return queue.name, min(int(seconds), queue.max_walltime)


def find(site_name=None):
    """The local cluster when it runs, else the site's qsub; SchedulerError when neither."""
    from handson_lib.sites import cluster_config, cluster_daemons
    p = cluster_config.paths()
    if cluster_daemons.is_up(p):
        return Scheduler(True, cluster_config.configured_site(p), cluster_config.configured_nodes(p))
    if jobs.scheduler_found():
        return Scheduler(False, table.get_site(site_name), [])
    raise SchedulerError("no scheduler to grade on: bring the course's cluster up (`handson cluster up "
                         "--nodes 4`, as root) or run on a cluster's login node, where `qsub` is on PATH")


def walltime_for(students):
    return REFERENCE_ALLOWANCE + PER_STUDENT_ALLOWANCE * students


def hhmmss(seconds):
    seconds = int(math.ceil(seconds))
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def job_script(job_dir, name, queue, walltime, excluded=(), host=None):
    """A grading job: one node, the course's Python running autograder.node_grading on the job's
    folder; never requeued by the scheduler (the module's docstring). `excluded`: nodes this
    session saw fail (Slurm's sbatch reads the #SBATCH line; a PBS Pro site ignores it, so there
    the job names `host`, a node not excluded: Scheduler.usable_hosts)."""
    select = f"select=1:host={host}" if host else "select=1"
    lines = ["#!/bin/bash", f"#PBS -N {name}", f"#PBS -q {queue}", f"#PBS -l {select}",
             f"#PBS -l walltime={hhmmss(walltime)}", "#PBS -j oe", "#PBS -r n", "#SBATCH --no-requeue"]
    if excluded:
        lines.append(f"#SBATCH --exclude={','.join(sorted(excluded))}")
    lines += [f"cd {shlex.quote(str(job_dir))}",
              f"exec {shlex.quote(sys.executable)} -m handson_lib.autograder.node_grading {shlex.quote(str(job_dir))}"]
    path = Path(job_dir) / f"{name}.sh"
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclasses.dataclass
class ThisMachine:
    """The grading jobs as processes of this machine, with the interface of Scheduler: a job is
    its script run by bash in a session of its own (it outlives a grading service killed while it
    grades, which then follows it again by its id: `pid:START`, the start time telling a pid
    reused since)."""
    site: table.Site
    nodes: list = dataclasses.field(default_factory=list)
    local: bool = True
    pbs: bool = False
    children: dict = dataclasses.field(default_factory=dict)

    def usable_hosts(self, excluded):
        return []

    def submit(self, script, cwd):
        """Start the job; every process of it carries its folder (settings' grading_job), and no
        token of the hub that started the service."""
        import psutil
        env = {k: v for k, v in settings.child_env(changes={"grading_job": str(cwd)}).items()
               if not k.startswith("JUPYTERHUB_")}
        with open(Path(cwd) / "output.log", "ab") as log:
            proc = subprocess.Popen(["bash", str(script)], cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True, env=env)
        self.children[proc.pid] = proc
        return f"pid:{proc.pid}:{psutil.Process(proc.pid).create_time():.2f}"

    def _process(self, jobid):
        import psutil
        try:
            _, pid, started = jobid.split(":")
            proc = psutil.Process(int(pid))
            if f"{proc.create_time():.2f}" == started and proc.status() != psutil.STATUS_ZOMBIE:
                return proc
        except (ValueError, psutil.Error):
            pass
        return None

    def state(self, jobid):
        child = self.children.get(int(jobid.split(":")[1])) if jobid.count(":") == 2 else None
        if child is not None and child.poll() is not None:
            self.children.pop(child.pid, None)
            return DONE, f"exit {child.returncode}"
        return (RUNNING, "running") if self._process(jobid) else (DONE, "gone")

    def cancel(self, jobid):
        """SIGTERM to the job's session (node_grading stops every process of the job, then exits)."""
        proc = self._process(jobid)
        if proc is None:
            return ""
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except OSError as err:
            return str(err)
        return ""

    def queue_for(self, seconds, wanted=None):
        return "this-machine", int(seconds)
