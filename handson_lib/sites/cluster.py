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
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from handson_lib.launch import terminate_all, venv_bin
from handson_lib.sites import jobs, network
from handson_lib.sites.table import LINKS, SITES, LinkProfile, Site, format_walltime, get_link, get_site

#: Debian packages: controller, node daemon, client commands, PBS wrappers, authentication.
#: iproute2: `ip` and `tc` for the nodes' own network (`up --link`).
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "slurm-wlm-torque", "munge", "iproute2")
#: commands that must exist after the installation
COMMANDS = ("slurmctld", "slurmd", "sbatch", "sinfo", "squeue", "scontrol", "scancel", "qsub",
            "qstat", "qdel", "pbsnodes", "munged", "ip", "tc")
#: the file that Slurm's client commands (and so the PBS wrappers) read by default
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
CTLD_PORT = 6817
SLURMD_BASE_PORT = 6830  # node nX listens on SLURMD_BASE_PORT + X
#: environment variable that marks every daemon started here (found again by `down`)
MARK = "HANDSON_CLUSTER"
DAEMON_NAMES = ("slurmctld", "slurmd", "slurmstepd", "munged")
CLONE_NEWUTS = 0x04000000


#: The site this cluster stands for: its queues (Reedbush-H's) become the partitions.
SITE = get_site("local")


def slurm_time(seconds):
    """Slurm's `[D-]HH:MM:SS` for a walltime in seconds."""
    days, rest = divmod(int(seconds), 24 * 3600)
    return f"{days}-{format_walltime(rest)}" if days else format_walltime(rest)


def partitions(nodes, site: Site = None):
    """(queue, its node limit here): the site's limit, capped by the nodes this cluster has, so that
    qsub refuses at submission what could never start (Slurm would queue it forever)."""
    return [(q, min(q.max_nodes, nodes)) for q in (site or SITE).queues.values()]


def default_queue(site: Site = None):
    return next(iter((site or SITE).queues.values()))


def configured_queues(p: "Paths"):
    """The site queues in the written slurm.conf (its partitions, less the classroom's)."""
    try:
        text = p.conf.read_text()
    except OSError:
        return []
    return [name for name in re.findall(r"^PartitionName=(\S+)", text, flags=re.M) if name != JUPYTER_PARTITION]


def configured_site(p: "Paths"):
    """The site whose queues the written slurm.conf has (the `local` one before a site of the same
    queues), else SITE."""
    queues = configured_queues(p)
    return next((site for site in (SITE, *SITES.values()) if list(site.queues) == queues), SITE)


#: the partition where the classroom's notebook servers run as jobs (not a queue of the site table)
JUPYTER_PARTITION = "jupyter"
JUPYTER_WALLTIME = 12 * 3600

#: one Reedbush-H node: 2 x Intel Xeon E5-2695 v4 (18 cores), 256 GB; its 2 P100 are not declared.
NODE_RESOURCES = "CPUs=36 Boards=1 SocketsPerBoard=2 CoresPerSocket=18 ThreadsPerCore=1 RealMemory=245760"


class ClusterError(RuntimeError):
    """A step of `up` / `down` failed; the message says what to do."""


# ----------------------------------------------------------------------------- paths


@dataclass(frozen=True)
class Paths:
    root: Path

    @property
    def conf(self):
        return self.root / "slurm.conf"

    @property
    def plugstack(self):
        return self.root / "plugstack.conf"

    @property
    def task_prolog(self):
        return self.root / "task_prolog.sh"

    @property
    def task_epilog(self):
        return self.root / "task_epilog.sh"

    @property
    def job_submit(self):
        return self.root / "job_submit.lua"  # slurmctld looks next to slurm.conf

    @property
    def log(self):
        return self.root / "log"

    @property
    def munge(self):
        return self.root / "munge"

    @property
    def munge_key(self):
        return self.munge / "munge.key"

    @property
    def munge_socket(self):
        return self.munge / "munge.socket.2"

    @property
    def munge_pid(self):
        return self.munge / "munged.pid"

    @property
    def ctld_pid(self):
        return self.root / "slurmctld.pid"

    def slurmd_pid(self, node):
        return self.root / f"slurmd-{node}.pid"

    @property
    def jobcomp(self):
        return self.log / "jobcomp.log"

    @property
    def link(self):
        return self.root / jobs.link_state_file().name  # the link profile `up` applied (absent: none)


def paths() -> Paths:
    return Paths(jobs.state_dir())


def node_names(count):
    return [f"n{i}" for i in range(1, count + 1)]


def cluster_env(p: Paths | None = None, base=None):
    """Environment for Slurm commands and daemons of this cluster."""
    p = p or paths()
    env = dict(os.environ if base is None else base)
    env["SLURM_CONF"] = str(p.conf)
    env[MARK] = str(p.root)
    return env


