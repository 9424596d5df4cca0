"""The classroom's grading service without a hub (quick tier): its queue's store and fairness, the
phases a student reads, who may see what on its page, the names it queues from the exchange, and
the service's worker following jobs through a scripted launcher (a restart in the middle).

The service with a hub, Chromium and real gradings: tests/test_grade_on_submit.py (system tier).
"""

import json
import types
from pathlib import Path

import pytest

from handson_lib.classroom import grading_pages, grading_queue, grading_service
from handson_lib.classroom.grading_queue import (FAILED, GRADED, GRADING, QUEUED, REFUSED, RELEASED, SUPERSEDED,
                                                 Store, choose, places)

STAMP = "2026-11-28 04:00:00.000000 UTC"


@pytest.fixture
def store(tmp_path):
    made = Store(tmp_path / "queue.sqlite")
    yield made
    made.close()


def submit(store, student, at, assignment="task1", n=None):
    name = f"{student}+{assignment}+{STAMP}+{n if n is not None else at}"
    assert store.add(name, student, assignment, STAMP, at - 0.5, at)
    return name


def states(store, student):
    return [r.state for r in store.of_student(student)]


# ----------------------------------------------------------------------------- the store

def test_the_latest_submission_counts_and_a_name_is_queued_once(store):
    first = submit(store, "alice", 1.0)
    submit(store, "alice", 2.0)
    assert not store.add(first, "alice", "task1", STAMP, 0.0, 3.0)    # seen again after a restart: nothing new
    assert states(store, "alice") == [QUEUED, SUPERSEDED]
    assert [r.student for r in store.queued()] == ["alice"]


def test_a_newer_submission_waits_for_the_grading_in_flight_and_keeps_it(store):
    submit(store, "alice", 1.0)
    job = store.add_job("task1", lambda n: f"/jobs/{n}", "machine", ["alice"], 1.5)
    store.start([r.id for r in store.queued()], job.number, 1.5)
    submit(store, "alice", 2.0)   # while the first grades: it is not superseded (it is not queued)
    assert states(store, "alice") == [QUEUED, GRADING]
    assert choose(store.queued(), {"alice"}, 4, {}, 0) == []   # one grading per student at a time
    assert store.graded(job.number, "alice", 7.0, 7.0, {"nb": {"c": [7.0, 7.0]}}, "graded", 3.0)
    assert not store.graded(job.number, "alice", 7.0, 7.0, {}, "graded", 4.0)   # taken once
    assert states(store, "alice") == [QUEUED, GRADED]


def test_a_job_that_dies_sends_its_student_back_to_the_queue_in_place_then_fails_after_the_last_try(store):
    submit(store, "alice", 1.0)
    submit(store, "bob", 2.0)
    for attempt in (1, 2, 3):
        job = store.add_job("task1", str, "machine", ["alice"], 3.0)
        store.start([store.latest("alice", "task1").id], job.number, 3.0)
        state = store.back_to_queue(job.number, "alice", "the node died", most_tries=3)
        if attempt < 3:
            assert state == QUEUED
            assert [r.student for r in store.queued()] == ["alice", "bob"]   # its place kept
    assert state == FAILED and "sent to 3 job(s)" in store.latest("alice", "task1").status


def test_a_job_that_dies_after_a_newer_submission_arrived_grades_the_newer_one(store):
    submit(store, "alice", 1.0)
    job = store.add_job("task1", str, "machine", ["alice"], 1.5)
    store.start([store.latest("alice", "task1").id], job.number, 1.5)
    newer = submit(store, "alice", 2.0)
    assert store.back_to_queue(job.number, "alice", "the node died", 3) == SUPERSEDED
    assert [r.name for r in store.queued()] == [newer]


def test_a_refused_folder_is_kept_under_who_made_it_and_supersedes_nothing(store):
    mine = submit(store, "alice", 1.0)
    assert store.refuse_unseen("alice+task1+x+forged", "mallory", "task1", "another's name", 2.0)
    assert [r.name for r in store.queued()] == [mine]
    assert states(store, "mallory") == [REFUSED] and states(store, "alice") == [QUEUED]


