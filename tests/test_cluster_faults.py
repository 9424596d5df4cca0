"""Faults of the scheduler, without one: a qstat or scontrol that fails, a cluster with a dead
daemon, a job the grader gives up on. Fake `qsub` / `qstat` / `qdel` on PATH, or a fake
`cluster_daemons.slurm`, stand for Slurm; tests/test_cluster.py does the same with the real cluster.
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from handson_lib.checking import notebook
from handson_lib.sites import cluster, cluster_config, cluster_daemons, cluster_lifecycle, jobs, network

ROOT = Path(__file__).resolve().parent.parent
JOB_SCRIPT = ROOT / "solutions" / "run_multi_gpu_training.sh"
#: what Slurm's qstat wrapper prints for a running job
RUNNING = ("Job id              Name             Username        Time Use S Queue\n"
           "------------------- ---------------- --------------- -------- - ---------------\n"
           "{jobid}                multi_gpu        root            00:00:03 R h-debug\n")


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    monkeypatch.setattr(jobs, "QUERY_PAUSES_S", (0.01, 0.01))


def fake_commands(folder, **scripts):
    """Executables NAME in `folder` running the shell `scripts[NAME]`; each call is logged to
    NAME.calls with its arguments. The folder, to put first on PATH."""
    folder = Path(folder)
    folder.mkdir(exist_ok=True)
    for name, body in scripts.items():
        path = folder / name
        path.write_text(f'#!/bin/sh\necho "$@" >> "{folder}/{name}.calls"\n{body}\n')
        path.chmod(0o755)
    return folder


def calls(folder, name):
    path = Path(folder) / f"{name}.calls"
    return path.read_text().splitlines() if path.exists() else []


def path_env(folder):
    return {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}


# ----------------------------------------------------------------------------- a failed query


def test_a_failing_qstat_is_an_error_not_a_finished_job(tmp_path):
    # What Slurm's qstat wrapper does while slurmctld is down: exit 8, "Problem loading jobs."
    fake = fake_commands(tmp_path / "bin", qstat='echo "Problem loading jobs." >&2; exit 8')
    with pytest.raises(jobs.QueryError) as failed:
        jobs.job_done("42", env=path_env(fake))
    message = str(failed.value)
    assert "`qstat 42` failed 3 time(s)" in message, message
    assert "exit 8: Problem loading jobs." in message and "not taken as finished" in message
    assert "handson cluster up" in message, "the message says what to do"
    assert len(calls(fake, "qstat")) == 3, "tried again before giving up"


def test_a_qstat_that_fails_for_a_moment_is_tried_again(tmp_path):
    fake = fake_commands(tmp_path / "bin", qstat=f"""
n=$(wc -l < "{tmp_path}/bin/qstat.calls")
if [ "$n" -lt 3 ]; then echo "Problem loading jobs." >&2; exit 8; fi
printf '{RUNNING.format(jobid=42)}'""")
    assert jobs.qstat_state("42", env=path_env(fake)) == "R"
    assert not jobs.job_done("42", env=path_env(fake))


def test_a_qstat_that_does_not_answer_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(jobs, "QUERY_TIMEOUT_S", 0.5)
    fake = fake_commands(tmp_path / "bin", qstat="exec sleep 30")
    with pytest.raises(jobs.QueryError, match="no answer within 0.5 s"):
        jobs.job_done("42", env=path_env(fake))


@pytest.mark.parametrize("body", [
    "exit 153",                                                              # Slurm's wrapper
    'echo "qstat: Unknown Job Id 42.pbs" >&2; exit 153',                     # PBS
    'echo "qstat: 42.pbs Job has finished, use -x or -H" >&2; exit 35',      # PBS Pro
])
def test_a_job_the_scheduler_no_longer_knows_is_done(tmp_path, body):
    fake = fake_commands(tmp_path / "bin", qstat=body)
    assert jobs.qstat_state("42", env=path_env(fake)) is None
    assert jobs.job_done("42", env=path_env(fake))
    assert len(calls(fake, "qstat")) == 2, "an answer, not a failure: no retry"


def not_answering(cmd, p=None, timeout=30, check=False):
    return subprocess.CompletedProcess(
        cmd, 1, "", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n")


def test_job_info_and_wait_job_raise_when_slurmctld_does_not_answer(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster_daemons, "slurm", not_answering)
    with pytest.raises(cluster.ClusterError) as failed:
        cluster.job_info("42")
    message = str(failed.value)
    assert "`scontrol show job -o 42` failed 3 time(s)" in message, message
    assert "Unable to contact slurm controller" in message and "handson cluster up" in message
    fake = fake_commands(tmp_path / "bin", qstat='echo "Problem loading jobs." >&2; exit 8')
    monkeypatch.setenv("PATH", path_env(fake)["PATH"])
    with pytest.raises(cluster.ClusterError) as failed:
        cluster.wait_job("42", timeout=30)
    message = str(failed.value)
    assert message.startswith("job 42: `qstat 42` failed") and "Problem loading jobs." in message
    assert "handson cluster status" in message


def test_job_info_of_a_job_slurm_does_not_know_is_empty(monkeypatch):
    def unknown(cmd, p=None, timeout=30, check=False):
        return subprocess.CompletedProcess(cmd, 1, "", "slurm_load_jobs error: Invalid job id specified\n")
    monkeypatch.setattr(cluster_daemons, "slurm", unknown)
    assert cluster.job_info("42") == {}


# ----------------------------------------------------------------------------- jobs given up on


def student_job_script(folder, group="gz42"):
    """The Task #1 job script as a student hands it in: its group replaced (the placeholder is an
    error before qsub: the notebook's cell submits nothing with it)."""
    folder.mkdir(exist_ok=True)
    path = folder / JOB_SCRIPT.name
    path.write_text(JOB_SCRIPT.read_text().replace("group_list=gt00", f"group_list={group}"))
    return path


