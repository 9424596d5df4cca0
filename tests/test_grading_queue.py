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