def test_a_regrade_queues_the_latest_graded_submission_again_and_does_not_count_for_the_limit(store):
    submit(store, "alice", 1.0)
    assert store.regrade("alice", "task1", 2.0) is None   # nothing graded yet
    job = store.add_job("task1", str, "machine", ["alice"], 1.0)
    store.start([store.latest("alice", "task1").id], job.number, 1.0)
    store.graded(job.number, "alice", 3.0, 7.0, {}, "graded", 1.5)
    assert store.regrade("alice", "task1", 2.0)
    row = store.queued()[0]
    assert row.regrade and row.stamp == STAMP
    assert choose(store.queued(), set(), 4, {"alice": 99}, per_hour=1) == [row]


# ----------------------------------------------------------------------------- fairness

def rows_of(*students):
    return [types.SimpleNamespace(id=i, student=s, regrade=0) for i, s in enumerate(students)]


def test_a_flood_delays_nobody_by_more_than_one_grading():
    """A student who submits 20 times has one submission queued (the latest) and at most one in
    flight: a classmate who submits once, after the flood began, is next."""
    store = Store(":memory:")
    for k in range(20):
        submit(store, "flooder", float(k), n=k)
        if k == 1:
            submit(store, "classmate", 1.5)
    queued = store.queued()
    assert [r.student for r in queued] == ["classmate", "flooder"]
    first = choose(queued, set(), 1, {}, 0)
    assert [r.student for r in first] == ["classmate"]
    # the flooder grading, the classmate's next submission is still first come
    assert [r.student for r in choose(rows_of("flooder", "classmate"), {"flooder"}, 1, {}, 0)] == ["classmate"]


def test_the_number_grading_at_once_does_not_depend_on_the_queues_length():
    for length in (3, 40, 400):
        chosen = choose(rows_of(*(f"s{i}" for i in range(length))), set(), 4, {}, 0)
        assert len(chosen) == 3 if length == 3 else len(chosen) == 4


def test_the_hourly_limit_holds_a_student_and_the_others_move_up():
    queued = rows_of("alice", "bob", "carol")
    assert [r.student for r in choose(queued, set(), 4, {"alice": 5}, per_hour=5)] == ["bob", "carol"]
    assert [r.student for r in choose(queued, set(), 4, {"alice": 5}, per_hour=0)] == ["alice", "bob", "carol"]
    found = places(queued, {"bob"}, {"alice": 5}, per_hour=5)
    assert found == {0: (None, "limit"), 1: (None, "in_flight"), 2: (1, None)}


def test_the_phases_say_when_each_step_happened():
    row = types.SimpleNamespace(stamp_time=10.0, seen=11.0, started=20.0, graded=None, released=None)
    assert grading_queue.phases(row) == [("submitted", 10.0), ("queued", 11.0), ("grading", 20.0), ("graded", None),
                                         ("released", None)]


# ----------------------------------------------------------------------------- who sees what

STUDENT = {"kind": "user", "name": "student01"}
STAFF = {"kind": "user", "name": "instructor"}


def test_a_student_sees_their_own_state_and_never_anothers():
    assert grading_pages.whose(STUDENT) == "student01"
    assert grading_pages.whose(STUDENT, "student01") == "student01"
    with pytest.raises(grading_pages.Forbidden):
        grading_pages.whose(STUDENT, "student02")
    with pytest.raises(grading_pages.Forbidden):   # a service's token is nobody's submissions
        grading_pages.whose({"kind": "service", "name": "instructor"})
    assert grading_pages.whose(STAFF) is None and grading_pages.whose(STAFF, "student02") == "student02"
    assert not grading_pages.is_staff({"kind": "user", "name": "student01"})


def test_the_student_page_shows_the_phases_place_score_and_feedback_of_their_submissions_only(store):
    submit(store, "student01", 1.0)
    submit(store, "student02", 2.0)
    job = store.add_job("task1", str, "machine", ["student02"], 3.0)
    store.start([store.latest("student02", "task1").id], job.number, 3.0)
    store.graded(job.number, "student02", 5.0, 7.0, {"01": {"task1_correctness": [4.0, 4.0]}}, "graded", 4.0)
    store.released(store.latest("student02", "task1").id, 5.0)
    found = places(store.queued(), set(), {}, 0)
    one = grading_pages.student_page("student01", store.of_student("student01"), found, {})
    assert "queued: place 1" in one and "student02" not in one
    two = grading_pages.student_page("student02", store.of_student("student02"), found, {"task1": ["01_multi_gpu.html"]})
    assert "5 / 7" in two and "task1_correctness 4/4" in two and "feedback/task1/01_multi_gpu.html" in two
    for phase in ("submitted", "queued", "grading started", "graded", "feedback released"):
        assert phase in two, phase


