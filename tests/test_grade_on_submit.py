"""`handson classroom up --grade-on-submit`: the class graded as it submits (issue 50), system tier.

One classroom for the module (root, JupyterHub, Chromium): task1 released, the grading service on
this machine. The class submits within a minute: the first students in Chromium (Assignments tab),
the others with nbgrader's own `submit`, one of them 20 times (a flood), one a notebook that is not
JSON (it crashes nbgrader), one a notebook renamed, and one a folder in another's name. While the
first gradings run, the service is killed (SIGKILL, its page and its worker) and the hub starts it
again. Then: every student's latest submission graded once, its feedback released, the scores the
synthetic class's (what `handson autograde` gives them, tests/test_autograde.py), the pages in
Chromium (a student's own, the staff's), the attacks on the pages and the API refused, the flood
delaying nobody by more than one grading, the grades exported for Moodle and Canvas; last, the same
class graded again through the local Slurm cluster with the batch spawner.

`--grade-on-submit-class 10` runs issue 50's done-when class (2 in Chromium, 8 through nbgrader
submit) and times it against `make demo` in the same run; CI runs 4 (about 4 students' worth of
grading: see the README's "Tests").
"""

import collections
import csv
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from conftest import turn_on_the_classroom, turn_on_the_cluster
from test_classroom import (SHOTS, UI_TIMEOUT_MS, Browser, _wait, as_student, assignment_list, fetch, handson,
                            submit)
from handson_lib.autograder import synthetic_class
from handson_lib.classroom import accounts, grading_queue, hub
from handson_lib.classroom.layout import layout

pytestmark = [pytest.mark.classroom, pytest.mark.browser, pytest.mark.timeout(3600)]

TASK1 = synthetic_class.CLASSES["task1"]
#: The class, by size: (student, kind of submission, how it is handed in). The first four (CI's
#: class) hold every attack on the service: a flood, a notebook renamed, one that crashes nbgrader,
#: and (student03) a folder in another's name; the kinds that attack the grader itself are graded
#: in tests/test_hostile.py and tests/test_verdicts.py, and here in the class of 10.
CLASS = [("student01", "correct", "browser"), ("student02", "skeleton", "flood"),
         ("student03", "renamed", "submit"), ("student04", "not json", "submit"),
         ("student05", "correct", "browser"), ("student06", "patched_checks", "submit"),
         ("student07", "forged_report", "submit"), ("student08", "forged_records", "submit"),
         ("student09", "skeleton", "submit"), ("student10", "correct", "submit")]
FLOOD = 20
#: The grading service's page, and the hub's API.
PAGE = f"{hub.url({'bind': hub.DEFAULT_BIND})}/services/{hub.GRADING_SERVICE}/"


def expected(kind):
    """The scores a kind may get: the synthetic class's (the correct one's throughput point is in
    bands of a ratio measured while the rest of the system tier runs)."""
    if kind == "correct":
        return {7.0, 6.5, 6.0}
    if kind in ("not json", "renamed"):
        return {0.0}
    return {TASK1[kind].expected}


@pytest.fixture(scope="module")
def size(request):
    return request.config.getoption("grade_on_submit_class")


@pytest.fixture(scope="module")
def service_class(size, chromium):
    """The classroom up with the grading service, the class handed in, the service killed once
    while it grades; returns the facts once every student's latest submission is released."""
    if os.geteuid() != 0:
        pytest.fail("`handson classroom` needs root (Linux accounts, JupyterHub, the grading sandbox)")
    with turn_on_the_classroom():
        handson("classroom", "down", "--purge", "--export", tempfile.mkdtemp(prefix="handson-classroom-before-"))
        facts = {"demo_seconds": measure_demo() if size >= 10 else None}
        up = handson("classroom", "up", "--students", size, "--assignments", "task1", "--grade-on-submit",
                     "--grade-on", "machine", "--gradings-per-hour", 30, "--memory-per-user", 3, timeout=1800)
        assert up.returncode == 0, up.stdout + up.stderr
        lay = layout()
        _wait(login_page_answers, 60, "the hub's login page through its proxy")
        facts.update(lay=lay, passwords=accounts.read_passwords(lay.passwords), students=CLASS[:size])
        for name, _, _ in facts["students"]:
            shutil.rmtree(Path(accounts.home_of(name)) / "task1", ignore_errors=True)
        session = Browser(chromium)
        from playwright.sync_api import expect
        expect.set_options(timeout=UI_TIMEOUT_MS)
        try:
            facts["browser"] = session
            hand_in_the_class(facts)
            yield facts
        finally:
            session.close()
            handson("classroom", "down")


