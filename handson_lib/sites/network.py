"""A real network between the local cluster's nodes: one network namespace per node, a shaped link.

Without it every rank shares the host's loopback and shared memory, and an allreduce between
"nodes" costs almost nothing. `handson cluster up --link 1gbe` gives each node its own namespace:

    host (root namespace)                          node nX (namespace handson-nX)
    bridge handson-br0 198.18.0.254/24  <- veth ->  eth0 198.18.0.X/24, lo

- Addresses come from 198.18.0.0/15, the range set aside for benchmarking network devices (RFC
  2544): it is routed nowhere and exists only inside this machine.
- The node's slurmd, so every job step and rank started on that node, runs inside its namespace.
  Ranks on one node still share memory (Open MPI's `sm`); ranks on two nodes talk TCP over the veth.
- Each node's link is shaped in both directions with a token bucket (`tc qdisc ... tbf`): on eth0
  inside the namespace (what the node sends) and on the host's end of the veth (what it receives),
  as a switch port of the profile's rate would.

A profile fixes the rate only. Latency would need `netem`, which not every kernel has (this course's
machines lack it); at the message sizes of gradients (MiB) the rate dominates, whereas messages
that fit the token bucket (32 KiB at 1 Gbit/s) pass unshaped.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
from dataclasses import asdict
from pathlib import Path

from handson_lib.sites.table import LinkProfile

BRIDGE = "handson-br0"
NETNS_PREFIX = "handson-"
HOST_VETH_PREFIX = "hsv-"        # the host's end of node nX's veth: hsv-nX (interface names <= 15)
NODE_INTERFACE = "eth0"
SUBNET = "198.18.0.0/24"
HOST_ADDRESS = "198.18.0.254"
PREFIX_LENGTH = 24
CLONE_NEWNET = 0x40000000
#: what the kernel keeps queued at a shaped port before it drops (tbf `latency`)
QUEUE_MS = 20


class NetworkError(RuntimeError):
    """The namespaces or the shaping could not be set up; the message says what to do instead."""


def namespace(node):
    return f"{NETNS_PREFIX}{node}"


def host_veth(node):
    return f"{HOST_VETH_PREFIX}{node}"


def node_address(index):
    """Node nX (X = 1, 2, ...) gets 198.18.0.X."""
    if not 1 <= index <= 250:
        raise NetworkError(f"node index {index} is outside 1..250 of {SUBNET}")
    return f"198.18.0.{index}"


def node_addresses(nodes):
    return {node: node_address(i) for i, node in enumerate(nodes, start=1)}


# ----------------------------------------------------------------------------- commands

def _ip(*args, check=True):
    return _run(["ip", *args], check)


def _tc(*args, check=True, netns=None):
    cmd = ["tc", *args] if netns is None else ["ip", "netns", "exec", netns, "tc", *args]
    return _run(cmd, check)


def _run(cmd, check):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise NetworkError(f"`{' '.join(cmd)}` failed: {(result.stderr or result.stdout).strip()}")
    return result


def missing_tools():
    return [tool for tool in ("ip", "tc") if not shutil.which(tool)]


def support_problem():
    """Why namespaces cannot be made here (None when they can): root, iproute2, the kernel."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if missing_tools():
        return f"{' and '.join(missing_tools())} missing (Debian package iproute2)"
    probe = f"{NETNS_PREFIX}probe"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"this kernel or container refuses network namespaces ({made.stderr.strip()})"
    try:
        veth = _ip("link", "add", "hsv-probe", "type", "veth", "peer", "name", NODE_INTERFACE,
                   "netns", probe, check=False)
        if veth.returncode != 0:
            return f"no veth pairs here ({veth.stderr.strip()})"
        tbf = _tc("qdisc", "add", "dev", "hsv-probe", "root", "tbf", "rate", "1gbit", "burst", "128kb",
                  "latency", f"{QUEUE_MS}ms", check=False)
        if tbf.returncode != 0:
            return f"no tbf traffic shaping in this kernel ({tbf.stderr.strip()})"
    finally:
        _ip("link", "del", "hsv-probe", check=False)
        _ip("netns", "del", probe, check=False)
    return None


# ----------------------------------------------------------------------------- what exists

def existing_namespaces():
    out = _ip("netns", "list", check=False).stdout
    return sorted(line.split()[0] for line in out.splitlines()
                  if line.strip() and line.split()[0].startswith(NETNS_PREFIX))


def link_exists(name, netns=None):
    args = ("-n", netns) if netns else ()
    return _ip(*args, "link", "show", name, check=False).returncode == 0


def host_links():
    """Names of the host's network interfaces (`ip -o link`: '3: hsv-n1@if2: <...>')."""
    out = _ip("-o", "link", "show", check=False).stdout
    return sorted(line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line)


def snapshot():
    """What `down` must give back: namespaces, links and qdiscs of the host (tests compare them)."""
    qdiscs = _tc("qdisc", "show", check=False).stdout
    namespaces = _ip("netns", "list", check=False).stdout
    return {"netns": sorted(line.split()[0] for line in namespaces.splitlines() if line.strip()),
            "links": host_links(),
            "qdiscs": sorted(line.split(" refcnt")[0] for line in qdiscs.splitlines() if line.strip())}


