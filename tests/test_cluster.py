"""`handson cluster`: the course's PBS job scripts on a real local scheduler (Slurm + PBS wrappers).

Needs root and apt (the packages are installed when missing). The module brings a 3-node cluster
up, submits the over-walltime job first (it runs for about a minute and a half, in parallel with
the others), runs the task job scripts with qsub, and brings the cluster down at the end.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from handson_lib.sites import cluster, jobs

pytestmark = [pytest.mark.scheduler]

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
SOLUTIONS = ROOT / "solutions"
NODES = 3
QUICK = "--epoch 1 --train-size 400 --test-size 100"
GROUP = "gz42"


def handson(*args, timeout=300):
    return subprocess.run([str(VENV_BIN / "handson"), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def login_env():
    """A student's login shell: no venv on PATH (the cluster's TaskProlog must add it)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d and Path(d).resolve() != VENV_BIN.resolve())
    for name in list(env):
        if name.startswith(("SLURM_", "PBS_", "OMPI_", "PRTE_")):
            del env[name]
    env["EXTRA_ARGS"] = QUICK
    return env


def job_script(folder, name, body, queue="h-debug", select="1", walltime="00:05:00"):
    path = Path(folder) / name
    path.write_text(f"#!/bin/bash\n#PBS -q {queue}\n#PBS -l select={select}\n"
                    f"#PBS -W group_list={GROUP}\n#PBS -l walltime={walltime}\n{body}")
    return path


def output_of(folder, jobid):
    out = jobs.output_file(folder, jobid)
    assert out is not None, f"no *.o{jobid} in {folder}: {sorted(p.name for p in Path(folder).iterdir())}"
    return out.read_text(errors="replace")


@pytest.fixture(scope="module")
def up(cluster_turn):
    if os.geteuid() != 0:
        pytest.fail("`handson cluster up` needs root (apt-get and system daemons); run the scheduler "
                    "tests as root, or use `handson jobscript run FILE` without a scheduler")
    result = handson("cluster", "up", "--nodes", NODES)
    assert result.returncode == 0, f"cluster up failed:\n{result.stdout}\n{result.stderr}"
    # Daemons this cluster did not start (e.g. a munged that systemd started at installation).
    result.foreign = ({p.pid for p in cluster.scheduler_processes()}
                      - {p.pid for p in cluster.cluster_processes()})
    yield result
    if cluster.cluster_processes():
        handson("cluster", "down")


@pytest.fixture(scope="module")
def jobs_dir(up, tmp_path_factory):
    folder = tmp_path_factory.mktemp("cluster_jobs")
    for name in ("run_multi_gpu_training.sh", "train_cifar_multi_gpu.py",
                 "run_multi_node_training.sh", "train_cifar_multi_node.py"):
        text = (SOLUTIONS / name).read_text()
        if name.endswith(".sh"):
            assert "group_list=gt00" in text
            text = text.replace("gt00", GROUP)
        (folder / name).write_text(text)
    return folder


@pytest.fixture(scope="module", autouse=True)
def overtime_job(up, tmp_path_factory):
    """Submitted before every other test: a 1-minute walltime and `sleep 600`. `&&`: Slurm's SIGTERM
    may reach the sleep a moment before bash, which would then run the next line."""
    folder = tmp_path_factory.mktemp("overtime")
    script = job_script(folder, "overtime.sh", "#PBS -N overtime\necho started; sleep 600 && echo not-killed\n",
                        walltime="00:01:00")
    jobid = cluster.qsub(script, folder, "-j", "oe", env=login_env())
    return folder, jobid, time.monotonic()


def test_up_starts_every_daemon_and_idle_nodes(up):
    assert "h-debug" in up.stdout and "qsub" in up.stdout
    table = cluster.daemons(cluster.paths())
    assert {"munged", "slurmctld"} <= set(table) and all(alive for _, _, alive in table.values()), table
    assert sum(label.startswith("slurmd") for label in table) == NODES
    states = cluster.node_states()
    assert sorted(states) == [f"n{i}" for i in range(1, NODES + 1)]


def test_up_twice_keeps_the_same_daemons(up):
    before = {k: pid for k, (_, pid, _) in cluster.daemons(cluster.paths()).items()}
    again = handson("cluster", "up", "--nodes", NODES)
    assert again.returncode == 0, again.stderr
    assert "already up" in again.stdout
    after = {k: pid for k, (_, pid, _) in cluster.daemons(cluster.paths()).items()}
    assert before == after


