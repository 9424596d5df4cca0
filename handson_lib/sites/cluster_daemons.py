"""The local cluster's processes: installing Slurm and munge, starting the daemons (each slurmd
in its node's namespaces), finding them and their job steps again, and asking Slurm (`slurm`).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from handson_lib import settings
from handson_lib.launch import venv_bin
from handson_lib.sites import jobs, network
from handson_lib.sites.cluster_config import ClusterError, Paths, configured_nodes, paths, spank_pbs_path

#: Debian packages: controller, node daemon, client commands, PBS wrappers, authentication.
#: iproute2: `ip` and `tc` for the nodes' own network (`up --link`).
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "slurm-wlm-torque", "munge", "iproute2")
#: commands that must exist after the installation
COMMANDS = ("slurmctld", "slurmd", "sbatch", "sinfo", "squeue", "scontrol", "scancel", "qsub",
            "qstat", "qdel", "pbsnodes", "munged", "ip", "tc")
#: environment variable that marks every daemon started here (found again by `down`)
MARK = settings.variable("cluster_mark")
DAEMON_NAMES = ("slurmctld", "slurmd", "slurmstepd", "munged")
CLONE_NEWUTS = 0x04000000


def cluster_env(p: Paths | None = None, base=None):
    """Environment for Slurm commands and daemons of this cluster."""
    p = p or paths()
    return settings.child_env(base, changes={"cluster_mark": str(p.root)}, SLURM_CONF=str(p.conf))


def user_env(p: Paths | None = None, base=None):
    """Environment to submit jobs with (`qsub` / `sbatch`): this cluster's config, the venv first."""
    env = cluster_env(p, base)
    path = env.get("PATH", "")
    if not path.startswith(f"{venv_bin()}{os.pathsep}"):
        env["PATH"] = f"{venv_bin()}{os.pathsep}{path}"
    return env


# ----------------------------------------------------------------------------- installation


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


def run_daemon(cmd, p: Paths, log_name, preexec_fn=None, timeout=30):
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


def is_up(p: Paths | None = None, nodes=None):
    p = p or paths()
    table = daemons(p, nodes)
    return bool(table) and all(alive for _, _, alive in table.values()) and len(table) > 2


def start_munged(p: Paths):
    if pid_alive(read_pid(p.munge_pid), "munged"):
        return
    cmd = [shutil.which("munged"), "--force", f"--key-file={p.munge_key}", f"--socket={p.munge_socket}",
           f"--pid-file={p.munge_pid}", f"--log-file={p.log}/munged.log", f"--seed-file={p.munge}/munged.seed"]
    run_daemon(cmd, p, "munged")
    if not _wait_for(lambda: p.munge_socket.exists() and pid_alive(read_pid(p.munge_pid), "munged"), 10):
        raise ClusterError(f"munged did not start:\n{_tail(p.log / 'munged.log')}")


def start_slurmctld(p: Paths):
    if pid_alive(read_pid(p.ctld_pid), "slurmctld"):
        return
    run_daemon([shutil.which("slurmctld"), "-f", str(p.conf)], p, "slurmctld")

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
    run_daemon([shutil.which("slurmd"), "-N", node, "-f", str(p.conf)], p, f"slurmd-{node}",
                preexec_fn=preexec)
    if not _wait_for(lambda: pid_alive(read_pid(p.slurmd_pid(node)), "slurmd"), 10):
        raise ClusterError(f"slurmd -N {node} did not start:\n{_tail(p.log / f'slurmd-{node}.log')}")


def job_ids(p: Paths):
    """The ids of the jobs slurmctld knows as queued or running; [] when it does not answer."""
    try:
        result = slurm(["squeue", "-h", "-o", "%i"], p, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return result.stdout.split() if result.returncode == 0 else []


def job_steps(p: Paths):
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


def port_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False