def user_env(p: Paths | None = None, base=None):
    """Environment to submit jobs with (`qsub` / `sbatch`): this cluster's config, the venv first."""
    env = cluster_env(p, base)
    path = env.get("PATH", "")
    if not path.startswith(f"{venv_bin()}{os.pathsep}"):
        env["PATH"] = f"{venv_bin()}{os.pathsep}{path}"
    return env


# ----------------------------------------------------------------------------- installation


def spank_pbs_path():
    found = sorted(glob.glob("/usr/lib/*/slurm-wlm/spank_pbs.so") + glob.glob("/usr/lib*/slurm/spank_pbs.so"))
    return found[0] if found else None


def missing_commands():
    return [c for c in COMMANDS if not shutil.which(c)]


def is_root():
    return os.geteuid() == 0


FALLBACK = ("Without the scheduler, run a job script on this machine with its #PBS environment: "
            "`handson jobscript run FILE`.")


def ensure_installed(out=print):
    """Install the Debian packages when a command is missing; ClusterError says why it cannot."""
    missing = missing_commands()
    if not missing and spank_pbs_path():
        return False
    what = ", ".join(missing) or "spank_pbs.so"
    if not is_root():
        raise ClusterError(f"missing: {what}. `handson cluster` needs root (it installs Debian packages "
                           f"and starts system daemons); as root run `apt-get install -y "
                           f"--no-install-recommends {' '.join(PACKAGES)}` or `sudo handson cluster up`. "
                           + FALLBACK)
    if not shutil.which("apt-get"):
        raise ClusterError(f"missing: {what}, and no apt-get on this machine to install "
                           f"{' '.join(PACKAGES)}. " + FALLBACK)
    out(f"installing {' '.join(PACKAGES)} with apt-get (missing: {what}) ...")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]
    result = subprocess.run(install, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        out("apt-get install failed; running apt-get update first and trying again ...")
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, text=True)
        result = subprocess.run(install, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-8:])
        raise ClusterError(f"apt-get install {' '.join(PACKAGES)} failed:\n{tail}\n" + FALLBACK)
    still = missing_commands()
    if still or not spank_pbs_path():
        raise ClusterError(f"installed {' '.join(PACKAGES)} but still missing: "
                           f"{', '.join(still) or 'spank_pbs.so'}. " + FALLBACK)
    return True


# ----------------------------------------------------------------------------- configuration


def render_slurm_conf(p: Paths, nodes: int, link: LinkProfile = LINKS["none"], site: Site = None) -> str:
    names = node_names(nodes)
    node_list = f"n[1-{nodes}]" if nodes > 1 else "n1"
    shaped = link.rate_bps is not None
    # On a shaped cluster each slurmd lives in its node's namespace: it reaches the controller
    # through the bridge, and the controller reaches it at the node's own address.
    addresses = network.node_addresses(names) if shaped else dict.fromkeys(names, "127.0.0.1")
    lines = [
        "# Written by `handson cluster up` (handson_lib/sites/cluster.py) at every start: edits are lost.",
        "ClusterName=handson",
        f"SlurmctldHost=localhost({network.HOST_ADDRESS})" if shaped else "SlurmctldHost=localhost",
        f"SlurmctldPort={CTLD_PORT}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={p.munge_socket}",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={p.root}/slurmctld",
        f"SlurmdSpoolDir={p.root}/spool/%n",
        f"SlurmctldPidFile={p.ctld_pid}",
        f"SlurmdPidFile={p.root}/slurmd-%n.pid",
        f"SlurmctldLogFile={p.log}/slurmctld.log",
        f"SlurmdLogFile={p.log}/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        # No cgroups: the fake nodes share the machine's cores and the daemons run without systemd.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        # Nodes report the declared (Reedbush-like) resources, not this machine's.
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        # Limits are checked at submission: qsub/sbatch refuse a job that no queue limit allows.
        "EnforcePartLimits=ALL",
        # Killed at the walltime (slurmctld checks about every 30 s), SIGKILL 5 s after SIGTERM.
        "OverTimeLimit=0",
        "KillWait=5",
        # Finished jobs stay visible in qstat / scontrol for an hour.
        "MinJobAge=3600",
        "MessageTimeout=10",
        "SlurmdTimeout=300",
        "InactiveLimit=0",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={p.jobcomp}",
        f"PlugStackConfig={p.plugstack}",
        f"TaskProlog={p.task_prolog}",
        f"TaskEpilog={p.task_epilog}",
        # job_submit.lua (next to this file): output files named after the job, as PBS Pro does.
        "JobSubmitPlugins=lua",
        "",
    ]
    for i, name in enumerate(names, start=1):
        lines.append(f"NodeName={name} NodeHostname=localhost NodeAddr={addresses[name]} "
                     f"Port={SLURMD_BASE_PORT + i} {NODE_RESOURCES} State=UNKNOWN")
    lines.append("")
    for q, max_nodes in partitions(nodes, site):
        lines.append(f"PartitionName={q.name} Nodes={node_list} "
                     f"Default={'YES' if q is default_queue(site) else 'NO'} "
                     f"MaxTime={slurm_time(q.max_walltime)} DefaultTime={slurm_time(q.max_walltime)} "
                     f"MaxNodes={max_nodes} OverSubscribe=EXCLUSIVE State=UP")
    # Notebook servers of the classroom (`handson classroom up --spawner batch`): one CPU each,
    # many on a node, as a centre's interactive partition.
    lines.append(f"PartitionName={JUPYTER_PARTITION} Nodes={node_list} Default=NO "
                 f"MaxTime={slurm_time(JUPYTER_WALLTIME)} DefaultTime={slurm_time(JUPYTER_WALLTIME)} "
                 f"MaxNodes=1 OverSubscribe=FORCE:64 State=UP")
    return "\n".join(lines) + "\n"