def login_page_answers():
    """`up` returns once the hub's API answers; its proxy may route /hub/login a moment later."""
    try:
        with urllib.request.urlopen(f"{hub.url({'bind': hub.DEFAULT_BIND})}/hub/login", timeout=10) as page:
            return page.status == 200
    except (urllib.error.URLError, OSError):
        return False


def measure_demo():
    started = time.monotonic()
    demo = subprocess.run(["make", "demo"], cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True,
                          timeout=1200)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    return time.monotonic() - started


def fill(student, kind):
    """The student's fetched task1 turned into their kind of submission (from outside their reach)."""
    folder = Path(accounts.home_of(student)) / "task1"
    if kind == "not json":
        synthetic_class.fill(folder, "task1", "correct")
        (folder / "01_multi_gpu.ipynb").write_text("{ this is not a notebook")
    elif kind == "renamed":
        synthetic_class.fill(folder, "task1", "correct")
        (folder / "01_multi_gpu.ipynb").rename(folder / "my_work.ipynb")
    else:
        synthetic_class.fill(folder, "task1", kind)
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, accounts.uid_of(student), -1)


def by_nbgrader(student, kind, times=1):
    fetched = as_student(student, "nbgrader", "fetch_assignment", "task1", cwd=accounts.home_of(student))
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    fill(student, kind)
    for _ in range(times):
        handed = as_student(student, "nbgrader", "submit", "task1", cwd=accounts.home_of(student))
        assert handed.returncode == 0, handed.stdout + handed.stderr


def hand_in_the_class(facts):
    """Chromium's students submit from the Assignments tab, the others with nbgrader submit (in
    threads); the service is killed once the first grading runs; wait until all is released."""
    lay, browser = facts["lay"], facts["browser"]
    facts["started"] = time.monotonic()
    errors, threads = [], []
    for student, kind, how in facts["students"]:
        if how != "browser":
            thread = threading.Thread(target=lambda s=student, k=kind, h=how: _record(
                errors, by_nbgrader, s, k, FLOOD if h == "flood" else 1))
            thread.start()
            threads.append(thread)
    facts["pages"] = {}
    for student, kind, how in facts["students"]:
        if how == "browser":
            page = browser.login(student, facts["passwords"][student])
            fetch(page, "task1")
            fill(student, kind)
            submit(page, "task1")
            facts["pages"][student] = page
    for thread in threads:
        thread.join()
    assert not errors, errors
    facts["handed_in"] = time.monotonic() - facts["started"]
    forge_in_anothers_name(lay)
    facts["killed"] = kill_the_service_while_it_grades(lay)
    _wait(lambda: all_released(lay, facts["students"]), 2400, "every student's feedback")
    facts["class_seconds"] = time.monotonic() - facts["started"]


def _record(errors, function, *args):
    try:
        function(*args)
    except Exception as error:   # reported by the fixture
        errors.append(f"{args}: {error}")


def forge_in_anothers_name(lay):
    """student03 makes a folder in inbound/ named as student01's, newer than anything handed in."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() + 60)) + ".000000 UTC"
    folder = lay.exchange / "handson-distributed-dl" / "inbound" / f"student01+task1+{stamp}+forged"
    made = as_student("student03", "bash", "-c", f"mkdir '{folder}' && echo '{stamp}' > '{folder}/timestamp.txt'")
    assert made.returncode == 0, made.stderr


def store_of(lay):
    return grading_queue.Store(lay.grading / "queue.sqlite")


def all_released(lay, students):
    store = store_of(lay)
    try:
        latest = {s: store.latest(s, "task1") for s, _, _ in students}
    finally:
        store.close()
    return all(row and (row.state in (grading_queue.RELEASED, grading_queue.FAILED)
                        or "feedback could not be made" in (row.status or "")) for row in latest.values())


def service_processes(lay):
    return [p for p in psutil.process_iter(["cmdline"])
            if "handson_lib.classroom.grading_service" in " ".join(p.info["cmdline"] or [])]


def kill_the_service_while_it_grades(lay):
    """SIGKILL to the service's page and worker once a grading runs; the hub starts it again."""
    def grading():   # a job sent, and its node grading (its heartbeat)
        store = store_of(lay)
        try:
            return [job for job in store.active_jobs() if job.jobid and (Path(job.folder) / "heartbeat.json").exists()]
        finally:
            store.close()
    _wait(grading, 600, "the first grading to start")
    before = service_processes(lay)
    assert len(before) == 2, before   # the page (the hub's process) and its worker
    for proc in before:
        proc.kill()
    try:
        # The hub polls its managed services every 30 s (JupyterHub's default for them): 25-28 s to a
        # restart on an idle machine, 5 times of 5; once, graded beside a CI run, none within 120 s.
        _wait(lambda: [p for p in service_processes(lay) if p.pid not in {q.pid for q in before}], 300,
              "the hub to start the grading service again")
    except AssertionError as err:   # what the hub said of its services (the log goes with `down`)
        said = [line for line in lay.hub_log.read_text(errors="replace").splitlines() if "ervice" in line]
        raise AssertionError(f"{err}; the hub's log on services:\n" + "\n".join(said[-30:])) from None
    return [p.pid for p in before]