def test_the_page_speaks_the_class_language(store, monkeypatch):
    monkeypatch.setenv("HANDSON_LANG", "ja")
    submit(store, "student01", 1.0)
    text = grading_pages.student_page("student01", store.of_student("student01"),
                                      places(store.queued(), set(), {}, 0), {})
    assert "提出" in text and "キュー" in text and "queued:" not in text, text


def test_what_a_student_wrote_is_text_on_the_page(store):
    """A status holds what a student's code printed: it is escaped, never markup on the hub's origin."""
    submit(store, "student01", 1.0)
    store.refuse(store.latest("student01", "task1").id, "<script>alert(1)</script>")
    text = grading_pages.student_page("student01", store.of_student("student01"), {}, {})
    assert "<script>alert" not in text and "&lt;script&gt;" in text


# ----------------------------------------------------------------------------- what the exchange holds

def test_only_the_students_own_folders_of_released_assignments_are_queued():
    students, released = {"student01", "student02"}, {"task1"}
    ok = grading_service.parse_inbound_name(f"student01+task1+{STAMP}+abc")
    assert ok[:3] == ("student01", "task1", STAMP)
    assert grading_service.refusal(ok, "student01", True, students, released) is None
    assert "another's name" in grading_service.refusal(ok, "student02", True, students, released)
    assert "not a folder" in grading_service.refusal(ok, "student01", False, students, released)
    assert "not an assignment released" in grading_service.refusal(
        grading_service.parse_inbound_name(f"student01+task9+{STAMP}+x"), "student01", True, students, released)
    for name in ("student01+task1+yesterday+x", "student01+task1", "a+b+c+d+e"):
        assert grading_service.parse_inbound_name(name) is None, name


# ----------------------------------------------------------------------------- the worker, with a scripted launcher

class ScriptedMachine:
    """Jobs that return every student's result on their second look (a result as a node writes it),
    a student of `slow` on the sixth (the job runs until then)."""
    local, pbs, nodes = True, False, []

    def __init__(self):
        self.jobs, self.sent, self.slow = {}, [], set()

    def usable_hosts(self, excluded):
        return []

    def queue_for(self, seconds, wanted=None):
        return "this-machine", 600

    def submit(self, script, cwd):
        students = json.loads((Path(cwd) / "job.json").read_text())["students"]
        jobid = f"pid:{len(self.jobs) + 1}:0"
        self.jobs[jobid] = {"folder": Path(cwd), "students": students, "looks": 0}
        self.sent += students
        return jobid

    def state(self, jobid):
        job = self.jobs[jobid]
        job["looks"] += 1
        if job["looks"] < 2:
            return "running", "running"
        (job["folder"] / "results").mkdir(exist_ok=True)
        later = [s for s in job["students"] if s in self.slow and job["looks"] < 6]
        for student in set(job["students"]) - set(later):
            (job["folder"] / "results" / f"{student}.json").write_text(json.dumps({
                "student": student, "node": "vm", "status": "graded", "seconds": 1.0, "parts": [],
                "grades": {"01": {"c": [1.0, 1.0]}}, "comments": {}, "penalties": {}, "files": {}}))
        return ("running", "running") if later else ("done", "exit 0")

    def cancel(self, jobid):
        return ""


