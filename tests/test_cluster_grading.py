"""`handson autograde --on-cluster`: a class graded as jobs of the local Slurm cluster, a node killed
half-way, Ctrl-C and --resume, and the same student graded on two nodes; and, without a cluster,
the submitting grader's checks of what a node returns (autograder.returned_results).
"""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest

from handson_lib.autograder import cluster_grading, returned_results, synthetic_class
from handson_lib.autograder.grading_report import read_report
from handson_lib.authoring import course_source
from handson_lib.autograder import nbgrader_course
from conftest import ROOT, VENV_BIN

SETUP = synthetic_class.CLASSES["setup"]
EXPECTED = {"00_setup": {"q1_total_batch_test": 1.0, "q2_parallelism_test": 1.0, "q3_lr_test": 1.0}}
NODES = 3


# ----------------------------------------------------------------------------- what a node returns

def good_result(student="alice", **changes):
    data = {"student": student, "node": "n1", "status": "graded", "seconds": 12.5,
            "parts": [{"part": "notebook: a run", "seconds": 3.0}],
            "grades": {"00_setup": {"q1_total_batch_test": [1.0, 1.0], "q2_parallelism_test": [0.0, 1.0],
                                    "q3_lr_test": [1.0, 1.0]}},
            "comments": {}, "penalties": {}, "files": {}}
    data.update(changes)
    return data


def test_a_good_result_is_taken():
    result = returned_results.checked(good_result(), "alice", ["alice", "bob"], EXPECTED)
    assert result["grades"]["00_setup"]["q2_parallelism_test"] == [0.0, 1.0]
    assert result["node"] == "n1"


@pytest.mark.parametrize("change, words", [
    ({"student": "bob"}, "a result for 'bob'"),                                    # another student's row
    ({"grades": {"00_setup": {"q1_total_batch_test": [5.0, 5.0], "q2_parallelism_test": [0.0, 1.0],
                              "q3_lr_test": [1.0, 1.0]}}}, "maximum"),              # a raised maximum
    ({"grades": {"00_setup": {"q1_total_batch_test": [2.0, 1.0], "q2_parallelism_test": [0.0, 1.0],
                              "q3_lr_test": [1.0, 1.0]}}}, "outside"),             # over the maximum
    ({"grades": {"00_setup": {"q1_total_batch_test": [float("nan"), 1.0], "q2_parallelism_test": [0.0, 1.0],
                              "q3_lr_test": [1.0, 1.0]}}}, "outside"),
    ({"grades": {"00_setup": {"q1_total_batch_test": [1.0, 1.0]}}}, "grade cells"),  # a cell left out
    ({"grades": {"other": {}}}, "notebooks"),
    ({"status": "nbgrader failed: x", "grades": {"00_setup": {}}}, "scores for a submission"),
    ({"seconds": -1}, "duration"),
    ({"status": "x" * 5000}, "short text"),
    ({"files": {"../../gradebook.db": "0" * 64}}, "outside the student's folder"),
    ({"files": {"/etc/passwd": "0" * 64}}, "outside the student's folder"),
    ({"penalties": {"00_setup": 7}}, "late penalty"),
])
def test_a_result_that_cannot_be_believed_is_refused(change, words):
    data = good_result(**change)
    with pytest.raises(returned_results.Refused, match=words.replace("(", r"\(")):
        returned_results.checked(data, "alice", ["alice"], EXPECTED)


def test_a_result_for_a_student_of_another_job_is_refused():
    with pytest.raises(returned_results.Refused, match="from a job that grades bob"):
        returned_results.checked(good_result(), "alice", ["bob"], EXPECTED)