# ----------------------------------------------------------------------------- the class graded as it submits

def test_every_student_is_graded_once_with_the_scores_handson_autograde_gives(service_class):
    lay = service_class["lay"]
    store = store_of(lay)
    started = {}   # student: their submissions sent to a job, each once
    try:
        for student, kind, _ in service_class["students"]:
            sent_rows = [r for r in store.of_student(student) if not r.regrade and r.started is not None]
            assert all(r.tries == 1 for r in sent_rows), sent_rows
            started[student] = len(sent_rows)
            latest = store.latest(student, "task1")
            if kind == "not json":
                assert latest.state == grading_queue.FAILED and "nbgrader failed" in latest.status, latest
                continue
            if kind == "renamed":   # graded as nbgrader can: 0, or not graded with its reason
                assert latest.state in (grading_queue.RELEASED, grading_queue.FAILED) and not latest.score, latest
                continue
            assert latest.state == grading_queue.RELEASED, latest
            assert latest.score in expected(kind), (student, kind, latest)
            rows = [r for r in store.of_student(student) if not r.regrade]
            graded = [r for r in rows if r.state in (grading_queue.GRADED, grading_queue.RELEASED)]
            assert [r.name for r in graded].count(latest.name) == 1, rows
            # An older one is graded only where its grading had started before a newer one came (the
            # flood's pace against the machine's: on an idle machine one of the 20 was graded too).
            for older in (r for r in graded if r.name != latest.name):
                came_next = min((r.seen for r in rows if r.seen > older.seen), default=None)
                assert older.started is not None and came_next is not None and older.started <= came_next, \
                    (older, came_next)
            assert latest.tries == 1, latest   # sent to one job: the killed service lost no job
        jobs = store.db.execute("SELECT students FROM jobs").fetchall()
    finally:
        store.close()
    sent = collections.Counter(s for (students,) in jobs for s in json.loads(students))
    assert {s: n for s, n in sent.items() if s in started} == {s: n for s, n in started.items() if n}, sent
    # nobody sent twice, across the restart: one job for each submission sent
    report = {r["student"]: r for r in csv.DictReader((lay.course / "autograde_task1.csv").open())}
    assert set(report) >= {s for s, k, _ in service_class["students"] if k != "not json"}, report


def test_handson_autograde_gives_the_same_submissions_the_scores_the_service_released(service_class, tmp_path):
    """`handson autograde` of a copy of the course the service graded (the same submitted files,
    nothing it wrote as grades): every student the score the service released, the correct
    one's throughput point within its bands (timed again, on a machine that may be busy)."""
    lay = service_class["lay"]
    course = tmp_path / "course"
    shutil.copytree(lay.course, course, symlinks=True,
                    ignore=shutil.ignore_patterns("autograded", "feedback", "autograde_*"))
    graded = handson("autograde", "task1", "--course", course, timeout=1800)
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-2000:]
    rows = {r["student"]: r for r in csv.DictReader((course / "autograde_task1.csv").open())}
    store = store_of(lay)
    try:
        for student, kind, _ in service_class["students"]:
            latest = store.latest(student, "task1")
            if kind in ("not json", "renamed"):   # no notebook nbgrader grades: nothing, both ways
                assert not latest.score and not float((rows.get(student) or {}).get("score") or 0), rows.get(student)
                continue
            mine = float(rows[student]["score"])
            if kind == "correct":
                assert {mine, latest.score} <= expected(kind), (student, mine, latest)
            else:
                assert mine == latest.score, (student, kind, mine, latest)
    finally:
        store.close()