def render_link_settings(link: LinkProfile) -> str:
    """TaskProlog lines of a shaped cluster: the link's name for the benchmarks' results, and Open
    MPI on TCP over the nodes' own interfaces between nodes, shared memory inside one."""
    if link.rate_bps is None:
        return ""
    return f"""# The link between nodes (`handson cluster up --link {link.name}`): recorded by the benchmarks.
echo "export {jobs.LINK_ENV}={link.name}"
echo "export {jobs.LINK_RATE_ENV}={link.rate_bps}"
# Between nodes TCP over each node's own interface (the shaped veth), inside a node shared memory;
# the runtime's daemons talk over the same subnet.
echo "export OMPI_MCA_btl=self,sm,tcp"
echo "export OMPI_MCA_btl_tcp_if_include={network.SUBNET}"
echo "export PRTE_MCA_oob_tcp_if_include={network.SUBNET}"
"""


def render_task_prolog(p: Paths, link: LinkProfile = LINKS["none"]) -> str:
    scontrol = shutil.which("scontrol") or "scontrol"
    return f"""#!/bin/sh
# TaskProlog of `handson cluster` (written at every `up`). slurmstepd runs it before each task with
# the task's environment; every `export NAME=VALUE` line it prints is set in the task.

# The course's virtual environment first: its python and its Open MPI mpiexec, not /usr/bin/mpiexec
# (from the Slurm/Torque wrappers).
echo "export PATH={venv_bin()}:$PATH"
# Fake nodes share this machine's cores: no process binding (it would fail or pile ranks up), and
# a rank that waits for a message yields its core instead of spinning (4 ranks spinning on 2 cores
# made an allreduce 10x slower).
echo "export OMPI_MCA_hwloc_base_binding_policy=none"
echo "export PRTE_MCA_hwloc_default_binding_policy=none"
echo "export OMPI_MCA_mpi_yield_when_idle=1"
echo "export OMP_NUM_THREADS=${{OMP_NUM_THREADS:-1}}"
echo "export PYTHONUNBUFFERED=1"
if [ "$(id -u)" = 0 ]; then
  echo "export OMPI_ALLOW_RUN_AS_ROOT=1"
  echo "export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
fi
{render_link_settings(link)}# PBS Pro's $PBS_NODEFILE: one line per MPI process (select x mpiprocs), in the batch step only.
if [ -z "${{SLURM_STEP_ID:-}}" ] || [ "${{SLURM_STEP_ID}}" = batch ] || [ "${{SLURM_STEP_ID}}" = 4294967291 ]; then
  if [ -n "${{SLURM_JOB_ID:-}}" ] && [ -n "${{SLURM_JOB_NODELIST:-}}" ]; then
    nodefile="${{TMPDIR:-/tmp}}/pbs_nodefile.${{SLURM_JOB_ID}}"
    {scontrol} show hostnames "$SLURM_JOB_NODELIST" | awk -v t="${{SLURM_TASKS_PER_NODE:-1}}" '
      BEGIN {{ n = split(t, a, ","); k = 0
              for (i = 1; i <= n; i++) {{ c = a[i]; r = 1
                if (match(c, /\\(x[0-9]+\\)/)) {{ r = substr(c, RSTART + 2, RLENGTH - 3) + 0; c = substr(c, 1, RSTART - 1) }}
                for (j = 0; j < r; j++) cnt[k++] = c + 0 }} }}
      {{ m = (NR - 1 in cnt) ? cnt[NR - 1] : 1; for (j = 0; j < m; j++) print }}' > "$nodefile" \\
      && echo "export PBS_NODEFILE=$nodefile"
  fi
fi
exit 0
"""