@pytest.fixture
def worker(tmp_path, monkeypatch):
    """A grading service on a folder of its own: the exchange's inbound/, the course, no hub; nbgrader's
    steps and the trusted writer replaced by records of their calls."""
    from handson_lib.autograder import cluster_grading, returned_results
    from handson_lib.classroom.layout import Layout
    lay = Layout(tmp_path)
    inbound = lay.exchange / "handson-distributed-dl" / "inbound"
    inbound.mkdir(parents=True)
    lay.course.mkdir()
    machine, calls = ScriptedMachine(), {"written": [], "collected": [], "released": []}
    monkeypatch.setattr(grading_service.GradingService, "scheduler", lambda self: ("machine", machine, None, 2))
    monkeypatch.setattr(grading_service.grading_scheduler, "ThisMachine", lambda site: machine)
    monkeypatch.setattr(grading_service.GradingService, "class_students", lambda self: {"alice", "bob", "carol"})
    monkeypatch.setattr(grading_service.nbgrader_setup, "released", lambda lay: ["task1"])
    monkeypatch.setattr(grading_service, "owner_of", lambda info: info.st_mode and OWNERS[info.st_ino])
    monkeypatch.setattr(returned_results, "expected_cells", lambda course, assignment: {"01": {"c": 1.0}})
    monkeypatch.setattr(cluster_grading, "job_course", lambda course, target, assignment, students:
                        Path(target).mkdir(parents=True))
    monkeypatch.setattr(returned_results, "write_result", lambda result, *a: calls["written"].append(result["student"]))
    monkeypatch.setattr(grading_service, "give_to_instructor", lambda *paths: None)
    monkeypatch.setattr(grading_service, "scores", lambda course, assignment: {})
    monkeypatch.setattr(grading_service.GradingService, "report",
                        lambda self, assignment, result, graded: {"score": 1.0, "max_score": 1.0, "status": "graded"})

    def steps(self, step, assignment, students):
        calls["collected" if step == "collect" else "released"].extend(students)
        if step == "feedback":
            return {s: None for s in students}
        latest = {}
        for name in sorted(p.name for p in inbound.iterdir()):
            latest[name.split("+")[0]] = name.split("+")[2]
        return {s: {"collected": latest.get(s), "refused": {}} for s in students}
    monkeypatch.setattr(grading_service.GradingService, "steps", steps)
    started = grading_service.GradingService(lay, say=lambda *a: None)
    started.inbound, started.machine_scripted, started.calls = inbound, machine, calls
    yield started
    started.store.close()


OWNERS = {}


def hand_in(service, student, k, owner=None):
    folder = service.inbound / f"{student}+task1+2026-11-28 04:00:{k:02d}.000000 UTC+r{k}"
    folder.mkdir()
    OWNERS[folder.stat().st_ino] = owner or student
    return folder.name


def test_the_worker_grades_each_latest_submission_once_across_a_restart(worker, tmp_path):
    from handson_lib.classroom.layout import Layout
    hand_in(worker, "alice", 1)
    hand_in(worker, "bob", 2)
    worker.tick()                            # queued, collected, sent: one job for both
    assert worker.machine_scripted.sent == ["alice", "bob"]
    # The service dies here and the hub starts it again: the job is followed, not sent again.
    again = grading_service.GradingService(Layout(tmp_path), say=lambda *a: None)
    again.inbound = worker.inbound
    for _ in range(3):
        again.tick()
    assert worker.machine_scripted.sent == ["alice", "bob"]   # nobody graded twice
    assert sorted(worker.calls["written"]) == ["alice", "bob"] and sorted(worker.calls["released"]) == ["alice", "bob"]
    assert [r.state for r in again.store.of_student("alice")] == [RELEASED]


def test_the_worker_queues_a_flood_as_one_and_anothers_name_not_at_all(worker):
    for k in range(20):
        hand_in(worker, "carol", k)
    forged = hand_in(worker, "alice", 30, owner="carol")   # carol hands in under alice's name
    hand_in(worker, "bob", 40)
    worker.scan()
    assert [(r.student, r.state) for r in worker.store.queued()] == [("carol", QUEUED), ("bob", QUEUED)]
    assert worker.store.queued()[0].name.endswith("+r19")   # the latest of the flood
    refused = [r for r in worker.store.of_student("carol") if r.name == forged]
    assert refused and refused[0].state == REFUSED and "another's name" in refused[0].status
    assert worker.store.of_student("alice") == []


def test_a_submission_handed_in_again_before_it_is_collected_gives_way_to_the_newer_one(worker):
    """The collect takes the student's newest submission: the one queued earlier is superseded (not
    refused), and the newer one is graded, once."""
    hand_in(worker, "alice", 1)
    worker.scan()
    hand_in(worker, "alice", 2)            # handed in again between the look and the collect
    worker.dispatch()
    assert [r.state for r in worker.store.of_student("alice")] == [SUPERSEDED]
    for _ in range(4):
        worker.tick()
    assert [r.state for r in worker.store.of_student("alice")] == [RELEASED, SUPERSEDED]
    assert worker.machine_scripted.sent == ["alice"]