def test_graded_files_come_back_only_as_declared(tmp_path):
    graded = tmp_path / "job" / "autograded"
    folder = graded / "alice" / "setup"
    folder.mkdir(parents=True)
    (folder / "00_setup.ipynb").write_text("{}")
    digest = hashlib.sha256(b"{}").hexdigest()
    course = tmp_path / "course"
    result = {"student": "alice", "files": {"00_setup.ipynb": digest}}
    returned_results.copy_graded_files(result, graded, course, "setup")
    assert (course / "autograded" / "alice" / "setup" / "00_setup.ipynb").read_text() == "{}"
    # The file changed after the node declared it: nothing is copied.
    (folder / "00_setup.ipynb").write_text('{"forged": 1}')
    shutil.rmtree(course / "autograded")
    with pytest.raises(returned_results.Refused, match="not the one the node declared"):
        returned_results.copy_graded_files(result, graded, course, "setup")
    assert not (course / "autograded" / "alice" / "setup").exists()
    # A link to a file outside (the gradebook, a solution) is no graded file.
    (folder / "00_setup.ipynb").unlink()
    (folder / "00_setup.ipynb").symlink_to(tmp_path / "secret")
    (tmp_path / "secret").write_text("{}")
    with pytest.raises(returned_results.Refused, match="not a plain file"):
        returned_results.copy_graded_files(result, graded, course, "setup")


def test_a_result_file_is_read_as_data(tmp_path):
    (tmp_path / "alice.json").write_text("[1, 2]")
    with pytest.raises(returned_results.Refused, match="not a JSON object"):
        returned_results.read_result(tmp_path / "alice.json")
    (tmp_path / "bob.json").symlink_to(tmp_path / "alice.json")
    with pytest.raises(returned_results.Refused, match="not a plain file"):
        returned_results.read_result(tmp_path / "bob.json")


# ----------------------------------------------------------------------------- on the local cluster