JOB_SUBMIT_LUA = """\
-- job_submit.lua of `handson cluster` (written at every `up`), run by slurmctld for each job.
-- PBS Pro names a job's output NAME.oJOBID after the job name (#PBS -N NAME); Slurm's Torque
-- wrapper qsub asks for SCRIPT.oJOBID, after the script's file name: rename it to the job's name.
-- `#PBS -W group_list=GROUP` in the script (which sbatch ignores) becomes the job's account, as
-- `qsub -W group_list=GROUP` on the command line does; there is no accounting: nothing is checked.
function slurm_job_submit(job_desc, part_list, submit_uid)
  if job_desc.account == nil and job_desc.script ~= nil then
    local group = string.match("\\n" .. job_desc.script, "\\n#PBS[ \\t]+%-W[ \\t]*group_list=([%w_.-]+)")
    if group ~= nil then
      job_desc.account = group
    end
  end
  local name = job_desc.name
  if name ~= nil and name ~= "" then
    for _, field in ipairs({"std_out", "std_err"}) do
      local path = job_desc[field]
      if path ~= nil then
        local dir, base, kind = string.match(path, "^(.-)([^/]+)%.([oe])%%A$")
        if base ~= nil and base ~= name then
          job_desc[field] = dir .. name .. "." .. kind .. "%A"
        end
      end
    end
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
"""


def render_task_epilog(p: Paths) -> str:
    return """#!/bin/sh
# TaskEpilog of `handson cluster`: remove the batch step's PBS_NODEFILE.
if [ -z "${SLURM_STEP_ID:-}" ] || [ "${SLURM_STEP_ID}" = batch ] || [ "${SLURM_STEP_ID}" = 4294967291 ]; then
  rm -f "${TMPDIR:-/tmp}/pbs_nodefile.${SLURM_JOB_ID:-none}"
fi
exit 0
"""


def write_config(p: Paths, nodes: int, link: LinkProfile = LINKS["none"], site: Site = None):
    p.root.mkdir(parents=True, exist_ok=True)
    os.chmod(p.root, 0o755)
    for sub in (p.log, p.munge, p.root / "slurmctld", p.root / "spool"):
        sub.mkdir(parents=True, exist_ok=True)
    os.chmod(p.munge, 0o700)
    if not p.munge_key.exists():
        p.munge_key.write_bytes(secrets.token_bytes(1024))
    os.chmod(p.munge_key, 0o400)
    spank = spank_pbs_path()
    p.plugstack.write_text(f"# PBS_O_WORKDIR, PBS_JOBID, PBS_O_HOST ... in every job (handson cluster)\n"
                           f"required {spank}\n")
    p.conf.write_text(render_slurm_conf(p, nodes, link, site))
    p.job_submit.write_text(JOB_SUBMIT_LUA)
    for path, text in ((p.task_prolog, render_task_prolog(p, link)), (p.task_epilog, render_task_epilog(p))):
        path.write_text(text)
        os.chmod(path, 0o755)
    link_system_conf(p)


def link_system_conf(p: Paths):
    """Point /etc/slurm/slurm.conf at this cluster's file so that plain `qsub` finds it."""
    try:
        if SYSTEM_CONF.is_symlink():
            if Path(os.readlink(SYSTEM_CONF)) == p.conf:
                return True
            SYSTEM_CONF.unlink()
        elif SYSTEM_CONF.exists():
            return False  # a site's own configuration: leave it, SLURM_CONF is needed
        SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
        SYSTEM_CONF.symlink_to(p.conf)
        return True
    except OSError:
        return False


def unlink_system_conf(p: Paths):
    try:
        if SYSTEM_CONF.is_symlink() and Path(os.readlink(SYSTEM_CONF)) == p.conf:
            SYSTEM_CONF.unlink()
    except OSError:
        pass


def configured_nodes(p: Paths):
    """Node names in the written slurm.conf (empty when there is none)."""
    try:
        text = p.conf.read_text()
    except OSError:
        return []
    return re.findall(r"^NodeName=(\S+)", text, flags=re.M)


# ----------------------------------------------------------------------------- processes


def _psutil():
    import psutil
    return psutil


def read_pid(path: Path):
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def pid_alive(pid, name=None):
    """Whether `pid` runs (and, with `name`, is that program: a stale pid file may point elsewhere)."""
    if not pid:
        return False
    psutil = _psutil()
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return name is None or proc.name().startswith(name)
    except psutil.Error:
        return False


def daemons(p: Paths, nodes=None):
    """{label: (program, pid or None, alive)} for munged, slurmctld and each slurmd."""
    nodes = configured_nodes(p) if nodes is None else nodes
    table = {"munged": ("munged", read_pid(p.munge_pid)), "slurmctld": ("slurmctld", read_pid(p.ctld_pid))}
    for node in nodes:
        table[f"slurmd -N {node}"] = ("slurmd", read_pid(p.slurmd_pid(node)))
    return {label: (prog, pid, pid_alive(pid, prog)) for label, (prog, pid) in table.items()}