def test_status_shows_nodes_queues_jobs_and_daemons(up):
    result = handson("cluster", "status")
    assert result.returncode == 0, result.stdout + result.stderr
    for word in ("slurmctld", "munged", "slurmd -N n1", "h-debug", "h-short", "h-small", "h-regular",
                 "30:00", "jobs (qstat)", "overtime"):
        assert word in result.stdout, f"{word!r} missing from status:\n{result.stdout}"


def test_multi_gpu_job_script_runs_with_qsub(jobs_dir):
    jobid = cluster.qsub("run_multi_gpu_training.sh", jobs_dir, "-j", "oe", env=login_env())
    state = cluster.wait_job(jobid, timeout=180)
    text = output_of(jobs_dir, jobid)
    assert state == "COMPLETED", text
    # PBS Pro's name for the output: the job's name (#PBS -N multi_gpu), then .o and the job id.
    assert (jobs_dir / f"multi_gpu.o{jobid}").exists()
    assert len(re.findall(r"^Throughput: [\d.]+ \[images/sec\.\]", text, flags=re.M)) == 2, text
    info = cluster.job_info(jobid)
    assert info["Partition"] == "h-debug" and info["NumNodes"] == "1", info
    assert info["Account"] == GROUP, "-W group_list should become the job's account"


def test_multi_node_job_script_runs_four_ranks_on_two_nodes(jobs_dir):
    jobid = cluster.qsub("run_multi_node_training.sh", jobs_dir, "-j", "oe", env=login_env())
    state = cluster.wait_job(jobid, timeout=180)
    text = output_of(jobs_dir, jobid)
    assert state == "COMPLETED", text
    assert "Num process (COMM_WORLD): 4" in text, text
    assert "validation/main/accuracy" in text
    info = cluster.job_info(jobid)
    assert info["NumNodes"] == "2" and info["NumTasks"] == "4", info


def test_ranks_are_placed_two_per_node(up, tmp_path):
    script = job_script(tmp_path, "ranks.sh", "#PBS -N ranks\nset -eu\ncd \"$PBS_O_WORKDIR\"\n"
                        "echo \"mpiexec: $(command -v mpiexec)\"\necho \"python: $(command -v python)\"\n"
                        "echo \"nodefile: $(tr '\\n' ' ' < \"$PBS_NODEFILE\")\"\n"
                        "mpiexec -n 4 python -m handson_lib.runtime.ranks\n",
                        select="2:mpiprocs=2:ompthreads=1")
    jobid = cluster.qsub(script, tmp_path, "-j", "oe", env=login_env())
    state = cluster.wait_job(jobid, timeout=120)
    text = output_of(tmp_path, jobid)
    assert state == "COMPLETED", text
    # The venv's Open MPI, not the wrappers' /usr/bin/mpiexec, though PATH lacked the venv at qsub.
    assert f"mpiexec: {VENV_BIN}/mpiexec" in text and f"python: {VENV_BIN}/python" in text, text
    nodefile = re.search(r"^nodefile: (.*)$", text, flags=re.M).group(1).split()
    assert len(nodefile) == 4 and len(set(nodefile)) == 2, text
    assert nodefile[0] == nodefile[1] and nodefile[2] == nodefile[3], text
    rows = [line.split() for line in text.split("\n") if re.match(r"^\s+\d+\s+\d+\s+\d+\s+4\s+\S+$", line)]
    assert len(rows) == 4, text
    per_node = {}
    for rank, intra, inter, _, host in rows:
        per_node.setdefault((inter, host), []).append(int(intra))
    assert len(per_node) == 2, text
    assert all(sorted(v) == [0, 1] for v in per_node.values()), text
    assert {host for _, host in per_node} == set(nodefile), "each fake node has its own host name"


