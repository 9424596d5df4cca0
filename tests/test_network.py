"""`handson cluster up --link PROFILE`: a network namespace per node, a shaped link, MPI across it.

The scheduler part needs root and apt (like tests/test_cluster.py, and never at the same time as
it: `cluster_turn`). The module brings up 2 nodes on a 1 Gbit/s link and takes them down at the
end, checking that the host's namespaces, links and qdiscs are as before.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import psutil
import pytest
from nbclient import NotebookClient

from handson_lib.experiments import allreduce, breakdown
from handson_lib.autograder import answers
from handson_lib.sites import cluster, cluster_daemons, jobs, network
from handson_lib.sites.table import LINKS, get_link

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
RATE_BYTES = get_link("1gbe").rate_bytes


def handson(*args, timeout=300):
    return subprocess.run([str(VENV_BIN / "handson"), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


# ----------------------------------------------------------------------------- without a cluster

def test_an_unknown_link_profile_is_refused_with_the_list():
    result = handson("cluster", "up", "--link", "5gbe")
    assert result.returncode == 1
    assert "unknown link profile '5gbe'" in result.stderr
    for name in LINKS:
        assert name in result.stderr


def test_without_namespaces_up_says_why_and_offers_link_none(monkeypatch):
    monkeypatch.setattr(cluster_daemons, "is_root", lambda: True)
    monkeypatch.setattr(cluster_daemons, "ensure_installed", lambda out: False)
    monkeypatch.setattr(network, "support_problem", lambda: "this kernel or container refuses network "
                                                            "namespaces (Operation not permitted)")
    with pytest.raises(cluster.ClusterError) as refused:
        cluster.up(2, link="1gbe", out=lambda *a: None)
    assert "refuses network namespaces" in str(refused.value)
    assert "--link none" in str(refused.value)


def test_without_root_up_with_a_link_says_so(monkeypatch):
    monkeypatch.setattr(cluster_daemons, "is_root", lambda: False)
    with pytest.raises(cluster.ClusterError, match="needs root.*network namespaces"):
        cluster.up(2, link="1gbe", out=lambda *a: None)


def test_ranks_spread_over_nodes_as_evenly_as_they_can():
    assert jobs.Placement.spread(1, 2) == jobs.Placement(1, 1, 1)
    assert jobs.Placement.spread(2, 2) == jobs.Placement(2, 2, 1)
    assert jobs.Placement.spread(4, 2) == jobs.Placement(4, 2, 2)
    assert jobs.Placement.spread(4, 4) == jobs.Placement(4, 4, 1)
    assert jobs.Placement.spread(3, 2) == jobs.Placement(3, 2, 2)
    script = jobs.mpi_job_script(jobs.Placement.spread(4, 2), ["-m", "x", "--out", "a b"], "probe")
    assert "#PBS -l select=2:mpiprocs=2:ompthreads=1" in script
    assert "mpiexec -n 4 --map-by ppr:2:node python -m x --out 'a b'" in script


def test_a_run_off_the_cluster_records_no_link(monkeypatch):
    monkeypatch.delenv(jobs.LINK_ENV, raising=False)
    assert jobs.job_link()["profile"] == "none" and jobs.job_link()["rate_bps"] is None
    link = jobs.job_link({jobs.LINK_ENV: "1gbe", jobs.LINK_RATE_ENV: "1000000000"})
    assert link == {"profile": "1gbe", "rate_bps": 10 ** 9, "note": LINKS["1gbe"].title}


def test_asking_for_the_cluster_when_none_is_up_says_how_to_start_one(monkeypatch, tmp_path):
    monkeypatch.setenv("HANDSON_CLUSTER_DIR", str(tmp_path))
    assert jobs.where_ranks_run("auto") is None
    with pytest.raises(jobs.JobError, match="handson cluster up --link 1gbe"):
        jobs.where_ranks_run("cluster")
    with pytest.raises(ValueError, match="auto, local, cluster"):
        jobs.where_ranks_run("remote")


# ----------------------------------------------------------------------------- the shaped cluster

@pytest.fixture(scope="module")
def shaped(cluster_turn):
    if os.geteuid() != 0:
        pytest.fail("`handson cluster up --link` needs root (namespaces, apt, system daemons)")
    handson("cluster", "down")  # whatever an earlier run left
    before = network.snapshot()
    result = handson("cluster", "up", "--nodes", 2, "--link", "1gbe")
    assert result.returncode == 0, f"cluster up --link 1gbe failed:\n{result.stdout}\n{result.stderr}"
    result.before = before
    yield result
    if cluster.cluster_processes() or network.existing_namespaces():
        handson("cluster", "down")


@pytest.mark.scheduler
def test_up_makes_a_namespace_per_node_and_prints_the_profile(shaped):
    assert "link: 1gbe" in shaped.stdout
    assert network.existing_namespaces() == ["handson-n1", "handson-n2"]
    for node in ("n1", "n2"):
        # The profile is applied on both ends of each node's link.
        assert network.qdisc_rates(node) == {f"handson-{node}:eth0": "1Gbit", f"hsv-{node}": "1Gbit"}
        assert f"{node}: {network.node_addresses(['n1', 'n2'])[node]} in namespace handson-{node}" \
            in shaped.stdout
    status = handson("cluster", "status")
    assert status.returncode == 0 and "link: 1gbe" in status.stdout and "hsv-n2 1Gbit" in status.stdout


@pytest.mark.scheduler
def test_up_twice_keeps_the_daemons_and_the_network(shaped):
    pids = {k: pid for k, (_, pid, _) in cluster.daemons(cluster.paths()).items()}
    again = handson("cluster", "up", "--nodes", 2, "--link", "1gbe")
    assert again.returncode == 0, again.stderr
    assert "already up" in again.stdout
    assert {k: pid for k, (_, pid, _) in cluster.daemons(cluster.paths()).items()} == pids
    assert network.existing_namespaces() == ["handson-n1", "handson-n2"]
    assert sum(1 for name in network.host_links() if name.startswith("hsv-")) == 2


@pytest.fixture(scope="module")
def allreduce_across_nodes(shaped):
    """8 MiB allreduced on 2 ranks, one per node, as a job; the nodes' byte counters around it."""
    before = {node: network.interface_bytes(node) for node in ("n1", "n2")}
    result = allreduce.measure(np=2, nbytes="8M", iterations=3, warmup=1, where="cluster",
                               traffic_rule=answers.allreduce_traffic_bytes, timeout=240)
    after = {node: network.interface_bytes(node) for node in ("n1", "n2")}
    return result, before, after


