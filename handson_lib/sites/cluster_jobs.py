"""Jobs on the local cluster, for the notebooks and the tests: `qsub`, `job_info` (`scontrol show
job`) and `wait_job`, each an error (ClusterError) when Slurm does not answer, never "done".
"""

import re
import time

from handson_lib.sites import cluster_daemons, jobs
from handson_lib.sites.cluster_config import ClusterError
from handson_lib.sites.cluster_daemons import cluster_env


def qsub(script, cwd, *qsub_args, env=None, timeout=60):
    """`qsub [ARGS] SCRIPT` in `cwd` against this cluster (jobs.qsub); the job id. A refused job (a
    walltime over the queue's limit, too many nodes, ...) raises ClusterError with the scheduler's
    message."""
    try:
        return jobs.qsub(script, cwd, *qsub_args, env=cluster_env(base=env), timeout=timeout)
    except jobs.JobError as err:
        raise ClusterError(str(err)) from None


#: What to do when a query of this cluster fails.
QUERY_ADVICE = ("Is slurmctld up? `handson cluster status`; as root, `handson cluster up` restarts "
                "the daemons that stopped and keeps the jobs.")


def job_info(jobid):
    """`scontrol show job` as a dict (JobState, RunTime, NodeList, Account, ...); {} when Slurm
    does not know the job. ClusterError when scontrol fails otherwise (slurmctld does not answer)
    after a few tries (jobs.query)."""
    try:
        result = jobs.query(["scontrol", "show", "job", "-o", str(jobid)],
                            lambda cmd, timeout: cluster_daemons.slurm(cmd, timeout=timeout),
                            unknown=lambda r: "Invalid job id" in r.stderr + r.stdout,
                            advice=QUERY_ADVICE)
    except jobs.QueryError as err:
        raise ClusterError(str(err)) from None
    return dict(re.findall(r"(\w+)=(\S*)", result.stdout)) if result else {}


def wait_job(jobid, timeout=300, poll=1.0):
    """Wait with qstat until the job is completed; its Slurm state (COMPLETED, TIMEOUT, FAILED ...).
    ClusterError when qstat or scontrol fails (after a few tries): the job is not taken as done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done = jobs.job_done(jobid, env=cluster_env(), advice=QUERY_ADVICE)
        except jobs.QueryError as err:
            raise ClusterError(f"job {jobid}: {err}") from None
        if done:
            state = job_info(jobid).get("JobState", "")
            if state not in ("RUNNING", "PENDING", "COMPLETING", "CONFIGURING"):
                return state or "UNKNOWN"
        time.sleep(poll)
    raise ClusterError(f"job {jobid} still not done after {timeout:.0f} s: {job_info(jobid).get('JobState')}")