@pytest.fixture(scope="module")
def cluster_up(cluster_turn):
    from handson_lib.sites import cluster
    if os.geteuid() != 0:
        pytest.fail("the local cluster needs root (`handson cluster up`)")
    result = subprocess.run([str(VENV_BIN / "handson"), "cluster", "up", "--nodes", str(NODES)], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    yield
    if cluster.cluster_processes():
        subprocess.run([str(VENV_BIN / "handson"), "cluster", "down"], cwd=ROOT, capture_output=True, timeout=600)


def setup_course(folder, students, assignment="setup"):
    shutil.copy(ROOT / "course" / "nbgrader_config.py", folder)
    course_source.assemble(folder, assignments=[assignment])
    res = nbgrader_course.nbgrader("generate_assignment", assignment, "--force", course_dir=folder)
    assert res.ok, res.output
    synthetic_class.write_class(folder, assignment, students=students)
    return folder


def kill_node(node):
    """The node dies: its slurmd and every job step running on it, with all they started (also
    what left their process tree: every process carrying the job's id)."""
    from handson_lib import launch
    from handson_lib.sites import cluster_config, cluster_daemons, cluster_jobs
    p = cluster_config.paths()
    victims = []
    for step in cluster_daemons.job_steps(p):
        try:
            jobid = " ".join(step.cmdline()).split("[", 1)[1].split(".", 1)[0]
        except (IndexError, psutil.Error):
            continue
        if cluster_jobs.job_info(jobid).get("NodeList") == node:
            victims += [step, *step.children(recursive=True), *launch.processes_carrying("SLURM_JOB_ID", jobid)]
    pid = cluster_daemons.read_pid(p.slurmd_pid(node))
    if pid:
        victims.append(psutil.Process(pid))
    from handson_lib.autograder import sandbox
    sandbox.thaw(victims)   # a dead node's frozen kernel dies with it
    for proc in victims:
        try:
            proc.kill()
        except psutil.Error:
            pass
    return len(victims)


def first_node_with_a_result(course_dir, timeout=600):
    """The node of the first job that returned a student (heartbeat.json names it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for job in sorted(Path(course_dir).glob("cluster-grading/*/job-*")):
            if list((job / "results").glob("*.json")) and (job / "heartbeat.json").exists():
                try:
                    return json.loads((job / "heartbeat.json").read_text())["node"]
                except (OSError, ValueError, KeyError):
                    continue
        time.sleep(0.5)
    return None


@pytest.mark.scheduler
@pytest.mark.timeout(900)
def test_a_class_graded_on_the_cluster_survives_a_node_killed_half_way(cluster_up, tmp_path, monkeypatch):
    """Every score as one machine gives it (the synthetic class's expected scores); the killed
    node's students not returned yet are graded on another node, none twice in the report."""
    monkeypatch.setattr(cluster_grading, "HEARTBEAT_LIMIT", 20.0)
    students = ["correct", "wrong_q1", "skeleton", "sys_exit", "all_wrong", "tampered_test", "stashed_arguments",
                "always_equal", "huge_output"]
    course = setup_course(tmp_path, students)
    killed = {}

    def killer():
        node = first_node_with_a_result(course)
        if node:
            killed[node] = kill_node(node)
    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    printed = []
    try:
        rows, _ = cluster_grading.autograde_on_cluster("setup", course, nodes=NODES, jobs=1, timeout=300,
                                                       cell_timeout=15, print_fn=lambda l: (printed.append(l), print(l)))
    finally:
        subprocess.run([str(VENV_BIN / "handson"), "cluster", "up", "--nodes", str(NODES)], cwd=ROOT,
                       capture_output=True, timeout=600)   # the killed node back for the next test
    thread.join(5)
    assert killed, "no node was killed"
    (node, count), = killed.items()
    text = "\n".join(printed)
    assert f"no heartbeat from {node}" in text, text
    report = read_report(course, "setup")
    with open(course / "autograde_setup.csv") as f:
        assert sum(1 for _ in f) == len(students) + 1   # one row each (the header)
    for student in students:
        assert report[student]["score"] == SETUP[student].expected, (student, report[student])
    regraded = [r for r in rows if r["graded_on"] != node]
    assert len(regraded) > len(students) // NODES, rows


@pytest.mark.scheduler
@pytest.mark.timeout(900)
def test_ctrl_c_cancels_every_job_and_resume_completes_the_class(cluster_up, tmp_path):
    from handson_lib.sites import cluster_config, cluster_daemons
    students = ["correct", "wrong_q1", "skeleton", "sys_exit", "all_wrong", "tampered_test"]
    course = setup_course(tmp_path, students)
    cmd = [str(VENV_BIN / "handson"), "autograde", "setup", "--course", str(course), "--on-cluster", "--jobs", "1",
           "--cell-timeout", "15"]
    # Unbuffered: each student's line reaches the test as it is printed, and Ctrl-C follows the first.
    # SIGINT as at a terminal: pytest-xdist's workers ignore it, and a child would inherit that.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "(on n" in line:
            break
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=300)
    text = "".join(lines) + out
    assert proc.returncode == 130, text
    assert "no job of this session is queued or running any more" in text, text
    # Every node stopped its runs and folders itself (the `stop` file), before any qdel.
    assert re.search(r"\d+ job\(s\) stopped grading by themselves; qdel for 0\b", text), text
    assert cluster_daemons.job_ids(cluster_config.paths()) == [], text
    # Nothing of the jobs runs on: no process carries their ids (a sandbox that left a job's tree).
    from handson_lib import launch
    for jobid in re.findall(r"^  job (\d+): ", text, flags=re.M):
        assert launch.processes_carrying("SLURM_JOB_ID", jobid) == [], (jobid, text)
    kept = read_report(course, "setup")
    assert 1 <= len(kept) < len(students), text
    resumed = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"--resume: {len(kept)} student(s) graded earlier are kept" in resumed.stdout
    report = read_report(course, "setup")
    assert sorted(report) == sorted(students)
    for student in students:
        assert report[student]["score"] == SETUP[student].expected, (student, report[student])


@pytest.mark.scheduler
@pytest.mark.timeout(1200)
def test_the_same_student_graded_on_two_nodes_gets_the_same_scores(cluster_up, tmp_path):
    """Fairness across nodes: one correct task2 submission handed in twice, graded by two jobs on
    two different nodes (each measuring the reference on its own node first): the same score,
    and throughput ratios within the local site's band step of each other."""
    from handson_lib.sites import table
    course = setup_course(tmp_path, ["correct", "correct-2"], assignment="task2")
    synthetic_class.write_class(course, "task2", students=["correct", "correct-2"], copies=2)
    rows, _ = cluster_grading.autograde_on_cluster("task2", course, nodes=2, jobs=1, print_fn=print)
    first, second = sorted(rows, key=lambda r: r["student"])
    assert first["graded_on"] != second["graded_on"], rows
    assert first["status"] == second["status"] == "graded", rows
    assert first["score"] == second["score"] == first["max_score"], rows
    bands = table.get_site("local").thresholds.throughput_bands
    step = bands[0][0] - bands[1][0]
    for key in ("throughput_ratio", "scaling_ratio"):
        assert first[key] is not None and second[key] is not None, (key, rows)
        assert abs(first[key] - second[key]) <= step, (key, rows)


# ----------------------------------------------------------------------------- the session's logic, with a fake scheduler

class ScriptedScheduler:
    """A scheduler whose jobs follow a script: `plan[n]` (the n-th job submitted) is (node, what
    it does): 'returns' (every student, then ends), 'dies after one' (returns its first student,
    then its heartbeat stops), 'no sandbox' (failed.json, ends), 'forges' (a score over the
    maximum)."""
    local = True

    def __init__(self, plan, nodes=("n1", "n2", "n3")):
        self.plan, self.nodes, self.jobs, self.cancelled = list(plan), list(nodes), {}, []
        self.queries, self.unanswered = 0, set()

    def queue_for(self, seconds, wanted=None):
        return "h-short", 3600

    def usable_hosts(self, excluded):
        return []

    def submit(self, script, cwd):
        jobid = str(len(self.jobs) + 1)
        node, how = self.plan[len(self.jobs)]
        self.jobs[jobid] = {"folder": Path(cwd), "node": node, "how": how, "calls": 0,
                            "students": json.loads((Path(cwd) / "job.json").read_text())["students"],
                            "script": Path(script).read_text()}
        return jobid

    def cancel(self, jobid):
        self.cancelled.append(jobid)
        self.jobs[jobid]["how"] = "cancelled"
        return ""

    def state(self, jobid):
        self.queries += 1
        if self.queries in self.unanswered:
            raise RuntimeError("slurm_load_jobs error: Unable to contact slurm controller")
        job = self.jobs[jobid]
        job["calls"] += 1
        folder, how = job["folder"], job["how"]
        (folder / "results").mkdir(exist_ok=True)
        if how == "cancelled":
            return "done", "CANCELLED"
        if how == "no sandbox":
            (folder / "failed.json").write_text(json.dumps({"node": job["node"], "why": "no bubblewrap"}))
            return "done", "FAILED"
        if how == "dies after one" and job["calls"] > 1:
            return "running", "RUNNING"   # no new heartbeat: the node is gone
        if how == "times out" and job["calls"] > 1:
            return "done", "TIMEOUT"      # past its walltime after its first student
        named = "n1\nrm -rf ~" if how == "dies, misnamed" else job["node"]
        (folder / "heartbeat.json").write_text(json.dumps({"node": named, "time": job["calls"]}))
        if how == "dies, misnamed" and job["calls"] > 1:
            return "running", "RUNNING"
        students = job["students"][:1] if how in ("dies after one", "times out") else job["students"]
        for student in students:
            data = good_result(student, node=job["node"])
            if how == "forges":
                data["grades"]["00_setup"]["q1_total_batch_test"] = [9.0, 1.0]
            if how == "huge parts" and student == job["students"][0]:
                data["parts"] = [{"part": "x" * 100, "seconds": 1.0}] * 100
            (folder / "results" / f"{student}.json").write_text(json.dumps(data))
        return ("running", "RUNNING") if how in ("dies after one", "times out") or job["calls"] == 1 \
            else ("done", "COMPLETED")


def scripted_session(tmp_path, monkeypatch, plan, students, settled=(), unanswered=()):
    import types
    monkeypatch.setattr(cluster_grading, "POLL", 0.01)
    monkeypatch.setattr(cluster_grading, "HEARTBEAT_LIMIT", 0.3)
    monkeypatch.setattr(cluster_grading, "job_course", lambda course, target, assignment, students:
                        Path(target).mkdir(parents=True))
    monkeypatch.setattr(returned_results, "expected_cells", lambda course, assignment: EXPECTED)
    monkeypatch.setattr(cluster_grading.ClusterSession, "write",
                        lambda self, job, result: self.results.__setitem__(result["student"], result))
    roll = types.SimpleNamespace(course_dir=tmp_path, assignment="setup", to_grade=list(students))
    scheduler = ScriptedScheduler(plan)
    scheduler.unanswered = set(unanswered)
    printed = []
    session = cluster_grading.ClusterSession(roll, scheduler, tmp_path / "session", {"assignment": "setup"}, 2,
                                             None, printed.append, settled=settled)
    session.spread([s for s in students if s not in settled], 2)
    session.follow()
    return session, scheduler, "\n".join(printed)


def test_a_dead_nodes_students_are_graded_elsewhere_once(tmp_path, monkeypatch):
    students = ["alice", "bob", "carol", "dave"]
    session, scheduler, text = scripted_session(
        tmp_path, monkeypatch, [("n1", "dies after one"), ("n2", "returns"), ("n3", "returns")], students)
    assert sorted(session.results) == students, text
    first_of_n1 = scheduler.jobs["1"]["students"][0]
    assert session.results[first_of_n1]["node"] == "n1"      # returned before the node died: kept
    regraded = [s for s in scheduler.jobs["1"]["students"][1:]]
    assert all(session.results[s]["node"] == "n3" for s in regraded), session.results
    assert "no heartbeat from n1" in text and "1" in scheduler.cancelled
    assert "#SBATCH --exclude=n1" in scheduler.jobs["3"]["script"]
    assert session.given_up == {}


def test_a_node_without_the_sandbox_is_left_out_and_a_forged_result_refused(tmp_path, monkeypatch):
    students = ["alice", "bob"]
    session, scheduler, text = scripted_session(
        tmp_path, monkeypatch, [("n1", "no sandbox"), ("n2", "forges"), ("n3", "returns"), ("n3", "returns")],
        students)
    assert sorted(session.results) == students, text
    assert {r["node"] for r in session.results.values()} == {"n3"}, session.results
    assert "no bubblewrap" in text and "is refused" in text, text
    assert session.failed_nodes == {"n1", "n2"}
    assert "#SBATCH --exclude=n1,n2" in scheduler.jobs["4"]["script"]


def test_a_student_no_job_returns_is_given_up_after_the_last_try(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster_grading, "MOST_TRIES", 2)
    session, scheduler, text = scripted_session(
        tmp_path, monkeypatch, [("n1", "dies after one"), ("n2", "dies after one")], ["alice", "bob"])
    # Each job returns its first student only: alice on n1; bob goes to n2 (alone), which returns him.
    assert sorted(session.results) == ["alice", "bob"], text
    session, scheduler, text = scripted_session(
        tmp_path / "again", monkeypatch, [("n1", "no sandbox"), ("n2", "no sandbox")], ["carol"])
    assert session.results == {}
    assert session.given_up["carol"].startswith("not graded:"), session.given_up
    assert "no bubblewrap" in session.given_up["carol"]


def test_a_job_past_its_walltime_has_its_other_students_graded_again(tmp_path, monkeypatch):
    students = ["alice", "bob", "carol", "dave"]
    session, scheduler, text = scripted_session(
        tmp_path, monkeypatch, [("n1", "times out"), ("n2", "returns"), ("n1", "returns")], students)
    assert sorted(session.results) == students, text
    assert "the job ended (TIMEOUT) before returning them" in text, text
    assert session.failed_nodes == set()   # the walltime is no fault of the node: it is used again
    assert "--exclude" not in scheduler.jobs["3"]["script"]


def test_a_submission_refused_before_sending_goes_to_no_job(tmp_path, monkeypatch):
    session, scheduler, text = scripted_session(tmp_path, monkeypatch, [("n1", "returns"), ("n2", "returns")],
                                                ["alice", "eve"], settled={"eve"})
    assert sorted(session.results) == ["alice"], text
    assert all("eve" not in job["students"] for job in scheduler.jobs.values()), scheduler.jobs
    assert len(scheduler.jobs) == 1


def test_a_result_too_large_costs_its_student_alone(tmp_path, monkeypatch):
    """The kernel writes its part of the profile where the submission writes: a result made too
    large by the student's work refuses that student, not the node nor the job's others."""
    monkeypatch.setattr(returned_results, "MOST_RESULT_BYTES", 4000)
    session, scheduler, text = scripted_session(tmp_path, monkeypatch, [("n1", "huge parts"), ("n2", "returns")],
                                                ["alice", "bob", "carol", "dave"])
    first = scheduler.jobs["1"]["students"][0]
    assert session.given_up[first].startswith("not graded: its result was refused"), session.given_up
    assert sorted(session.results) == sorted(set(["alice", "bob", "carol", "dave"]) - {first}), text
    assert session.failed_nodes == set() and scheduler.cancelled == [], text


def test_a_scheduler_that_misses_a_few_queries_is_asked_again(tmp_path, monkeypatch):
    session, scheduler, text = scripted_session(tmp_path, monkeypatch, [("n1", "returns"), ("n2", "returns")],
                                                ["alice", "bob"], unanswered={1, 2, 3})
    assert sorted(session.results) == ["alice", "bob"], text
    monkeypatch.setattr(cluster_grading, "QUERY_PATIENCE", 0.0)
    with pytest.raises(cluster_grading.grading_scheduler.SchedulerError, match="has not answered"):
        scripted_session(tmp_path / "silent", monkeypatch, [("n1", "returns")], ["carol"],
                         unanswered=set(range(1, 10 ** 6)))


def test_a_node_name_that_is_no_name_never_reaches_a_job_script(tmp_path, monkeypatch):
    session, scheduler, text = scripted_session(
        tmp_path, monkeypatch, [("n1", "dies, misnamed"), ("n2", "returns"), ("n3", "returns")],
        ["alice", "bob", "carol", "dave"])
    assert sorted(session.results) == ["alice", "bob", "carol", "dave"], text
    assert session.failed_nodes == set()
    assert all("rm -rf" not in job["script"] for job in scheduler.jobs.values())


# ----------------------------------------------------------------------------- issue 50: the cluster path, finished

def test_a_grading_job_is_never_requeued_by_the_scheduler_itself(tmp_path):
    """Slurm requeues a dead node's job by default and starts it again after the grader sent its
    students elsewhere: the job says no (sbatch reads #SBATCH, PBS reads -r n)."""
    from handson_lib.autograder import grading_scheduler
    script = grading_scheduler.job_script(tmp_path, "grade-setup-1", "h-short", 600).read_text()
    assert "#SBATCH --no-requeue" in script.splitlines() and "#PBS -r n" in script.splitlines()


PBSNODES = """n1
     Mom = n1.cluster
     state = free
     resources_available.ncpus = 36

n2
     Mom = n2.cluster
     state = down,offline
     resources_available.ncpus = 36

n3
     Mom = n3.cluster
     state = job-busy
"""


def test_on_pbs_a_failed_node_is_left_out_by_naming_a_usable_one(tmp_path, monkeypatch):
    """PBS Pro has no option that excludes a node: the job names one that `pbsnodes -a` lists as
    usable and that did not fail this session."""
    from handson_lib.autograder import grading_scheduler
    from handson_lib.sites import jobs, table
    assert jobs.parse_pbsnodes(PBSNODES) == ["n1", "n3"]
    monkeypatch.setattr(jobs, "pbs_nodes", lambda env=None: jobs.parse_pbsnodes(PBSNODES))
    pbs = grading_scheduler.Scheduler(False, table.get_site("reedbush"), [])
    assert pbs.pbs and pbs.usable_hosts({"n1"}) == ["n3"] and pbs.usable_hosts(set()) == []
    script = grading_scheduler.job_script(tmp_path, "grade-1", "h-short", 600, {"n1"}, host="n3").read_text()
    assert "#PBS -l select=1:host=n3" in script and "#SBATCH --exclude=n1" in script
    slurm = grading_scheduler.Scheduler(True, table.get_site("local"), ["n1", "n2"])
    assert not slurm.pbs and slurm.usable_hosts({"n1"}) == []


def test_a_jobs_course_copy_is_graded_there_whatever_root_the_course_names(tmp_path):
    """The classroom's course configuration names its own folder as nbgrader's root: a job's copy
    must not grade into (and write the gradebook of) the course it was copied from."""
    from traitlets.config.loader import PyFileConfigLoader
    course = tmp_path / "course"
    (course / "source" / "setup").mkdir(parents=True)
    (course / "submitted" / "alice" / "setup").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(f"c = get_config()\nc.CourseDirectory.root = {str(course)!r}\n")
    import sqlite3
    sqlite3.connect(course / "gradebook.db").close()
    cluster_grading.job_course(course, tmp_path / "job" / "course", "setup", ["alice"])
    config = PyFileConfigLoader("nbgrader_config.py", path=str(tmp_path / "job" / "course")).load_config()
    assert config.CourseDirectory.root == str(tmp_path / "job" / "course")


def test_a_killed_sessions_folders_are_swept_and_a_live_or_foreign_one_is_not(tmp_path, monkeypatch):
    """Before a node grades: sessions whose lock nobody holds (their grading was killed with its
    node) are removed, mounts first; a live session, a link and another account's folder stay."""
    import fcntl
    stale, live = tmp_path / "handson-autograde-stale", tmp_path / "handson-autograde-live"
    foreign = tmp_path / "handson-autograde-foreign"
    for folder in (stale, live, foreign):
        folder.mkdir()
        (folder / nbgrader_course.SESSION_LOCK).touch()
    (tmp_path / "handson-autograde-link").symlink_to(stale)
    if os.geteuid() == 0:
        os.chown(foreign, 65534, 65534)
    else:
        foreign.rename(tmp_path / "not-a-session")   # no other account's folder to make without root
    removed = []
    monkeypatch.setattr(nbgrader_course.sandbox, "remove_session", lambda folder, print_fn=print: removed.append(folder))
    with open(live / nbgrader_course.SESSION_LOCK) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert nbgrader_course.stale_sessions(tmp_path) == [stale]
        assert nbgrader_course.sweep_stale_sessions(print, tmp_path) == 1
    assert removed == [stale]


@pytest.mark.scheduler
@pytest.mark.timeout(300)
def test_slurm_takes_the_grading_jobs_as_not_requeueable(cluster_up, tmp_path):
    """Measured: Slurm's default is Requeue=1, and sbatch does not read `#PBS -r n`; the job's
    `#SBATCH --no-requeue` makes it 0."""
    from handson_lib.autograder import grading_scheduler
    from handson_lib.sites import cluster_jobs
    from handson_lib.sites.cluster_daemons import cluster_env
    script = grading_scheduler.job_script(tmp_path, "grade-requeue", "h-debug", 120)
    ours = script.read_text().replace("exec ", "sleep 20 # ")
    found = {}
    for name, text in (("ours", ours), ("without", ours.replace("#SBATCH --no-requeue\n", ""))):
        script.write_text(text)
        jobid = cluster_jobs.qsub(script, tmp_path)
        found[name] = cluster_jobs.job_info(jobid).get("Requeue")
        cluster_grading.site_jobs.qdel(jobid, env=cluster_env())
    assert found == {"ours": "0", "without": "1"}, found