@pytest.fixture
def scheduler(tmp_path, monkeypatch):
    """Fake qsub (job 4242), qstat (running) and qdel first on PATH; the folder of their logs."""
    fake = fake_commands(tmp_path / "bin", qsub="echo 4242.localhost",
                         qstat=f"printf '{RUNNING.format(jobid=4242)}'", qdel="exit 0")
    monkeypatch.setenv("PATH", path_env(fake)["PATH"])
    return fake, student_job_script(tmp_path / "task")


#: What Slurm's PBS commands print where they reach no controller (issue 49: 01's cell ran qsub).
NO_CONTROLLER = ('echo "perl: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host" >&2; '
                 'echo "perl: fatal: Could not establish a configuration source" >&2; exit 1')
NO_SCHEDULER_LINE = {
    "en": "no scheduler here: the script was linted, not submitted (to run it here as a job would run: "
          "`handson jobscript run run_multi_gpu_training.sh`)",
    "ja": "ここにはスケジューラがありません: スクリプトは lint で確認しただけで、投入していません（ジョブと同じように"
          "ここで実行するには `handson jobscript run run_multi_gpu_training.sh`）"}


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize("commands", ["unreachable", "none"])
def test_the_notebook_submits_nothing_where_no_scheduler_answers(tmp_path, monkeypatch, capsys, lang, commands):
    """qsub that reaches no scheduler (Slurm's wrappers without a controller), or no qsub at all:
    the script's lint findings, then one line, and qsub is never run."""
    monkeypatch.setenv("HANDSON_LANG", lang)
    if commands == "unreachable":
        fake = fake_commands(tmp_path / "bin", qsub=NO_CONTROLLER, qstat=NO_CONTROLLER)
        monkeypatch.setenv("PATH", path_env(fake)["PATH"])
    else:
        (tmp_path / "empty").mkdir()
        monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    script = student_job_script(tmp_path / "task")
    assert notebook.run_on_scheduler(script, timeout=1) is None
    out = capsys.readouterr().out
    assert out.splitlines() == [NO_SCHEDULER_LINE[lang]], out
    if commands == "unreachable":
        assert calls(tmp_path / "bin", "qsub") == [] and len(calls(tmp_path / "bin", "qstat")) == 1


def test_the_notebook_lints_first_and_submits_no_placeholder_group(tmp_path, monkeypatch, capsys):
    """Where a scheduler answers, the placeholder group is the error it is before any qsub."""
    fake = fake_commands(tmp_path / "bin", qsub="echo 4242.localhost",
                         qstat=f"printf '{RUNNING.format(jobid=4242)}'", qdel="exit 0")
    monkeypatch.setenv("PATH", path_env(fake)["PATH"])
    script = student_job_script(tmp_path / "task", group="gt00")
    assert notebook.run_on_scheduler(script, timeout=1) is None
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("run_multi_gpu_training.sh:10: error: group `gt00` is a placeholder"), lines
    assert lines[-1] == "Fix the errors above (`handson jobscript lint`) before submitting.", lines
    assert calls(fake, "qsub") == []


