"""`handson cluster up|down|status`: bring the local cluster up (or mend one that is partly down),
take it down, and say how it stands.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from handson_lib.launch import terminate_all, venv_bin
from handson_lib.sites import cluster_config, cluster_daemons, jobs, network
from handson_lib.sites.cluster_config import (CTLD_PORT, NODE_RESOURCES, SITE, SLURMD_BASE_PORT, SYSTEM_CONF,
                                              ClusterError, Paths, applied_link, configured_nodes,
                                              configured_queues, configured_site, default_queue, node_names,
                                              partitions, paths, remove_qsub_shim, slurm_time,
                                              unlink_system_conf)
from handson_lib.sites.cluster_daemons import FALLBACK
from handson_lib.sites.table import LINKS, get_link, get_site


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
    profile, site = _prepare(nodes, link, site, out)
    shaped = profile.rate_bps is not None
    p = paths()
    names = node_names(nodes)
    same = (configured_nodes(p) == names and (applied_link(p).rate_bps is None) == (not shaped)
            and configured_queues(p) == list(site.queues))
    alive = any(running for _, _, running in cluster_daemons.daemons(p).values())
    if same and (alive or cluster_daemons.job_steps(p)):
        return _mend(p, names, profile, out, site)
    if alive or cluster_daemons.cluster_processes(p) or network.existing_namespaces():
        if same:
            out("clearing what is left of the last cluster (no daemon of it runs) ...")
        else:
            ids = cluster_daemons.job_ids(p)
            out("restarting the cluster: the node count, the link or the site's queues changed"
                + (f"; this cancels {len(ids)} job(s): {' '.join(ids)}" if ids else "") + " ...")
        down(out=lambda *a: None)
    return _start(p, names, profile, out, site)


def _prepare(nodes, link, site, out):
    """`up`'s arguments checked, root, the packages installed: (link profile, site)."""
    if nodes < 1:
        raise ClusterError("--nodes must be at least 1")
    profile = _link_profile(link)
    try:
        site = get_site(site) if site else SITE
    except ValueError as exc:
        raise ClusterError(str(exc)) from None
    shaped = profile.rate_bps is not None
    if not cluster_daemons.is_root():
        raise ClusterError("`handson cluster up` needs root: it installs Debian packages and starts "
                           "munged, slurmctld and slurmd"
                           + (", and --link makes network namespaces. " if shaped else ". ") + FALLBACK)
    cluster_daemons.ensure_installed(out)
    if shaped:
        _check_link_support(profile)
    return profile, site