@pytest.mark.scheduler
def test_ranks_on_two_nodes_allreduce_correctly_over_the_shaped_link(allreduce_across_nodes):
    result, _, _ = allreduce_across_nodes
    assert result["correct"], allreduce.format_table(result)
    assert result["hosts"] == ["n1", "n2"]
    assert result["link"]["profile"] == "1gbe" and result["link"]["rate_bps"] == 10 ** 9
    assert result["p2p_pair"] == [0, 1]
    assert "link between nodes: 1gbe" in allreduce.format_table(result)
    # The shaping caps what crosses: no path may beat the link (TCP headers make it a little less).
    for record in result["results"]:
        assert record["busbw_over_link"] <= 1.02, allreduce.format_table(result)


@pytest.mark.scheduler
def test_the_allreduce_bytes_cross_the_veth(allreduce_across_nodes):
    result, before, after = allreduce_across_nodes
    L, p = result["bytes"], result["ranks"]
    rounds = result["iterations"] + result["warmup"]
    per_rank = answers.allreduce_traffic_bytes(L, p)  # 2L(p-1)/p = L for p = 2
    # Each round: the ChainerMN and the raw MPI allreduce, and one leg of the ping-pong per rank.
    expected = rounds * (2 * per_rank + L)
    for node in ("n1", "n2"):
        sent = after[node][0] - before[node][0]
        received = after[node][1] - before[node][1]
        # Headers (TCP/IP, Ethernet: about 3 %) and MPI's own messages come on top.
        assert expected <= sent <= 1.15 * expected, (node, sent, expected)
        assert expected <= received <= 1.15 * expected, (node, received, expected)