def test_the_class_is_graded_within_twenty_demos(service_class):
    seconds, demo = service_class["class_seconds"], service_class["demo_seconds"]
    print(f"class of {len(service_class['students'])}: handed in within {service_class['handed_in']:.0f} s, "
          f"every feedback released {seconds:.0f} s after the first login"
          + (f"; make demo {demo:.0f} s (bound {20 * demo:.0f} s)" if demo else ""))
    # How fast the class hands in is this test's own pace (logins, 20 submits in a row) on a machine
    # that may be busy: printed, not bounded; the bound is the grading's, relative to `make demo`.
    if demo is not None:
        assert seconds <= 20 * demo, (seconds, demo)


def test_a_flood_delays_a_classmate_by_one_grading_at_most(service_class):
    lay = service_class["lay"]
    store = store_of(lay)
    try:
        flood = store.of_student("student02")
        others = [store.latest(s, "task1") for s, _, how in service_class["students"] if how != "flood"]
    finally:
        store.close()
    assert len(flood) == FLOOD
    graded = [r for r in flood if r.started]
    assert len(graded) <= 2, graded   # the one first seen, then the latest: the rest superseded
    assert sum(r.state == grading_queue.SUPERSEDED for r in flood) >= FLOOD - 2
    for other in others:
        ahead = [r for r in graded if other.seen < r.started < other.started]
        assert len(ahead) <= 1, (other, ahead)


def test_a_folder_in_anothers_name_grades_nothing_and_shows_under_who_made_it(service_class):
    store = store_of(service_class["lay"])
    try:
        forged = [r for r in store.of_student("student03") if r.name.endswith("+forged")]
        victim = store.of_student("student01")
    finally:
        store.close()
    assert forged and forged[0].state == grading_queue.REFUSED and "another's name" in forged[0].status
    assert all(not r.name.endswith("+forged") for r in victim)
    assert victim[0].state == grading_queue.RELEASED


# ----------------------------------------------------------------------------- what the students and the staff see

def test_a_student_reads_their_state_on_the_page_and_their_feedback_in_the_assignments_tab(service_class):
    from playwright.sync_api import expect
    page = service_class["pages"]["student01"]
    page.goto(PAGE)
    rows = page.locator("tr.submission")
    expect(rows.first).to_contain_text("feedback released")
    text = page.locator("body").inner_text()
    Browser.shot(page, "20-grading-service-student01")
    for phase in ("submitted", "queued", "grading started", "graded", "feedback released"):
        assert phase in text, (phase, text)
    assert "student02" not in text and "student03" not in text
    assert page.locator("tr.submission").first.get_attribute("data-student") == "student01"
    page.goto(PAGE.rstrip("/") + "/" + page.locator("a", has_text="feedback").first.get_attribute("href"))
    expect(page.locator("body")).to_contain_text("Score")
    page.goto(PAGE.replace("/services/grading/", "/hub/home"))
    page.goto(page.url.split("/hub/")[0] + "/user/student01/lab")
    tab = assignment_list(page)
    row = tab.locator("#submitted_assignments_list > .list_item", has_text="task1")
    row.get_by_role("button", name="Fetch Feedback").click()
    expect(row.locator("a", has_text="view feedback").last).to_be_visible()
    Browser.shot(page, "21-grading-service-feedback-fetched")


def test_the_staff_page_shows_the_queue_every_student_the_distribution_and_the_plot(service_class):
    from playwright.sync_api import expect
    browser = service_class["browser"]
    teacher = browser.login(accounts.INSTRUCTOR, service_class["passwords"][accounts.INSTRUCTOR])
    teacher.goto(PAGE)
    expect(teacher.locator("table.class tr.latest")).to_have_count(len(service_class["students"]))
    expect(teacher.locator("table.distribution")).to_have_count(1)
    expect(teacher.locator("img[src='plot/task1.png']")).to_have_count(1)
    assert teacher.request.get(PAGE + "plot/task1.png").headers["content-type"] == "image/png"
    Browser.shot(teacher, "22-grading-service-staff")
    # "grade again" for one student (a form with the hub's xsrf token): graded anew, once.
    teacher.locator("tr.latest[data-student='student02'] button").click()
    teacher.wait_for_url(PAGE)

    def graded_again():
        store = store_of(service_class["lay"])
        try:
            latest = store.latest("student02", "task1")
        finally:
            store.close()
        return latest.regrade and latest.state == grading_queue.RELEASED and latest
    again = _wait(graded_again, 600, "student02 graded again from the staff's page")
    assert again.score == TASK1["skeleton"].expected and again.tries == 1, again