def _start(p: Paths, names, profile, out=print, site=None):
    """`up` where nothing of a cluster runs: write the configuration, start every daemon."""
    shaped = profile.rate_bps is not None
    for port in [CTLD_PORT] + [SLURMD_BASE_PORT + i for i in range(1, len(names) + 1)]:
        if not cluster_daemons.port_free(port):
            raise ClusterError(f"TCP port {port} is in use (another Slurm?): stop it first, "
                               f"or run `handson cluster down`")
    cluster_config.write_config(p, len(names), profile, site)
    own_hostname = cluster_daemons.uts_namespaces_work()
    started = time.monotonic()
    if shaped:
        network.create(names, profile)
    _record_link(p, names, profile)
    cluster_daemons.start_munged(p)
    cluster_daemons.start_slurmctld(p)
    # Jobs saved as queued or running when the cluster last stopped (a crash, a reboot): no daemon
    # and no job step of the cluster ran, so their processes are gone. Cancel them before the nodes
    # come back, so that none starts half-way.
    left = cluster_daemons.job_ids(p)
    if left:
        cluster_daemons.slurm(["scancel", *left], p)
        out(f"cancelled {len(left)} job(s) left from before the restart: {' '.join(left)}")
    for node in names:
        cluster_daemons.start_slurmd(p, node, own_hostname, shaped)
    cluster_daemons.wait_until_ready(p, names)
    out(f"cluster up in {time.monotonic() - started:.1f} s: munged, slurmctld, {len(names)} x slurmd "
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
    dead = [label for label, (_, _, alive) in cluster_daemons.daemons(p, names).items() if not alive]
    ports = {"slurmctld": CTLD_PORT}
    if not shaped:  # a shaped node's slurmd listens in its own network namespace
        ports.update({f"slurmd -N {n}": SLURMD_BASE_PORT + i for i, n in enumerate(names, start=1)})
    for label in dead:
        if label in ports and not cluster_daemons.port_free(ports[label]):
            raise ClusterError(f"{label} is not running but TCP port {ports[label]} is in use (another "
                               f"Slurm, or a {label} without its pid file?): stop it, or run "
                               f"`handson cluster down` (this cancels every job) and `up` again")
    # Written again: it refreshes the prolog after a venv move or a new rate.
    cluster_config.write_config(p, len(names), profile, site)
    if shaped:
        network.create(names, profile)  # what exists is kept; the rate is set again
    _record_link(p, names, profile)
    started = time.monotonic()
    # munged first: the other daemons authenticate every message with it.
    cluster_daemons.start_munged(p)
    cluster_daemons.start_slurmctld(p)
    restarts_a_node = any(d.startswith("slurmd") for d in dead)
    own_hostname = cluster_daemons.uts_namespaces_work() if restarts_a_node else False
    for node in names:
        cluster_daemons.start_slurmd(p, node, own_hostname, shaped)
    if "slurmctld" not in dead:
        cluster_daemons.slurm(["scontrol", "reconfigure"], p)  # a restarted slurmctld has read the new file
    cluster_daemons.wait_until_ready(p, names)
    changed = f"; link changed from {before.name} to {profile.name}" if before != profile else ""
    if dead:
        kept = cluster_daemons.job_ids(p)
        out(f"the cluster was partly down: restarted {', '.join(dead)} in "
            f"{time.monotonic() - started:.1f} s{changed}; "
            + (f"{len(kept)} job(s) kept: {' '.join(kept)}" if kept else "no job to keep")
            + f" (logs in {p.log})")
    else:
        out(f"the cluster is already up ({len(names)} nodes){changed}")
    print_summary(p, names, out, site)
    return 0


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
    import psutil  # imported when used, as cluster_daemons does
    if cluster_daemons.node_states(p):
        cluster_daemons.slurm(["scancel", "--full", "--state=RUNNING"], p, timeout=10)
        cluster_daemons.slurm(["scancel", "--state=PENDING"], p, timeout=10)
    procs = cluster_daemons.cluster_processes(p)
    # Daemons first (they would restart steps), then the job steps and their tasks.
    order = {"slurmctld": 0, "slurmd": 1, "slurmstepd": 2, "munged": 4}

    def rank(proc):
        try:
            return order.get(proc.name(), 3)
        except psutil.Error:
            return 5
    procs.sort(key=rank)
    terminate_all(procs, timeout)
    left = [proc for proc in cluster_daemons.cluster_processes(p) if proc.is_running()]
    for path in [p.munge_pid, p.ctld_pid] + [p.slurmd_pid(n) for n in configured_nodes(p)]:
        try:
            path.unlink()
        except OSError:
            pass
    unlink_system_conf(p)
    remove_qsub_shim()
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
    table = cluster_daemons.daemons(p)
    if not table or not p.conf.exists():
        out(f"cluster down: no configuration in {p.root} (run `handson cluster up`)")
        return 1
    out("daemons:")
    for label, (_, pid, alive) in table.items():
        out(f"  {label:<14s} {'up (pid %d)' % pid if alive else 'down'}")
    states = cluster_daemons.node_states(p)
    running = all(alive for _, _, alive in table.values()) and bool(states)
    if states:
        out("nodes:")
        out(_indent(cluster_daemons.slurm(["sinfo", "-N", "-o", "%10N %10P %8t %5c %10m %E"], p).stdout))
        out("queues:")
        out(_indent(cluster_daemons.slurm(["sinfo", "-o", "%10P %6a %12l %8s %6D %8t %N"], p).stdout))
        qstat = cluster_daemons.slurm(["qstat"], p)
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