def test_a_result_of_an_older_job_is_not_taken_again_once_its_student_is_sent_anew(worker):
    """alice is graded in a job that still grades bob when she hands in again: her newer submission
    goes to a job of its own, and the first job's result of her is not taken for it (it was: the
    newer job then ended as if it had returned her, and her newer submission stayed 'grading')."""
    worker.machine_scripted.slow.add("bob")
    hand_in(worker, "alice", 1)
    hand_in(worker, "bob", 2)
    for _ in range(4):
        worker.tick()                        # alice's result back and released; bob's job still runs
    assert [r.state for r in worker.store.of_student("alice")] == [RELEASED]
    hand_in(worker, "alice", 3)
    for _ in range(6):
        worker.tick()
    assert [r.state for r in worker.store.of_student("alice")] == [RELEASED, RELEASED]
    assert worker.calls["written"].count("alice") == 2   # once per submission
    assert [r.state for r in worker.store.of_student("bob")] == [RELEASED]
    assert [job for (job,) in worker.store.db.execute("SELECT ended FROM jobs")] == ["returned every student"] * 2


# ----------------------------------------------------------------------------- the page's handlers, without a hub

@pytest.fixture
def pages(tmp_path, store):
    """The service's tornado application on a free port; the hub's user is the X-Test-User header."""
    import asyncio
    import threading
    from tornado import httpserver, ioloop, testing
    from handson_lib.classroom.layout import Layout
    lay = Layout(tmp_path)
    feedback = lay.course / "feedback" / "student02" / "task1"
    feedback.mkdir(parents=True)
    (feedback / "01_multi_gpu.html").write_text("<html>student02's feedback <script>steal()</script></html>")
    sock, port = testing.bind_unused_port()
    original = grading_pages._Base.get_current_user
    grading_pages._Base.get_current_user = lambda self: (
        {"kind": "user", "name": self.request.headers["X-Test-User"]} if "X-Test-User" in self.request.headers else None)
    loop, ready = {}, threading.Event()

    def run():
        asyncio.set_event_loop(asyncio.new_event_loop())
        server = httpserver.HTTPServer(grading_pages.application(lay, Store(tmp_path / "queue.sqlite"), "/g/"))
        server.add_sockets([sock])
        loop["io"] = ioloop.IOLoop.current()
        loop["io"].add_callback(ready.set)
        loop["io"].start()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(30)
    yield f"http://127.0.0.1:{port}/g/"
    loop["io"].add_callback(loop["io"].stop)
    thread.join(5)
    grading_pages._Base.get_current_user = original


def fetch_as(url, user, data=None):
    import urllib.error
    import urllib.request
    request = urllib.request.Request(url, data=data, headers={"X-Test-User": user, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_the_handlers_refuse_anothers_state_feedback_and_the_staffs_actions(pages, store):
    submit(store, "student01", 1.0)
    submit(store, "student02", 2.0)
    status, _, body = fetch_as(pages + "api/state", "student01")
    assert status == 200 and {s["student"] for s in json.loads(body)["submissions"]} == {"student01"}
    for path in ("?student=student02", "api/state?student=student02", "feedback/task1/01_multi_gpu.html?student=student02"):
        assert fetch_as(pages + path, "student01")[0] == 403, path
    assert fetch_as(pages + "feedback/task1/01_multi_gpu.html", "student01")[0] == 404   # none of theirs
    assert fetch_as(pages + "api/regrade", "student01", b"assignment=task1&student=*")[0] == 403
    assert fetch_as(pages + "plot/task1.png", "student01")[0] == 403
    status, headers, body = fetch_as(pages + "feedback/task1/01_multi_gpu.html", "student02")
    assert status == 200 and b"student02's feedback" in body
    assert headers["Content-Security-Policy"].startswith("sandbox") and headers["X-Content-Type-Options"] == "nosniff"
    assert fetch_as(pages + "feedback/task1/..%2F..%2Fstudent01%2Ftask1%2Fx.html", "student02")[0] == 404
    status, _, body = fetch_as(pages + "api/state", "instructor")
    assert status == 200 and json.loads(body)["staff"] and len(json.loads(body)["submissions"]) == 2