def test_a_student_asking_for_anothers_state_or_feedback_is_refused(service_class):
    """Through the page with the student's own cookies, and through the API with a token of their own."""
    page = service_class["pages"]["student01"]
    for path in ("?student=student03", "api/state?student=student03",
                 "feedback/task1/01_multi_gpu.html?student=student03"):
        answer = page.request.get(PAGE + path)
        assert answer.status == 403, (path, answer.status, answer.text()[:300])
    own = page.request.get(PAGE + "feedback/task1/01_multi_gpu.html")
    assert own.status == 200 and "sandbox" in own.headers["content-security-policy"], own.headers
    token = hub.api("/users/student03/tokens", service_class["lay"].admin_token.read_text().strip(), method="POST",
                    body={"note": "issue 50 test", "scopes": ["access:services!service=grading"]})["token"]
    mine = json.loads(api(PAGE + "api/state", token))
    assert {s["student"] for s in mine["submissions"]} == {"student03"} and not mine["staff"], mine
    for path, body in (("api/state?student=student01", None), ("api/regrade", b"assignment=task1&student=*")):
        with pytest.raises(urllib.error.HTTPError) as refused:
            api(PAGE + path, token, body)
        assert refused.value.code == 403, (path, refused.value.code)


def api(url, token, body=None):
    request = urllib.request.Request(url, data=body, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return answer.read()


# ----------------------------------------------------------------------------- the grades out, the cluster

def test_the_grades_are_exported_for_moodle_and_canvas(service_class, tmp_path):
    mapping = tmp_path / "accounts.csv"
    mapping.write_text("account,first_name,last_name,email,id_number,lms_id,sis_user_id,sis_login_id,section\n"
                       + "".join(f"{s},First{i},Last{i},{s}@example.org,ID{i},{100 + i},u{i},{s},A\n"
                                 for i, (s, _, _) in enumerate(service_class["students"])))
    for lms in ("moodle", "canvas"):
        out = tmp_path / f"{lms}.csv"
        done = handson("classroom", "export", "--lms", lms, out, "--accounts", mapping)
        assert done.returncode == 0, done.stdout + done.stderr
        rows = list(csv.reader(out.open(encoding="utf-8")))
        header = rows[0]
        assert header[-1] == "task1" and (header[0] == "First name" if lms == "moodle" else header[0] == "Student")
        score = {row[3 if lms == "canvas" else 3]: row[-1] for row in rows[1 + (lms == "canvas"):]}
        first = "student01" if lms == "canvas" else "student01@example.org"
        assert float(score[first]) in expected("correct"), rows


def test_the_same_class_is_graded_through_slurm_jobs_with_the_batch_spawner(service_class):
    """The class graded again (`handson classroom regrade`) through jobs of the local cluster, the
    users' servers being Slurm jobs too; the same scores. (That Slurm takes the grading jobs as not
    requeueable: tests/test_cluster_grading.py.)"""
    lay = service_class["lay"]
    with turn_on_the_cluster():
        up = handson("cluster", "up", "--nodes", 2, timeout=600)
        assert up.returncode == 0, up.stdout + up.stderr
        try:
            batch = handson("classroom", "up", "--spawner", "batch", "--grade-on", "scheduler", timeout=900)
            assert batch.returncode == 0 and "servers: batch" in batch.stdout, batch.stdout + batch.stderr
            again = handson("classroom", "regrade", "task1")
            assert again.returncode == 0, again.stdout + again.stderr
            _wait(lambda: regraded(lay, service_class["students"]), 1800, "the class graded again through Slurm")
            store = store_of(lay)
            try:
                again_rows = [store.latest(s, "task1") for s, _, _ in service_class["students"]]
                jobs = [(job.launcher, job.jobid) for job in map(store.job, sorted({r.job for r in again_rows if r.job}))]
            finally:
                store.close()
            assert jobs and all(launcher == "scheduler" and jobid.isdigit() for launcher, jobid in jobs), jobs
            for row, (student, kind, _) in zip(again_rows, service_class["students"]):
                assert row.regrade and (row.score in expected(kind) or kind == "not json"), (student, row)
        finally:
            handson("classroom", "up", "--spawner", "local", "--grade-on", "machine", timeout=900)
            handson("cluster", "down")


def regraded(lay, students):
    store = store_of(lay)
    try:
        rows = [store.latest(s, "task1") for s, _, _ in students]
    finally:
        store.close()
    return all(r and r.regrade and r.state in (grading_queue.RELEASED, grading_queue.FAILED) for r in rows)