@pytest.mark.parametrize("queue,select,walltime,reason", [
    ("h-debug", "1", "01:00:00", "Requested time limit is invalid"),      # over h-debug's 30 min
    # h-debug allows 4 nodes (the site table), capped here at the 3 the cluster has
    ("h-debug", "4:mpiprocs=2", "00:10:00", "Node count specification invalid"),
    ("h-short", "8:mpiprocs=2", "00:10:00", "Node count specification invalid"),  # more than exist
])
def test_requests_over_the_limits_are_refused_at_submission(up, tmp_path, queue, select, walltime, reason):
    script = job_script(tmp_path, "too_much.sh", "hostname\n", queue=queue, select=select, walltime=walltime)
    before = cluster.slurm(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout.split()
    with pytest.raises(cluster.ClusterError) as refused:
        cluster.qsub(script, tmp_path, "-j", "oe", env=login_env())
    assert reason in str(refused.value)
    after = cluster.slurm(["squeue", "-h", "-t", "all", "-o", "%i"]).stdout.split()
    assert before == after, "a refused job must not be queued"


def test_qdel_cancels_a_job(up, tmp_path):
    script = job_script(tmp_path, "long.sh", "#PBS -N long\nsleep 300\n")
    jobid = cluster.qsub(script, tmp_path, "-j", "oe", env=login_env())
    result = cluster.slurm(["qdel", jobid])
    assert result.returncode == 0, result.stdout + result.stderr
    assert cluster.wait_job(jobid, timeout=60) == "CANCELLED"
    assert not [p for p in cluster.cluster_processes() if "sleep 300" in " ".join(p.cmdline())]


def test_job_over_its_walltime_is_killed(overtime_job):
    folder, jobid, submitted = overtime_job
    state = cluster.wait_job(jobid, timeout=200)
    waited = time.monotonic() - submitted
    text = output_of(folder, jobid)
    assert state == "TIMEOUT", text
    assert re.search(rf"\*\*\* JOB {jobid} ON n\d+ CANCELLED AT \S+ DUE TO TIME LIMIT \*\*\*", text), text
    assert "started" in text and "not-killed" not in text
    assert 60 <= waited < 150, f"killed {waited:.0f} s after submission (walltime 60 s)"
    assert f"JobId={jobid} " in cluster.paths().jobcomp.read_text()
    assert re.search(rf"JobId={jobid} .*JobState=TIMEOUT", cluster.paths().jobcomp.read_text())


def test_up_mends_a_half_dead_cluster_and_the_running_job_goes_on(up, tmp_path, monkeypatch):
    """slurmctld and the slurmd of a job's node die while the job sleeps: qstat is an error, not
    "done"; `handson cluster up` starts those two again and the same job runs on."""
    script = job_script(tmp_path, "survivor.sh", "#PBS -N survivor\necho started; sleep 123\n")
    jobid = cluster.qsub(script, tmp_path, "-j", "oe", env=login_env())
    try:
        deadline = time.monotonic() + 60
        while not (sleepers := [p for p in cluster.cluster_processes() if "sleep 123" in " ".join(p.cmdline())]):
            assert time.monotonic() < deadline, f"the job never started: {cluster.job_info(jobid)}"
            time.sleep(0.5)
        # slurmctld saves a job's start within about 5 s; one younger than that is requeued after a crash.
        time.sleep(6)
        node = cluster.job_info(jobid)["NodeList"]
        p = cluster.paths()
        for pid_file in (p.ctld_pid, p.slurmd_pid(node)):
            os.kill(cluster.read_pid(pid_file), signal.SIGKILL)
        monkeypatch.setattr(jobs, "QUERY_PAUSES_S", (0.5,))  # two tries: qstat waits ~9 s for slurmctld
        with pytest.raises(cluster.ClusterError) as failed:
            cluster.wait_job(jobid, timeout=60)
        assert f"`qstat {jobid}` failed 2 time(s)" in str(failed.value), failed.value
        assert "Problem loading jobs." in str(failed.value)

        result = handson("cluster", "up", "--nodes", NODES)
        assert result.returncode == 0, result.stdout + result.stderr
        said = result.stdout.splitlines()[0]
        assert said.startswith(f"the cluster was partly down: restarted slurmctld, slurmd -N {node} in "), said
        assert re.search(rf"job\(s\) kept: .*\b{jobid}\b", said), said
        assert sleepers[0].is_running(), "the job's own process runs on (not restarted, not cancelled)"
        assert cluster.job_info(jobid)["JobState"] == "RUNNING"
        assert all(alive for _, _, alive in cluster.daemons(p).values()), cluster.daemons(p)
        assert all(s.rstrip("*") in jobs.USABLE_NODE_STATES and not s.endswith("*")
                   for s in cluster.node_states().values()), cluster.node_states()
    finally:
        cluster.slurm(["qdel", jobid])
    assert cluster.wait_job(jobid, timeout=60) == "CANCELLED"
    assert "started" in output_of(tmp_path, jobid)


def test_down_stops_every_daemon_and_leaves_no_process(up):
    result = handson("cluster", "down")
    assert result.returncode == 0, result.stdout + result.stderr
    left = [p for p in cluster.scheduler_processes() if p.pid not in up.foreign]
    assert not left, [(p.pid, p.name(), p.cmdline()) for p in left]
    assert not cluster.cluster_processes()
    assert shutil.which("qsub") and shutil.which("slurmctld"), "the packages stay installed"
    status = handson("cluster", "status")
    assert status.returncode == 1 and "down" in status.stdout