def test_the_notebook_cancels_the_job_it_stopped_waiting_for(scheduler, capsys):
    fake, script = scheduler
    assert notebook.run_on_scheduler(script, timeout=1) is None
    assert calls(fake, "qdel") == ["4242.localhost"]
    out = capsys.readouterr().out
    assert "no output after 1 s" in out
    assert "job 4242.localhost: cancelled with `qdel 4242.localhost` (gave up waiting)" in out, out


def test_the_notebook_cancels_its_job_on_an_interrupt(scheduler, monkeypatch, capsys):
    fake, script = scheduler

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(jobs, "wait_for_output", interrupted)
    with pytest.raises(KeyboardInterrupt):
        notebook.run_on_scheduler(script, timeout=60)
    assert calls(fake, "qdel") == ["4242.localhost"]
    assert "cancelled with `qdel 4242.localhost` (interrupted)" in capsys.readouterr().out


def test_the_notebook_cancels_its_job_when_qstat_fails(scheduler, capsys):
    fake, script = scheduler
    # The job's output is there (Slurm writes it while the job runs), and qstat stops answering.
    fake_commands(fake, qsub='touch "$PWD/multi_gpu.o4242"; echo 4242', qstat=f"""
if [ "$(wc -l < "{fake}/qstat.calls")" -gt 1 ]; then echo "Problem loading jobs." >&2; exit 8; fi""")
    assert notebook.run_on_scheduler(script, timeout=60) is None
    out = capsys.readouterr().out
    assert "job 4242: the scheduler does not answer: `qstat 4242` failed" in out, out
    assert "Problem loading jobs." in out
    assert calls(fake, "qdel") == ["4242"]
    assert "cancelled with `qdel 4242`" in out


def test_a_failed_qdel_is_said_with_what_to_do(scheduler, capsys):
    fake, script = scheduler
    fake_commands(fake, qdel='echo "scancel: error: Kill job error on job id 4242" >&2; exit 1')
    assert notebook.run_on_scheduler(script, timeout=1) is None
    out = capsys.readouterr().out
    assert "`qdel 4242.localhost` failed (exit 1: scancel: error: Kill job error" in out, out
    assert "cancel it by hand" in out


def test_an_experiment_on_the_cluster_cancels_its_job_on_an_interrupt(tmp_path, monkeypatch, capsys):
    cancelled = []
    monkeypatch.setattr(jobs, "qsub", lambda script, cwd, *args, **kwargs: "77")
    monkeypatch.setattr(jobs, "qdel", lambda jobid, env=None: cancelled.append(jobid) or "")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(jobs, "wait_for_output", interrupted)
    with pytest.raises(KeyboardInterrupt):
        jobs.run_mpi_job(2, ["-c", "pass"], 2, workdir=tmp_path)
    assert cancelled == ["77"]
    assert "job 77: cancelled with `qdel 77` (interrupted)" in capsys.readouterr().err