def cluster_processes(p: Paths | None = None):
    """Every process that `up` started or that descends from one: daemons, job steps, job tasks."""
    psutil = _psutil()
    p = p or paths()
    found = {}
    for proc in psutil.process_iter(["name", "pid"]):
        try:
            name = proc.info["name"] or ""
            mine = False
            if name.startswith(DAEMON_NAMES):
                try:
                    mine = proc.environ().get(MARK) == str(p.root)
                except psutil.Error:
                    mine = False
                if not mine:
                    cmdline = " ".join(proc.cmdline())
                    mine = str(p.root) in cmdline or name == "slurmstepd"
            if mine:
                found[proc.pid] = proc
                for child in proc.children(recursive=True):
                    found[child.pid] = child
        except psutil.Error:
            continue
    return list(found.values())


def scheduler_processes():
    """Any slurm or munge process on this machine, ours or not (what `down` must leave: none)."""
    psutil = _psutil()
    left = []
    for proc in psutil.process_iter(["name"]):
        name = proc.info["name"] or ""
        if name.startswith(("slurm", "munge", "srun")):
            try:
                if proc.status() != psutil.STATUS_ZOMBIE:
                    left.append(proc)
            except psutil.Error:
                pass
    return left


def _set_hostname_in_new_uts(name):
    libc = ctypes.CDLL(None, use_errno=True)

    def preexec():
        if libc.unshare(CLONE_NEWUTS) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUTS)")
        socket.sethostname(name)
    return preexec


def _node_preexec(node, own_hostname, shaped):
    """Before slurmd -N node starts: into the node's network namespace (shaped link) and a UTS
    namespace of its own name; None when neither applies."""
    steps = ([network.enter(node)] if shaped else []) + \
        ([_set_hostname_in_new_uts(node)] if own_hostname else [])
    if not steps:
        return None

    def preexec():
        for step in steps:
            step()
    return preexec


def uts_namespaces_work():
    try:
        subprocess.run(["true"], preexec_fn=_set_hostname_in_new_uts("probe"), check=True, timeout=10)
        return True
    except (subprocess.SubprocessError, OSError):
        return False


def _run_daemon(cmd, p: Paths, log_name, preexec_fn=None, timeout=30):
    """Start a self-daemonising program; its early output goes to log/<log_name>.out."""
    with open(p.log / f"{log_name}.out", "ab") as out:
        result = subprocess.run(cmd, env=cluster_env(p), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, preexec_fn=preexec_fn, timeout=timeout,
                                start_new_session=True, cwd=p.root)
    if result.returncode != 0:
        tail = _tail(p.log / f"{log_name}.out")
        raise ClusterError(f"`{' '.join(map(str, cmd))}` failed (exit {result.returncode}):\n{tail}")