# ----------------------------------------------------------------------------- set up, tear down

def tbf_arguments(profile: LinkProfile):
    """`tc qdisc replace ... tbf` arguments for the profile's rate: a bucket of 0.25 ms of traffic,
    at least 32 KiB (smaller buckets cost TCP a fifth of a 1 Gbit/s link here), and QUEUE_MS of
    queue. A message that fits the bucket passes at the machine's speed: below ~32 KiB the link
    has neither its rate nor, without netem, its latency."""
    burst = max(int(profile.rate_bytes / 4000), 32 * 1024)
    return ["tbf", "rate", f"{profile.rate_bps}bit", "burst", str(burst), "latency", f"{QUEUE_MS}ms"]


def shape(nodes, profile: LinkProfile):
    """Apply (or change) the profile's rate on every node's link, both directions."""
    for node in nodes:
        for netns, device in ((namespace(node), NODE_INTERFACE), (None, host_veth(node))):
            _tc("qdisc", "replace", "dev", device, "root", *tbf_arguments(profile), netns=netns)


def create(nodes, profile: LinkProfile):
    """Bridge, one namespace and veth per node, addresses, shaping. Parts that exist are kept."""
    if profile.rate_bps is None:
        raise NetworkError("the 'none' profile has no network to create")
    if not link_exists(BRIDGE):
        _ip("link", "add", BRIDGE, "type", "bridge")
    if HOST_ADDRESS not in _ip("-o", "addr", "show", "dev", BRIDGE).stdout:
        _ip("addr", "add", f"{HOST_ADDRESS}/{PREFIX_LENGTH}", "dev", BRIDGE)
    _ip("link", "set", BRIDGE, "up")
    have = set(existing_namespaces())
    for node, address in node_addresses(nodes).items():
        ns = namespace(node)
        if ns not in have:
            _ip("netns", "add", ns)
        if not link_exists(host_veth(node)):
            _ip("link", "add", host_veth(node), "type", "veth", "peer", "name", NODE_INTERFACE, "netns", ns)
        _ip("link", "set", host_veth(node), "master", BRIDGE, "up")
        if address not in _ip("-n", ns, "-o", "addr", "show", "dev", NODE_INTERFACE).stdout:
            _ip("-n", ns, "addr", "add", f"{address}/{PREFIX_LENGTH}", "dev", NODE_INTERFACE)
        _ip("-n", ns, "link", "set", NODE_INTERFACE, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
    shape(nodes, profile)


def remove():
    """Delete every namespace, veth and the bridge that `create` made (qdiscs go with their
    devices). Returns what was removed."""
    removed = []
    # The host's end first: deleting it deletes the pair at once, whereas a deleted namespace
    # takes its devices down a moment later, in the kernel's own time.
    for name in host_links():
        if name.startswith(HOST_VETH_PREFIX):
            _ip("link", "del", name, check=False)
            removed.append(name)
    for ns in existing_namespaces():
        _ip("netns", "del", ns, check=False)
        removed.append(ns)
    if link_exists(BRIDGE):
        _ip("link", "del", BRIDGE, check=False)
        removed.append(BRIDGE)
    return removed


def enter(node):
    """A preexec function: move the child into node's network namespace (setns), before exec."""
    libc = ctypes.CDLL(None, use_errno=True)
    path = f"/run/netns/{namespace(node)}"

    def preexec():
        fd = os.open(path, os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns({path})")
        finally:
            os.close(fd)
    return preexec


# ----------------------------------------------------------------------------- state, counters

def save_state(path: Path, nodes, profile: LinkProfile):
    state = {"profile": asdict(profile), "nodes": list(nodes), "bridge": BRIDGE,
             "host_address": HOST_ADDRESS, "addresses": node_addresses(nodes)}
    Path(path).write_text(json.dumps(state, indent=1))


def load_state(path: Path):
    """The profile `up` applied ({"profile": {...}, "nodes": [...], ...}); None when there is none."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def interface_bytes(node):
    """(bytes the node sent, bytes it received) on its link, read on the host's end of its veth
    (what leaves the node arrives there: rx; what enters the node leaves there: tx)."""
    stats = Path("/sys/class/net", host_veth(node), "statistics")
    try:
        return int((stats / "rx_bytes").read_text()), int((stats / "tx_bytes").read_text())
    except OSError as err:
        raise NetworkError(f"no link for node {node} ({err}): is the cluster up with --link?") from None


def qdisc_rates(node):
    """{device: rate text} of the tbf qdiscs on node's link, as `tc qdisc show` prints them."""
    rates = {}
    for netns, device in ((namespace(node), NODE_INTERFACE), (None, host_veth(node))):
        out = _tc("qdisc", "show", "dev", device, netns=netns, check=False).stdout
        for line in out.splitlines():
            if line.startswith("qdisc tbf") and " rate " in line:
                rates[f"{netns + ':' if netns else ''}{device}"] = line.split(" rate ")[1].split()[0]
    return rates