def test_a_watchdogs_sigterm_cancels_the_job_and_still_ends_the_process(tmp_path):
    fake = fake_commands(tmp_path / "bin", qdel="exit 0")
    waiting = tmp_path / "waiting"
    code = ("import pathlib, time\n"
            "from handson_lib.sites import jobs\n"
            "with jobs.cancelled_unless_done('31'):\n"
            f"    pathlib.Path({str(waiting)!r}).touch()\n"
            "    time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], env=path_env(fake), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not waiting.exists():     # (a process that never gets there: pytest's timeout)
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.terminate()
    out, err = proc.communicate(timeout=30)
    assert calls(fake, "qdel") == ["31"]
    assert "job 31: cancelled with `qdel 31` (stopped by SIGTERM)" in err, err
    assert proc.returncode == -signal.SIGTERM, "the process still ends as SIGTERM ends it"


def test_a_job_seen_done_is_not_cancelled(monkeypatch):
    cancelled = []
    monkeypatch.setattr(jobs, "qdel", lambda jobid, env=None: cancelled.append(jobid) or "")
    with jobs.cancelled_unless_done("5") as job:
        job.done = True
    assert cancelled == []
    with pytest.raises(RuntimeError), jobs.cancelled_unless_done("6", say=lambda text: None):
        raise RuntimeError("boom")
    assert cancelled == ["6"]


# ----------------------------------------------------------------------------- up on a half-dead cluster


class FakeCluster:
    """Daemons as pids in a set (alive) and a fake `slurm`: what `up` starts, cancels and tears down."""

    def __init__(self, monkeypatch, tmp_path, nodes=("n1", "n2"), alive=(), jobs_queued=("7", "8")):
        self.p = cluster.Paths(tmp_path / "state")
        for sub in ("log", "munge"):
            (self.p.root / sub).mkdir(parents=True, exist_ok=True)
        # The nodes and the local site's queues as partitions: the cluster `up` was asked for.
        self.p.conf.write_text("".join(f"NodeName={n} NodeAddr=127.0.0.1\n" for n in nodes)
                               + "".join(f"PartitionName={q} Nodes=ALL\n" for q in cluster.SITE.queues))
        self.labels = {"munged": self.p.munge_pid, "slurmctld": self.p.ctld_pid,
                       **{f"slurmd -N {n}": self.p.slurmd_pid(n) for n in nodes}}
        self.alive, self.started, self.commands, self.downs = set(), [], [], []
        self.next_pid = 1000
        for label in alive:
            self._start(label)
        self.jobs = list(jobs_queued)
        monkeypatch.setenv("HANDSON_CLUSTER_DIR", str(self.p.root))
        monkeypatch.setattr(cluster_daemons, "is_root", lambda: True)
        monkeypatch.setattr(cluster_daemons, "ensure_installed", lambda out: False)
        monkeypatch.setattr(cluster_config, "write_config", lambda p, nodes, link=None, site=None: None)
        monkeypatch.setattr(cluster_daemons, "uts_namespaces_work", lambda: False)
        monkeypatch.setattr(cluster_daemons, "port_free", lambda port: True)
        monkeypatch.setattr(cluster_daemons, "cluster_processes", lambda p=None: [])
        monkeypatch.setattr(cluster_daemons, "pid_alive", lambda pid, name=None: pid in self.alive)
        monkeypatch.setattr(cluster_daemons, "run_daemon", self._run_daemon)
        monkeypatch.setattr(cluster_daemons, "slurm", self._slurm)
        monkeypatch.setattr(cluster_lifecycle, "down", lambda out=print, timeout=20: self.downs.append(1) or 0)
        monkeypatch.setattr(network, "existing_namespaces", lambda: [])

    def _start(self, label):
        self.next_pid += 1
        path = self.labels.get(label) or self.p.slurmd_pid(label.split()[-1])
        path.write_text(f"{self.next_pid}\n")
        self.alive.add(self.next_pid)
        if label == "munged":
            self.p.munge_socket.touch()

    def _run_daemon(self, cmd, p, log_name, preexec_fn=None, timeout=30):
        label = {"slurmctld": "slurmctld", "munged": "munged"}.get(log_name, log_name.replace("-", " -N "))
        self.started.append(label)
        self._start(label)

    def _slurm(self, cmd, p=None, timeout=30, check=False):
        self.commands.append(cmd)
        out = {"ping": "Slurmctld(primary) at localhost is UP\n",
               "squeue": "".join(f"{j}\n" for j in self.jobs),
               "sinfo": "n1 alloc\nn2 idle\nn3 idle\n"}
        key = "ping" if cmd[:2] == ["scontrol", "ping"] else cmd[0]
        return subprocess.CompletedProcess(cmd, 0, out.get(key, ""), "")


ALL = ("munged", "slurmctld", "slurmd -N n1", "slurmd -N n2")


@pytest.mark.parametrize("dead", [["slurmctld"], ["slurmd -N n1"], ["munged", "slurmctld", "slurmd -N n2"]])
def test_up_on_a_half_dead_cluster_starts_what_died_and_keeps_the_jobs(monkeypatch, tmp_path, dead):
    fake = FakeCluster(monkeypatch, tmp_path, alive=[d for d in ALL if d not in dead])
    said = []
    assert cluster.up(2, out=said.append) == 0
    assert fake.started == dead
    assert not fake.downs, "up must not tear a running cluster down"
    assert not [c for c in fake.commands if c[0] in ("scancel", "qdel")], "no job is cancelled"
    assert re.fullmatch(rf"the cluster was partly down: restarted {', '.join(dead)} in [\d.]+ s; "
                        rf"2 job\(s\) kept: 7 8 \(logs in {fake.p.log}\)", said[0]), said[0]


def test_up_on_a_running_cluster_starts_nothing(monkeypatch, tmp_path):
    fake = FakeCluster(monkeypatch, tmp_path, alive=ALL)
    said = []
    assert cluster.up(2, out=said.append) == 0
    assert fake.started == [] and not fake.downs
    assert said[0] == "the cluster is already up (2 nodes)"
    assert ["scontrol", "reconfigure"] in fake.commands


def test_up_with_every_daemon_dead_but_jobs_running_keeps_them(monkeypatch, tmp_path):
    fake = FakeCluster(monkeypatch, tmp_path)
    monkeypatch.setattr(cluster_daemons, "job_steps", lambda p: ["a slurmstepd"])
    said = []
    assert cluster.up(2, out=said.append) == 0
    assert fake.started == list(ALL) and not fake.downs
    assert not [c for c in fake.commands if c[0] == "scancel"]
    assert "2 job(s) kept: 7 8" in said[0]


def test_up_after_a_reboot_cancels_the_jobs_whose_processes_are_gone(monkeypatch, tmp_path):
    fake = FakeCluster(monkeypatch, tmp_path)
    said = []
    assert cluster.up(2, out=said.append) == 0
    assert ["scancel", "7", "8"] in fake.commands
    assert "cancelled 2 job(s) left from before the restart: 7 8" in said


def test_up_with_another_node_count_restarts_all_and_says_it_cancels_the_jobs(monkeypatch, tmp_path):
    fake = FakeCluster(monkeypatch, tmp_path, alive=ALL)
    said = []
    assert cluster.up(3, out=said.append) == 0
    assert fake.downs == [1]
    assert said[0] == "restarting the cluster: the node count, the link or the site's queues changed; this cancels 2 job(s): 7 8 ..."


def test_status_of_a_partly_down_cluster_says_up_keeps_the_jobs(monkeypatch, tmp_path):
    FakeCluster(monkeypatch, tmp_path, alive=[d for d in ALL if d != "slurmd -N n2"])
    said = []
    assert cluster.status(out=said.append) == 1
    assert said[-1] == ("cluster partly down: run `handson cluster up` (it restarts the daemons that "
                        "stopped and keeps the jobs)")


def test_the_clusters_qsub_hands_abci_group_line_to_slurm_as_an_account(tmp_path):
    """ABCI 3.0's `#PBS -P GROUP`: sbatch's #PBS reader refuses -P, so the cluster's qsub hands
    Slurm's wrapper a copy of the script (same name) with `#PBS -A GROUP`; every other script,
    and every argument, as given."""
    torque = tmp_path / "torque-qsub"
    seen = tmp_path / "seen"
    torque.write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" > {seen}/args\ncp "${{@: -1}}" {seen}/script\necho 42\n')
    torque.chmod(0o755)
    seen.mkdir()
    shim = tmp_path / "qsub"
    shim.write_text(cluster_config.render_qsub_shim(str(torque)))
    shim.chmod(0o755)
    abci = tmp_path / "run_multi_node_training.sh"
    abci.write_text("#!/bin/bash\n#PBS -q rt_HF\n#PBS -P gab12345\n#PBS -l select=2\necho '#PBS -P kept in a command'\n")
    out = subprocess.run([str(shim), "-j", "oe", str(abci)], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "42", out.stderr
    args = (seen / "args").read_text().splitlines()
    assert args[:2] == ["-j", "oe"] and Path(args[2]).name == abci.name and Path(args[2]) != abci
    assert not Path(args[2]).exists()                                   # the copy is removed
    assert (seen / "script").read_text() == abci.read_text().replace("#PBS -P gab12345", "#PBS -A gab12345")
    miyabi = tmp_path / "run_multi_gpu_training.sh"
    miyabi.write_text("#!/bin/bash\n#PBS -q debug-g\n#PBS -W group_list=gc64\n")
    subprocess.run([str(shim), str(miyabi)], check=True, capture_output=True, cwd=tmp_path)
    assert (seen / "args").read_text().splitlines() == [str(miyabi)]