def _tail(path, lines=10):
    try:
        return "\n".join(Path(path).read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def _wait_for(check, timeout, interval=0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def slurm(cmd, p: Paths | None = None, timeout=30, check=False):
    """Run a Slurm/PBS client command against this cluster; CompletedProcess (text)."""
    return subprocess.run(cmd, env=cluster_env(p or paths()), capture_output=True, text=True,
                          timeout=timeout, check=check)


def ctld_alive(p: Paths | None = None):
    return pid_alive(read_pid((p or paths()).ctld_pid), "slurmctld")


def node_states(p: Paths | None = None):
    """{node: state} from sinfo (e.g. 'idle', 'alloc', 'down*'); {} when slurmctld does not answer."""
    if not ctld_alive(p):
        return {}  # sinfo would retry for about 10 s
    try:
        result = slurm(["sinfo", "-h", "-N", "-o", "%N %t"], p, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if result.returncode != 0:
        return {}
    states = {}
    for line in result.stdout.split("\n"):
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states




def wait_until_ready(p: Paths, nodes, timeout=60):
    deadline = time.monotonic() + timeout
    resumed = False
    while True:
        states = node_states(p)
        if states and all(states.get(n, "").rstrip("*~#!%$@^-") in jobs.USABLE_NODE_STATES
                          and not states[n].endswith("*")
                          for n in nodes):
            return states
        if time.monotonic() > deadline:
            raise ClusterError(f"the nodes did not become idle within {timeout} s (sinfo: {states or 'no answer'}); "
                               f"see the logs in {p.log}")
        if not resumed and states and any(states.get(n, "").startswith(("down", "drain")) for n in nodes):
            slurm(["scontrol", "update", f"NodeName={','.join(nodes)}", "State=RESUME"], p)
            resumed = True
        time.sleep(0.5)


# ----------------------------------------------------------------------------- up / down


def is_up(p: Paths | None = None, nodes=None):
    p = p or paths()
    table = daemons(p, nodes)
    return bool(table) and all(alive for _, _, alive in table.values()) and len(table) > 2


def start_munged(p: Paths):
    if pid_alive(read_pid(p.munge_pid), "munged"):
        return
    cmd = [shutil.which("munged"), "--force", f"--key-file={p.munge_key}", f"--socket={p.munge_socket}",
           f"--pid-file={p.munge_pid}", f"--log-file={p.log}/munged.log", f"--seed-file={p.munge}/munged.seed"]
    _run_daemon(cmd, p, "munged")
    if not _wait_for(lambda: p.munge_socket.exists() and pid_alive(read_pid(p.munge_pid), "munged"), 10):
        raise ClusterError(f"munged did not start:\n{_tail(p.log / 'munged.log')}")


def start_slurmctld(p: Paths):
    if pid_alive(read_pid(p.ctld_pid), "slurmctld"):
        return
    _run_daemon([shutil.which("slurmctld"), "-f", str(p.conf)], p, "slurmctld")

    def answers():
        try:
            return slurm(["scontrol", "ping"], p, timeout=10).stdout.count("UP") > 0
        except subprocess.TimeoutExpired:
            return False
    if not _wait_for(answers, 20, 0.3):
        raise ClusterError(f"slurmctld does not answer:\n{_tail(p.log / 'slurmctld.log')}")


def start_slurmd(p: Paths, node, own_hostname, shaped=False):
    if pid_alive(read_pid(p.slurmd_pid(node)), "slurmd"):
        return
    (p.root / "spool" / node).mkdir(parents=True, exist_ok=True)
    preexec = _node_preexec(node, own_hostname, shaped)
    _run_daemon([shutil.which("slurmd"), "-N", node, "-f", str(p.conf)], p, f"slurmd-{node}",
                preexec_fn=preexec)
    if not _wait_for(lambda: pid_alive(read_pid(p.slurmd_pid(node)), "slurmd"), 10):
        raise ClusterError(f"slurmd -N {node} did not start:\n{_tail(p.log / f'slurmd-{node}.log')}")


def applied_link(p: Paths) -> LinkProfile:
    """The link profile the running cluster was brought up with (none without a record)."""
    state = network.load_state(p.link)
    return LINKS.get((state or {}).get("profile", {}).get("name"), LINKS["none"])


def _link_profile(name):
    try:
        return get_link(name)
    except ValueError as err:
        raise ClusterError(str(err)) from None


def _check_link_support(profile):
    problem = network.support_problem()
    if problem:
        raise ClusterError(f"--link {profile.name}: {problem}. The cluster runs without a network "
                           f"of its own too: `handson cluster up --link none` (every node on this "
                           f"machine's loopback, ranks share memory across nodes).")


def _record_link(p: Paths, names, profile):
    if profile.rate_bps is None:
        p.link.unlink(missing_ok=True)
    else:
        network.save_state(p.link, names, profile)


def up(nodes=2, link="none", out=print, site=None):
    """Install if needed, (re)write the configuration, start what is not running, wait for idle
    nodes. `link`: a profile of LINKS; other than 'none', every node gets a network
    namespace and a link shaped to the profile's rate. `site`: the site of the table whose queues
    become the partitions (default: `local`, Reedbush-H's queues).

    A cluster of the same nodes and link that is partly down (the slurmd of a node, slurmctld or
    munged died) is mended: only the daemons that stopped start again, and its jobs go on (a job's
    steps outlive their slurmd, slurmctld reads the jobs back from its saved state), the students'
    notebook servers of the batch spawner among them (a job that started in the last 5 s or so
    before slurmctld died is not yet in that state: Slurm queues it again). Only another node count
    or link restarts the whole cluster, which cancels every job."""
    if nodes < 1:
        raise ClusterError("--nodes must be at least 1")
    profile = _link_profile(link)
    try:
        site = get_site(site) if site else SITE
    except ValueError as exc:
        raise ClusterError(str(exc)) from None
    shaped = profile.rate_bps is not None
    if not is_root():
        raise ClusterError("`handson cluster up` needs root: it installs Debian packages and starts "
                           "munged, slurmctld and slurmd"
                           + (", and --link makes network namespaces. " if shaped else ". ") + FALLBACK)
    ensure_installed(out)
    if shaped:
        _check_link_support(profile)
    p = paths()
    names = node_names(nodes)
    same = (configured_nodes(p) == names and (applied_link(p).rate_bps is None) == (not shaped)
            and configured_queues(p) == list(site.queues))
    alive = any(running for _, _, running in daemons(p).values())
    if same and (alive or _job_steps(p)):
        return _mend(p, names, profile, out, site)
    if alive or cluster_processes(p) or network.existing_namespaces():
        if same:
            out("clearing what is left of the last cluster (no daemon of it runs) ...")
        else:
            ids = _job_ids(p)
            out("restarting the cluster: the node count, the link or the site's queues changed"
                + (f"; this cancels {len(ids)} job(s): {' '.join(ids)}" if ids else "") + " ...")
        down(out=lambda *a: None)
    for port in [CTLD_PORT] + [SLURMD_BASE_PORT + i for i in range(1, nodes + 1)]:
        if not _port_free(port):
            raise ClusterError(f"TCP port {port} is in use (another Slurm?): stop it first, "
                               f"or run `handson cluster down`")
    write_config(p, nodes, profile, site)
    own_hostname = uts_namespaces_work()
    started = time.monotonic()
    if shaped:
        network.create(names, profile)
    _record_link(p, names, profile)
    start_munged(p)
    start_slurmctld(p)
    # Jobs saved as queued or running when the cluster last stopped (a crash, a reboot): no daemon
    # and no job step of the cluster ran, so their processes are gone. Cancel them before the nodes
    # come back, so that none starts half-way.
    left = _job_ids(p)
    if left:
        slurm(["scancel", *left], p)
        out(f"cancelled {len(left)} job(s) left from before the restart: {' '.join(left)}")
    for node in names:
        start_slurmd(p, node, own_hostname, shaped)
    wait_until_ready(p, names)
    out(f"cluster up in {time.monotonic() - started:.1f} s: munged, slurmctld, {nodes} x slurmd "
        f"(state and logs in {p.root})")
    if not own_hostname:
        out("note: no UTS namespaces here, so every node has this machine's host name; ChainerMN "
            "then sees one node (intra_rank counts all ranks)")
    print_summary(p, names, out, site)
    return 0


def _mend(p: Paths, names, profile, out=print, site=None):
    """`up` on a cluster of the same nodes and link where something runs: start the daemons that
    stopped, keep every job; with all of them running, refresh the configuration (a moved venv, a
    new rate of the same kind of link)."""
    shaped = profile.rate_bps is not None
    before = applied_link(p)
    dead = [label for label, (_, _, alive) in daemons(p, names).items() if not alive]
    ports = {"slurmctld": CTLD_PORT}
    if not shaped:  # a shaped node's slurmd listens in its own network namespace
        ports.update({f"slurmd -N {n}": SLURMD_BASE_PORT + i for i, n in enumerate(names, start=1)})
    for label in dead:
        if label in ports and not _port_free(ports[label]):
            raise ClusterError(f"{label} is not running but TCP port {ports[label]} is in use (another "
                               f"Slurm, or a {label} without its pid file?): stop it, or run "
                               f"`handson cluster down` (this cancels every job) and `up` again")
    write_config(p, len(names), profile, site)  # refreshes the prolog after a venv move or a new rate
    if shaped:
        network.create(names, profile)  # what exists is kept; the rate is set again
    _record_link(p, names, profile)
    started = time.monotonic()
    # munged first: the other daemons authenticate every message with it.
    start_munged(p)
    start_slurmctld(p)
    own_hostname = uts_namespaces_work() if any(d.startswith("slurmd") for d in dead) else False
    for node in names:
        start_slurmd(p, node, own_hostname, shaped)
    if "slurmctld" not in dead:
        slurm(["scontrol", "reconfigure"], p)  # a restarted slurmctld has read the new file
    wait_until_ready(p, names)
    changed = f"; link changed from {before.name} to {profile.name}" if before != profile else ""
    if dead:
        kept = _job_ids(p)
        out(f"the cluster was partly down: restarted {', '.join(dead)} in "
            f"{time.monotonic() - started:.1f} s{changed}; "
            + (f"{len(kept)} job(s) kept: {' '.join(kept)}" if kept else "no job to keep")
            + f" (logs in {p.log})")
    else:
        out(f"the cluster is already up ({len(names)} nodes){changed}")
    print_summary(p, names, out, site)
    return 0


def _job_ids(p: Paths):
    """The ids of the jobs slurmctld knows as queued or running; [] when it does not answer."""
    try:
        result = slurm(["squeue", "-h", "-o", "%i"], p, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return result.stdout.split() if result.returncode == 0 else []


def _job_steps(p: Paths):
    """The job steps (slurmstepd) of this cluster still running: jobs that outlived their daemons."""
    psutil = _psutil()
    steps = []
    for proc in cluster_processes(p):
        try:
            if proc.name() == "slurmstepd":
                steps.append(proc)
        except psutil.Error:
            continue
    return steps


def _port_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def print_summary(p: Paths, names, out=print, site=None):
    site = site or configured_site(p)
    out(f"queues of {site.title} (EnforcePartLimits=ALL: qsub refuses what a queue does not allow):")
    for q, max_nodes in partitions(len(names), site):
        capped = f" (the queue allows {q.max_nodes})" if max_nodes < q.max_nodes else ""
        out(f"  {q.name:<10s} max walltime {slurm_time(q.max_walltime):>11s}  max nodes {max_nodes:>3d}"
            f"{capped}{'  (default)' if q is default_queue(site) else ''}")
    out(f"nodes: {', '.join(names)} (each declares {NODE_RESOURCES.split()[0]}, whole nodes per job; "
        f"no GPUs: the CPU stand-in replaces them)")
    out(link_summary(p, names))
    if SYSTEM_CONF.is_symlink() and Path(os.readlink(SYSTEM_CONF)) == p.conf:
        out(f"submit from any shell: `qsub -j oe run.sh`, `qstat`, `qdel ID`, `pbsnodes -a` "
            f"({SYSTEM_CONF} -> {p.conf})")
    else:
        out(f"{SYSTEM_CONF} belongs to another configuration: first run\n  export SLURM_CONF={p.conf}")
    out(f"jobs get {venv_bin()} first on PATH, PBS_NODEFILE and Open MPI's settings from {p.task_prolog};"
        f" in your own shell: export PATH={venv_bin()}:$PATH")


def link_summary(p: Paths, names):
    """The link line of `up` and `status`: the profile, and the rates tc really applies."""
    profile = applied_link(p)
    if profile.rate_bps is None:
        return (f"link: none ({profile.title}); `handson cluster up --link 1gbe` gives each node a "
                f"network of its own (profiles: {', '.join(LINKS)})")
    lines = [f"link: {profile.name} = {profile.title}, {profile.rate_text} each way per node "
             f"(tbf on both ends of each node's veth; bridge {network.BRIDGE} {network.HOST_ADDRESS}); "
             f"jobs run Open MPI over TCP between nodes, shared memory inside one"]
    for node, address in network.node_addresses(names).items():
        rates = network.qdisc_rates(node)
        sent, received = network.interface_bytes(node) if rates else (0, 0)
        shown = ", ".join(f"{dev} {rate}" for dev, rate in rates.items()) or "NOT SHAPED"
        lines.append(f"  {node}: {address} in namespace {network.namespace(node)}; tc: {shown}; "
                     f"{sent:,} bytes sent, {received:,} received")
    return "\n".join(lines)


def down(out=print, timeout=20):
    """Stop every process `up` started (jobs first), then verify that none is left."""
    p = paths()
    psutil = _psutil()
    if node_states(p):
        slurm(["scancel", "--full", "--state=RUNNING"], p, timeout=10)
        slurm(["scancel", "--state=PENDING"], p, timeout=10)
    procs = cluster_processes(p)
    # Daemons first (they would restart steps), then the job steps and their tasks.
    order = {"slurmctld": 0, "slurmd": 1, "slurmstepd": 2, "munged": 4}

    def rank(proc):
        try:
            return order.get(proc.name(), 3)
        except psutil.Error:
            return 5
    procs.sort(key=rank)
    terminate_all(procs, timeout)
    left = [proc for proc in cluster_processes(p) if proc.is_running()]
    for path in [p.munge_pid, p.ctld_pid] + [p.slurmd_pid(n) for n in configured_nodes(p)]:
        try:
            path.unlink()
        except OSError:
            pass
    unlink_system_conf(p)
    # The network goes even when a process is stuck: a leftover must not keep namespaces around.
    removed = network.remove() if not network.missing_tools() else []
    p.link.unlink(missing_ok=True)
    if left:
        raise ClusterError("still running after down: " + ", ".join(f"{x.pid} {x.name()}" for x in left)
                           + (f" (network removed: {', '.join(removed)})" if removed else ""))
    out(f"cluster down: {len(procs)} process(es) stopped"
        + (f"; removed {', '.join(removed)}" if removed else "")
        + f"; packages and {p.root} kept")
    return 0


# ----------------------------------------------------------------------------- status


def status(out=print):
    p = paths()
    table = daemons(p)
    if not table or not p.conf.exists():
        out(f"cluster down: no configuration in {p.root} (run `handson cluster up`)")
        return 1
    out("daemons:")
    for label, (_, pid, alive) in table.items():
        out(f"  {label:<14s} {'up (pid %d)' % pid if alive else 'down'}")
    states = node_states(p)
    running = all(alive for _, _, alive in table.values()) and bool(states)
    if states:
        out("nodes:")
        out(_indent(slurm(["sinfo", "-N", "-o", "%10N %10P %8t %5c %10m %E"], p).stdout))
        out("queues:")
        out(_indent(slurm(["sinfo", "-o", "%10P %6a %12l %8s %6D %8t %N"], p).stdout))
        qstat = slurm(["qstat"], p)
        listed = qstat.stdout.strip()
        out("jobs (qstat):")
        if qstat.returncode not in (0, jobs.QSTAT_UNKNOWN_EXIT):  # 153: no job at all
            out(f"  qstat failed (exit {qstat.returncode}): {qstat.stderr.strip() or 'no output'}")
        else:
            out(_indent(listed) if listed else "  none")
    else:
        out("slurmctld does not answer")
    if running:
        out(link_summary(p, configured_nodes(p)))
        out(f"cluster up ({len(states)} nodes); logs in {p.log}")
        return 0
    if not any(alive for _, _, alive in table.values()):
        out("cluster down: run `handson cluster up`")
    else:
        out("cluster partly down: run `handson cluster up` (it restarts the daemons that stopped "
            "and keeps the jobs)")
    return 1


def _indent(text, prefix="  "):
    return "\n".join(prefix + line for line in text.rstrip().split("\n"))


# ----------------------------------------------------------------------------- jobs (notebooks, tests)


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
                            lambda cmd, timeout: slurm(cmd, timeout=timeout),
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


# ----------------------------------------------------------------------------- CLI


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