@pytest.mark.scheduler
def test_the_breakdown_on_the_cluster_records_the_link_and_waits_for_the_wire(shaped):
    result = breakdown.measure(np=2, model="cnn", batchsize=8, iterations=3, warmup=1,
                               where="cluster", timeout=240)
    assert result["link"]["profile"] == "1gbe"
    assert sorted({lane["host"] for lane in result["timeline"]}) == ["n1", "n2"]
    # One rank's L bytes at 1 Gbit/s: no allreduce can take less than that on this link.
    wire = answers.allreduce_traffic_bytes(result["gradient_bytes"], 2) / RATE_BYTES
    assert result["phases_s"]["allreduce"] >= 0.9 * wire, (result["phases_s"], wire)


@pytest.mark.scheduler
def test_a_rank_killed_mid_allreduce_ends_the_job_and_leaves_nothing(shaped, tmp_path):
    marker = tmp_path / "killed.json"
    argv = ["-m", "handson_lib.experiments.allreduce", "--worker", "--bytes", "32M",
            "--iterations", "200", "--warmup", "1", "--result-file", str(marker)]
    script = tmp_path / "kill.sh"
    script.write_text(jobs.mpi_job_script(jobs.Placement.spread(2, 2), argv, "kill", walltime_s=300))
    sent_before = network.interface_bytes("n2")[0]
    jobid = cluster.qsub(script.name, tmp_path)

    def ranks():
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            if str(marker) in " ".join(proc.info["cmdline"] or []) and "python" in (proc.info["cmdline"] or [""])[0]:
                found.append(proc)
        return found

    deadline = time.monotonic() + 120
    while len(ranks()) < 2 or network.interface_bytes("n2")[0] - sent_before < 64 * 2 ** 20:
        assert time.monotonic() < deadline, f"the job's ranks never started: {cluster.job_info(jobid)}"
        time.sleep(0.5)
    victim = next(p for p in ranks() if "mpiexec" not in p.name())
    victim.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    state = cluster.wait_job(jobid, timeout=120)
    assert state not in ("COMPLETED", "RUNNING"), state
    assert time.monotonic() - killed_at < 60, "the job outlived its killed rank by more than a minute"
    time.sleep(2)
    assert ranks() == [], [p.info for p in ranks()]
    assert not marker.exists()
    # Open MPI's launcher ends the step and Slurm the job: the batch script itself is killed.
    assert cluster.job_info(jobid).get("ExitCode") != "0:0"


@pytest.mark.scheduler
def test_notebook_04_runs_its_measurements_as_jobs_across_the_nodes(shaped):
    source = ROOT / "solutions" / "04_scaling.ipynb"
    nb = nbformat.read(str(source), as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(source.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "ranks: jobs (qsub) across the local cluster's nodes n1, n2, linked at 1 Gbit/s" in text
    assert "p = 1, 2, 4" in text and "same share of the cores at every p" in text
    assert "link between nodes: 1gbe" in text            # the allreduce benchmark's table
    assert "B = 0.125 GB/s each way: the rate of the 1gbe link between the nodes" in text


@pytest.mark.scheduler
def test_down_gives_back_every_namespace_link_and_qdisc(shaped):
    result = handson("cluster", "down")
    assert result.returncode == 0, result.stderr
    assert "handson-n1" in result.stdout and "handson-br0" in result.stdout
    assert network.snapshot() == shaped.before
    assert not cluster.paths().link.exists()
    assert jobs.shaped_cluster() is None
