"""The local cluster's configuration: its paths, the site whose queues become its partitions, and
the files `handson cluster up` writes (slurm.conf, the TaskProlog/Epilog, job_submit.lua, munge's
key), rendered from the site table and the link profile.
"""

from __future__ import annotations

import glob
import os
import re
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from handson_lib.launch import venv_bin
from handson_lib.sites import jobs, network
from handson_lib.sites.table import LINKS, SITES, LinkProfile, Site, format_walltime, get_site

#: the file that Slurm's client commands (and so the PBS wrappers) read by default
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
#: The `qsub` a shell finds first (before /usr/bin/qsub, Slurm's Torque wrapper): see QSUB_SHIM.
SYSTEM_QSUB = Path("/usr/local/bin/qsub")
TORQUE_QSUB = "/usr/bin/qsub"
CTLD_PORT = 6817
SLURMD_BASE_PORT = 6830  # node nX listens on SLURMD_BASE_PORT + X


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


def spank_pbs_path():
    found = sorted(glob.glob("/usr/lib/*/slurm-wlm/spank_pbs.so") + glob.glob("/usr/lib*/slurm/spank_pbs.so"))
    return found[0] if found else None


# ----------------------------------------------------------------------------- configuration


def _cluster_settings(p: Paths, shaped: bool) -> list:
    """slurm.conf's lines above the nodes: the daemons, their files, the scheduler's rules."""
    return [
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


def render_slurm_conf(p: Paths, nodes: int, link: LinkProfile = LINKS["none"], site: Site = None) -> str:
    names = node_names(nodes)
    node_list = f"n[1-{nodes}]" if nodes > 1 else "n1"
    shaped = link.rate_bps is not None
    # On a shaped cluster each slurmd lives in its node's namespace: it reaches the controller
    # through the bridge, and the controller reaches it at the node's own address.
    addresses = network.node_addresses(names) if shaped else dict.fromkeys(names, "127.0.0.1")
    lines = _cluster_settings(p, shaped)
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
    install_qsub_shim()


#: The first line of the qsub this cluster installs (how `down` and the next `up` know it is ours).
QSUB_SHIM_MARK = "# qsub of `handson cluster`"


def render_qsub_shim(torque=TORQUE_QSUB):
    """Slurm's Torque wrapper with PBS Pro's project option: sbatch reads a script's #PBS lines and
    knows no `-P`, so ABCI 3.0's group line `#PBS -P GROUP` is handed over as `#PBS -A GROUP` (an
    account: there is no accounting here, nothing is checked), in a copy of the script of the same
    name (the job's name and its output file follow the name)."""
    return f"""#!/bin/bash
{QSUB_SHIM_MARK} (written at every `up`, removed at `down`): {torque}, with ABCI 3.0's
# `#PBS -P GROUP` handed over as `#PBS -A GROUP` (sbatch's #PBS reader knows no -P).
script=${{@: -1}}
if [ $# -gt 0 ] && [ -f "$script" ] && grep -Eq '^#PBS[[:space:]]+-P[[:space:]]' "$script"; then
  copy=$(mktemp -d /tmp/handson-qsub-XXXXXX) || exit 1
  trap 'rm -rf "$copy"' EXIT
  sed -E 's/^#PBS([[:space:]]+)-P([[:space:]])/#PBS\\1-A\\2/' "$script" > "$copy/${{script##*/}}"
  {torque} "${{@:1:$#-1}}" "$copy/${{script##*/}}"
  exit $?
fi
exec {torque} "$@"
"""


def install_qsub_shim():
    """Put this cluster's qsub first on PATH, unless a qsub of someone else's is there."""
    try:
        if SYSTEM_QSUB.exists() and QSUB_SHIM_MARK not in SYSTEM_QSUB.read_text(errors="replace"):
            return False
        SYSTEM_QSUB.parent.mkdir(parents=True, exist_ok=True)
        SYSTEM_QSUB.write_text(render_qsub_shim())
        os.chmod(SYSTEM_QSUB, 0o755)
        return True
    except OSError:
        return False


def remove_qsub_shim():
    try:
        if QSUB_SHIM_MARK in SYSTEM_QSUB.read_text(errors="replace"):
            SYSTEM_QSUB.unlink()
    except OSError:
        pass


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


def applied_link(p: Paths) -> LinkProfile:
    """The link profile the running cluster was brought up with (none without a record)."""
    state = network.load_state(p.link)
    return LINKS.get((state or {}).get("profile", {}).get("name"), LINKS["none"])
