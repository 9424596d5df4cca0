"""`handson cluster up|down|status`: a real Slurm cluster on this one machine, driven with PBS commands.

The course's job scripts are written for PBS Pro (Reedbush-H). Here they run unchanged under a real
scheduler: Debian's Slurm (`slurmctld`, one `slurmd` per fake node) with its Torque/PBS wrappers
(`qsub`, `qstat`, `qdel`, `pbsnodes` from `slurm-wlm-torque`). `up` needs root: it installs the
packages with apt when they are missing and starts system daemons. Without root, run a job script
directly with `handson jobscript run FILE`.

What `up` sets up (everything under the state folder, /var/lib/handson-cluster or
$HANDSON_CLUSTER_DIR, logs in its log/ folder):

- munged with its own key and socket; slurmctld; N `slurmd -N nX` (one port each). Each slurmd runs
  in its own UTS namespace whose host name is its node name, so that `hostname` in a job, and
  ChainerMN's `intra_rank` / `inter_rank` (computed from MPI processor names), tell the fake nodes
  apart as on a real cluster. Where namespaces are not allowed, all nodes share the real host name.
- `up --link PROFILE` (1gbe, 10gbe, ib-edr; default none) gives each node a network of its own
  (handson_lib.sites.network): a network namespace per node, joined by veth pairs through a bridge,
  each link shaped to the profile's rate with `tc`. Every slurmd runs in its node's namespace, so
  its job steps and ranks do too; the TaskProlog makes Open MPI use TCP over those interfaces
  between nodes (shared memory inside one) and tells the jobs the profile (HANDSON_LINK).
  `status` prints the profile, the rates tc applies and each node's byte counters; `down`
  removes every namespace, veth and the bridge.
- Nodes declared like Reedbush-H nodes (2 sockets x 18 cores, 256 GB) with
  `SlurmdParameters=config_overrides`. Slurm cannot declare GPUs without device files: the two
  P100 per node are not declared; the course's CPU stand-in replaces them (one worker process per
  "GPU"), and every job gets whole nodes (OverSubscribe=EXCLUSIVE) as with PBS Pro on Reedbush.
- A partition `jupyter` (shared nodes, 12 h) for the notebook servers of `handson classroom up
  --spawner batch`, beside the course's queues.
- Partitions named after the course's queues, with the limits of the `local` site in the site table
  (handson_lib/sites/table.py: Reedbush-H's queues), each queue's node limit capped by the nodes the
  cluster has; checked when a job is submitted (EnforcePartLimits=ALL): qsub refuses too long a
  walltime or too many nodes. `up --site miyabi` (or abci, ...) names the partitions after that
  site's queues instead (`debug-g`, `regular-g`), so that a student's job script for that site is
  submitted unchanged; only the queues change, the nodes are the same CPU nodes.
- Differences from PBS Pro, smoothed: `PBS_O_WORKDIR` and friends come from the spank_pbs plugin;
  `PBS_NODEFILE` is written by the TaskProlog of the batch step (one line per MPI process, as PBS
  Pro writes it); the TaskProlog also puts the course's virtual environment first on `PATH` (the
  wrapper package's /usr/bin/mpiexec would shadow the venv's Open MPI), and sets Open MPI's
  settings for fake nodes (no process binding: several nodes share the same cores; root allowed).
  A job over its walltime is killed by slurmctld within about 30 s after the limit
  (OverTimeLimit=0); its output file ends with `CANCELLED AT ... DUE TO TIME LIMIT` and its state
  is TIMEOUT (`scontrol show job ID`, the job-completion log log/jobcomp.log; no `sacct`: there is
  no accounting database). Output files are named after the job, `NAME.oJOBID` (`#PBS -N NAME`,
  else the script's file name), as PBS Pro names them (job_submit.lua renames the wrapper's
  `SCRIPT.oJOBID`); unlike PBS Pro, Slurm writes them while the job runs. `-W group_list=GROUP`, in
  the script or on qsub's command line, becomes the job's account, accepted without checks.
  `OMP_NUM_THREADS` is 1 unless the environment sets it (PBS Pro takes `ompthreads`).

Faults: `up` on a cluster of the same nodes and link where a daemon died (a node's slurmd,
slurmctld, munged) starts only what died and keeps every job; a qstat or scontrol that fails (after
a few tries: jobs.query) is an error, never "the job is done".

Tests: `qsub(script, cwd)`, `wait_job(jobid)`, `job_info` (the output file: jobs.output_file).

The parts: the configuration it writes (cluster_config), its daemons and processes
(cluster_daemons), up / down / status (cluster_lifecycle), its jobs (cluster_jobs); this module is
the command, and the names the classroom and the tests read.
"""

import sys

from handson_lib.sites.cluster_config import (JUPYTER_PARTITION, JUPYTER_WALLTIME, SITE, ClusterError, Paths,
                                              applied_link, configured_queues, configured_site, partitions,
                                              paths, render_slurm_conf, slurm_time)
from handson_lib.sites.cluster_daemons import (cluster_processes, daemons, is_root, is_up, node_states, read_pid,
                                               scheduler_processes, slurm)
from handson_lib.sites.cluster_jobs import job_info, qsub, wait_job
from handson_lib.sites.cluster_lifecycle import down, status, up
from handson_lib.sites.table import LINKS, SITES

#: What the classroom and the tests read from here (the functions live in the parts above).
__all__ = ["JUPYTER_PARTITION", "JUPYTER_WALLTIME", "SITE", "ClusterError", "Paths", "applied_link",
           "cluster_processes", "configured_queues", "configured_site", "daemons", "down", "is_up", "job_info",
           "node_states", "partitions", "paths", "qsub", "read_pid", "render_slurm_conf", "scheduler_processes",
           "slurm", "slurm_time", "status", "up", "wait_job", "add_arguments", "main"]


def add_arguments(parser):
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--nodes", type=int, default=2, help="number of slurmd nodes (up)")
    parser.add_argument("--link", default="none", metavar="PROFILE",
                        help=f"up: the network between nodes, one of {', '.join(LINKS)}: a "
                             f"namespace per node, the link shaped to the profile's rate (default "
                             f"none: every node on this machine's loopback)")
    parser.add_argument("--site", default=None, metavar="SITE",
                        help=f"up: whose queues become the partitions, one of {', '.join(SITES)} "
                             f"(default: local, Reedbush-H's queues), to submit a job script for "
                             f"that site unchanged")


def main(args):
    action = getattr(args, "action", "status")
    try:
        if action == "up":
            return up(getattr(args, "nodes", 2) or 2, link=getattr(args, "link", "none") or "none",
                      site=getattr(args, "site", None))
        if action == "down":
            if not is_root():
                raise ClusterError("`handson cluster down` needs root (the daemons run as root)")
            return down()
        return status()
    except ClusterError as exc:
        print(f"handson cluster {action}: {exc}", file=sys.stderr)
        return 1
