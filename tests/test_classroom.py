"""`handson classroom`: the course on a JupyterHub with nbgrader's exchange, as a class uses it.

Needs root (Linux accounts, the hub starts servers as their users). The module brings a classroom
up with two students, then plays a class in headless Chromium (Playwright, Debian's browser):
student01 fetches task2 from the Assignments tab, fills it (answers and scripts from the
instructor's source, written into the fetched folder from outside the student's reach), runs
`handson check multi-node` in a terminal; then the class hands in `setup` (student01 twice, the
second time with one answer wrong, student02 the skeleton); the instructor collects in the
Formgrader, autogrades with `handson autograde` and releases the feedback from the Formgrader;
each student reads their own feedback. Screenshots of every step are kept in
.handson/screenshots/classroom/ for a human to look at. Then what a student must not read, the
secrets, the hub's address, a killed server and a late submission.

Then the class turns hostile: student02 plants submissions in the exchange that nbgrader's own
collect would take (another's name, links to the instructor's notebook and a solution, a FIFO, a
huge file) and script in their notebook for the instructor's Formgrader; a memory bomb, a fork bomb
and a full home in their own server. The hub bound beyond loopback serves TLS only; `down --purge`
exports the class and removes it; a class in Japanese runs from fetch to feedback.
"""

import csv
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from conftest import CHROMIUM_ARGS, turn_on_the_classroom, turn_on_the_cluster
from handson_lib import COURSE_ROOT
from handson_lib.classroom import accounts, hub, limits, nbgrader_setup
from handson_lib.classroom.layout import layout
from handson_lib.autograder import nbgrader_course, synthetic_class

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
SHOTS = ROOT / ".handson" / "screenshots" / "classroom"
COURSE_ID = nbgrader_course.COURSE_ID
UI_TIMEOUT_MS = 120_000
#: Each user's memory in this class: a memory bomb reaches it in seconds.
MEMORY_PER_USER_GIB = 3

pytestmark = [pytest.mark.classroom, pytest.mark.browser, pytest.mark.timeout(2400)]


def handson(*args, timeout=600):
    return subprocess.run([str(VENV_BIN / "handson"), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def as_student(name, *cmd, cwd="/", timeout=600):
    """`cmd` as the student, in the environment of the students' servers."""
    return nbgrader_setup.run_as(name, layout().student_venv, cmd, cwd, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def classroom_turn():
    with turn_on_the_classroom():
        yield


@pytest.fixture(scope="module")
def classroom(classroom_turn):
    if os.geteuid() != 0:
        pytest.fail("`handson classroom` needs root (Linux accounts, JupyterHub)")
    # Whatever an earlier run left (a class in another language too): exported aside, then removed.
    handson("classroom", "down", "--purge", "--export", tempfile.mkdtemp(prefix="handson-classroom-before-"))
    before = COURSE_ROOT.stat()
    result = handson("classroom", "up", "--students", 2, "--spawner", "local", "--bind", hub.DEFAULT_BIND,
                     "--memory-per-user", MEMORY_PER_USER_GIB, timeout=1800)
    assert result.returncode == 0, f"classroom up failed:\n{result.stdout}\n{result.stderr}"
    lay = layout()
    # What an earlier run left in the students' homes (assignments fetched, the interface's language).
    for name in accounts.student_names(2):
        home = Path(accounts.home_of(name))
        for leftover in ("task2", "setup", ".jupyter/lab/user-settings/@jupyterlab/translation-extension"):
            shutil.rmtree(home / leftover, ignore_errors=True)
    result.layout = lay
    result.course_root_before = (stat.S_IMODE(before.st_mode), before.st_gid)
    result.passwords = accounts.read_passwords(lay.passwords)
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield result
    handson("classroom", "down")


# ----------------------------------------------------------------------------- set-up and security

def test_up_twice_is_idempotent_and_shows_no_password_again(classroom):
    again = handson("classroom", "up", "--students", 2)
    assert again.returncode == 0, again.stderr
    assert "already up" in again.stdout
    assert "new accounts or passwords" not in again.stdout
    assert accounts.read_passwords(classroom.layout.passwords) == classroom.passwords
    assert f"{hub.url({'bind': hub.DEFAULT_BIND})}/hub/login" in again.stdout


def test_secrets_are_made_per_install_and_root_only(classroom):
    lay = classroom.layout
    # The screen names the accounts and the root-only file, never a password.
    assert not any(password in classroom.stdout for password in classroom.passwords.values())
    for path in (lay.cookie_secret, lay.proxy_token, lay.admin_token, lay.passwords):
        info = path.stat()
        assert info.st_uid == 0 and stat.S_IMODE(info.st_mode) == 0o600, (path, oct(info.st_mode))
        assert len(path.read_text().strip()) >= 12
    assert stat.S_IMODE(lay.secrets.stat().st_mode) == 0o700
    assert stat.S_IMODE(lay.hub.stat().st_mode) == 0o700


def test_the_hub_listens_on_loopback_only(classroom):
    ports = {hub.PORT, hub.HUB_API_PORT, hub.PROXY_API_PORT}
    listening = [c for c in psutil.net_connections(kind="inet")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port in ports]
    assert {c.laddr.port for c in listening} == ports
    assert {c.laddr.ip for c in listening} <= {"127.0.0.1"}, listening


def test_a_student_cannot_read_what_is_not_theirs(classroom):
    lay = classroom.layout
    refused = {
        "the other student's home": ["ls", accounts.home_of("student02")],
        "the gradebook": ["cat", lay.course / "gradebook.db"],
        "the course's source/": ["ls", lay.course / "source"],
        # the instructor's source notebook holds the hidden tests; autograded/ the graded copies
        "the source notebook with hidden tests": ["cat", lay.course / "source" / "task2" / "02_multi_node.ipynb"],
        "the course's autograded/": ["ls", lay.course / "autograded"],
        "the solutions": ["cat", COURSE_ROOT / "solutions" / "train_cifar_multi_node.py"],
        "the instructor's environment": ["ls", lay.instructor_venv],
        "the exchange's inbound/": ["ls", lay.exchange / COURSE_ID / "inbound"],
        "the secrets": ["cat", lay.passwords],
    }
    for what, cmd in refused.items():
        result = as_student("student01", *cmd)
        assert result.returncode != 0 and "Permission denied" in result.stderr, (what, result)
    answers = as_student("student01", "python", "-c", "import handson_lib.autograder.answers")
    # The students' environment holds no autograder at all (the edition ships none of it).
    assert "No module named 'handson_lib.autograder'" in answers.stderr, answers
    assert "BEGIN HIDDEN TESTS" in (lay.course / "source" / "task2" / "02_multi_node.ipynb").read_text()
    released = (lay.exchange / COURSE_ID / "outbound" / "task2" / "02_multi_node.ipynb").read_text()
    assert "BEGIN HIDDEN TESTS" not in released and "BEGIN SOLUTION" not in released


def test_a_student_cannot_take_the_exchange_over(classroom):
    """The exchange root is sticky: a student cannot rename the course's folder and put one of
    their own in its place (nbgrader issue 1225); a course folder the instructor does not own
    makes `up` refuse, saying why, before it changes anything."""
    lay = classroom.layout
    assert stat.S_IMODE(lay.exchange.stat().st_mode) == 0o1777
    course = lay.exchange / COURSE_ID
    moved = as_student("student01", "mv", course, lay.exchange / "taken")
    assert moved.returncode != 0 and "not permitted" in moved.stderr, moved
    assert course.is_dir() and not (lay.exchange / "taken").exists()
    os.chown(course, accounts.uid_of("student01"), -1)   # as if the rename had happened earlier
    try:
        refused = handson("classroom", "up")
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "belongs to student01, not to the instructor" in refused.stderr, refused.stderr
    finally:
        os.chown(course, accounts.uid_of(accounts.INSTRUCTOR), -1)
    assert handson("classroom", "up").returncode == 0


def test_up_refuses_an_account_it_did_not_make(classroom):
    """An account named like the class's that someone made is taken over only when asked."""
    subprocess.run(["useradd", "--create-home", "student03"], check=True)
    try:
        refused = handson("classroom", "up", "--students", 3)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "student03" in refused.stderr and "--adopt-accounts" in refused.stderr, refused.stderr
        assert "student03" not in accounts.read_passwords(classroom.layout.passwords)
    finally:
        subprocess.run(["userdel", "--remove", "student03"], capture_output=True)
    assert handson("classroom", "up", "--students", 2).returncode == 0


# ----------------------------------------------------------------------------- the class, in a browser

class Browser:
    """Headless Chromium (Debian's) through Playwright; one page per user, screenshots in SHOTS."""

    def __init__(self, executable):
        from playwright.sync_api import sync_playwright
        self._pw = sync_playwright().start()
        self.browser = self._pw.chromium.launch(executable_path=executable, headless=True,
                                                args=CHROMIUM_ARGS)

    def close(self):
        self.browser.close()
        self._pw.stop()

    def login(self, user, password):
        """A new browser context (cookies of its own), logged in through the hub's login page,
        with the user's JupyterLab loaded."""
        page = self.browser.new_context(viewport={"width": 1600, "height": 900}).new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        page.goto(f"{hub.url({'bind': hub.DEFAULT_BIND})}/hub/login")
        page.fill("#username_input", user)
        page.fill("#password_input", password)
        page.click("#login_submit")
        page.wait_for_url(f"**/user/{user}/lab**", timeout=UI_TIMEOUT_MS)
        self.menu(page, "Nbgrader")
        page.keyboard.press("Escape")
        return page

    @staticmethod
    def menu(page, title):
        from playwright.sync_api import expect
        item = page.locator("#jp-menu-panel .lm-MenuBar-item", has_text=title)
        expect(item).to_have_count(1)
        item.click()

    @staticmethod
    def shot(page, name):
        page.screenshot(path=str(SHOTS / f"{name}.png"))


def assignment_list(page):
    """nbgrader's Assignments tab (Nbgrader > Assignment List)."""
    Browser.menu(page, "Nbgrader")
    page.locator("#jp-mainmenu-nbgrader").get_by_text("Assignment List", exact=True).click()
    return page.locator("#assignments")


def fetch(page, assignment):
    from playwright.sync_api import expect
    tab = assignment_list(page)
    tab.locator("#released_assignments_list .list_item", has_text=assignment) \
        .get_by_role("button", name="Fetch").click()
    expect(tab.locator("#fetched_assignments_list > .list_item", has_text=assignment)).to_have_count(1)


def submit(page, assignment):
    """Click Submit and wait until the Submitted list shows one more submission of it."""
    from playwright.sync_api import expect
    tab = page.locator("#assignments")
    # One row per assignment, a nested row per submission (its timestamp).
    submitted = tab.locator("#submitted_assignments_list > .list_item", has_text=assignment) \
        .locator(".nested_list_item")
    before = submitted.count()
    tab.locator("#fetched_assignments_list > .list_item", has_text=assignment) \
        .get_by_role("button", name="Submit").click()
    expect(submitted).to_have_count(before + 1)


def run_in_terminal(page, command, log):
    """Type `command` into a new terminal of the user's JupyterLab (File > New Launcher >
    Terminal); its output shows there and goes to `log` in the user's home, then `EXIT=<status>`."""
    from playwright.sync_api import expect
    Browser.menu(page, "File")
    page.locator(".lm-Menu-item:visible", has_text="New Launcher").click()
    page.locator(".jp-LauncherCard:visible", has_text="Terminal").click()
    terminal = page.locator(".jp-Terminal").last
    expect(terminal).to_be_visible()
    terminal.click()
    page.keyboard.type(f"({command}) 2>&1 | tee ~/{log}; echo EXIT=${{PIPESTATUS[0]}} >> ~/{log}\n")


def inbound(lay, student, assignment):
    """Submissions in the exchange (as root: students cannot list it)."""
    return sorted(p.name for p in (lay.exchange / COURSE_ID / "inbound").iterdir()
                  if p.name.startswith(f"{student}+{assignment}+"))


def formgrader(page):
    """The Formgrader (Nbgrader > Formgrader): its frame, at Manage Assignments."""
    from playwright.sync_api import expect
    Browser.menu(page, "Nbgrader")
    page.locator("#jp-mainmenu-nbgrader").get_by_text("Formgrader", exact=True).click()
    frame = page.frame_locator("iframe").first
    try:
        expect(frame.get_by_role("heading", name="Manage Assignments")).to_be_visible()
    except AssertionError as error:
        Browser.shot(page, "formgrader-missing")
        raise AssertionError(f"{error}\n{instructor_diagnosis()}") from None
    return frame


def instructor_diagnosis():
    """Why the instructor's side may fail: folders on the way to the course it cannot enter, and
    the last lines of the hub's log (the servers' output lands there)."""
    lay = layout()
    access = nbgrader_setup.course_access(accounts.INSTRUCTOR) or "the instructor can reach the course's library"
    log = lay.hub_log.read_text(errors="replace").splitlines()[-40:] if lay.hub_log.exists() else []
    return access.strip() + "\nthe hub's log, last lines:\n" + "\n".join(log)


def assignment_row(frame, assignment):
    return frame.locator("#main-table tr", has=frame.locator(f"td.name[data-order='{assignment}']"))


def formgrader_action(page, frame, assignment, column, name):
    """Click the Formgrader's button in `column` (collect, generate-feedback, release-feedback) of
    the assignment's row and close the dialog that reports the result; the dialog's text."""
    from playwright.sync_api import expect
    assignment_row(frame, assignment).locator(f"td.{column} a").click()
    dialog = frame.locator(".modal-dialog").last
    expect(dialog).to_be_visible()
    expect(dialog.locator(".modal-footer button").first).to_be_enabled()
    Browser.shot(page, name)
    text = dialog.inner_text()
    dialog.locator(".modal-footer button").first.click()
    expect(dialog).to_be_hidden()
    return text


@pytest.fixture(scope="module")
def browser(classroom, chromium):
    from playwright.sync_api import expect
    expect.set_options(timeout=UI_TIMEOUT_MS)
    session = Browser(chromium)
    yield session
    session.close()


@pytest.fixture(scope="module")
def graded_class(classroom, browser):
    """student01 fetches task2 and runs its self-check in a terminal of their JupyterLab. The class
    then hands in `setup` (the notebook without training runs): student01 twice, first the
    notebook as fetched, then with one answer wrong (its score, 2 of 3, shows that the latest was
    graded), student02 the skeleton; the instructor collects, autogrades and releases the
    feedback. Returns the pages and the facts."""
    from playwright.sync_api import expect
    lay, pw = classroom.layout, classroom.passwords
    facts = {}

    def fill_as_student(student, assignment, kind):
        # The answers come from the synthetic class, written from outside the student's reach.
        folder = Path(accounts.home_of(student)) / assignment  # nbgrader fetches into HOME/<assignment>
        synthetic_class.fill(folder, assignment, kind)
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, accounts.uid_of(student), -1)

    one = browser.login("student01", pw["student01"])
    fetch(one, "task2")
    browser.shot(one, "01-student01-fetched-task2")
    fill_as_student("student01", "task2", "correct")
    # The self-check, typed into a terminal of the student's JupyterLab.
    log = Path(accounts.home_of("student01")) / "check-task2.log"
    log.unlink(missing_ok=True)
    run_in_terminal(one, "cd ~/task2 && handson check multi-node train_cifar_multi_node.py", log.name)
    facts["check"] = _wait(lambda: "EXIT=" in (log.read_text() if log.exists() else "") and log.read_text(),
                           900, "handson check in the terminal")
    browser.shot(one, "02-student01-self-check-in-a-terminal")
    one.goto(one.url.split("/lab")[0] + "/lab/tree/task2/02_multi_node.ipynb")
    expect(one.locator(".jp-Notebook")).to_be_visible()
    browser.shot(one, "02-student01-solved-notebook-opened")
    fetch(one, "setup")
    handed_in = {s: inbound(lay, s, "setup") for s in ("student01", "student02")}
    submit(one, "setup")
    time.sleep(1.5)  # two submissions, two distinct timestamps
    fill_as_student("student01", "setup", "wrong_q1")
    submit(one, "setup")
    browser.shot(one, "03-student01-submitted-twice")

    two = browser.login("student02", pw["student02"])
    fetch(two, "setup")
    submit(two, "setup")
    browser.shot(two, "04-student02-submitted-skeleton")
    facts["inbound"] = {s: sorted(set(inbound(lay, s, "setup")) - set(before))
                        for s, before in handed_in.items()}

    teacher = browser.login(accounts.INSTRUCTOR, pw[accounts.INSTRUCTOR])
    frame = formgrader(teacher)
    facts["collect"] = formgrader_action(teacher, frame, "setup", "collect", "05-instructor-collect")
    expect(assignment_row(frame, "setup").locator("td.num-submissions")).to_have_text("2")
    # Autograding: the course's parallel `handson autograde` (watchdog per run, timing slot), in the
    # instructor's environment; the Formgrader's own button grades one student at a time. The
    # class's instructor is not root, and the grading sandbox needs root: --unsafe here.
    facts["autograde"] = nbgrader_setup.run_as(
        accounts.INSTRUCTOR, lay.instructor_venv, ["handson", "autograde", "setup", "--course", lay.course, "--unsafe"],
        lay.course, timeout=1500, check=False)
    teacher.reload()
    frame = formgrader(teacher)
    facts["generate"] = formgrader_action(teacher, frame, "setup", "generate-feedback",
                                          "06-instructor-generate-feedback")
    facts["release"] = formgrader_action(teacher, frame, "setup", "release-feedback",
                                         "07-instructor-release-feedback")
    facts["export"] = nbgrader_setup.nbgrader_as_instructor(lay, "export", "--to", str(lay.course / "grades.csv"),
                                                            check=False)
    facts["pages"] = {"student01": one, "student02": two, accounts.INSTRUCTOR: teacher}
    return facts


def _submission_time(inbound_name):
    """nbgrader's inbound names are STUDENT+ASSIGNMENT+TIMESTAMP+RANDOM."""
    return inbound_name.split("+")[2]


def test_a_student_checks_submits_twice_and_the_latest_is_graded(classroom, graded_class):
    check = graded_class["check"]
    # Correctness is decided; the speed-up of the student's own 2 ranks over 1 is measured while
    # the other tests share the 2 cores, so only it may fail here (it is graded with a reference
    # in the same session by `handson autograde`, below).
    for passed in ("runs to the end", "shards are disjoint", "parameters identical on every rank",
                   "evaluator aggregated over ranks", "accuracy beats chance"):
        assert f"[PASS] {passed}" in check, check[-4000:]
    failed = [line for line in check.splitlines() if "[FAIL]" in line]
    assert all(line.split("[FAIL]")[1].strip().startswith(("scaling", "throughput")) for line in failed), \
        check[-4000:]
    assert check.rstrip().endswith("EXIT=1" if failed else "EXIT=0"), check[-4000:]
    submissions = graded_class["inbound"]
    assert len(submissions["student01"]) == 2, submissions   # both kept, each with its timestamp
    assert len(submissions["student02"]) == 1, submissions
    latest = max(_submission_time(name) for name in submissions["student01"])
    collected = classroom.layout.course / "submitted" / "student01" / "setup" / "timestamp.txt"
    assert collected.read_text().strip() == latest


def test_the_instructor_collects_autogrades_and_releases_feedback(classroom, graded_class):
    for step in ("collect", "generate", "release"):
        assert "error" not in graded_class[step].lower(), (step, graded_class[step])
    autograde = graded_class["autograde"]
    assert autograde.returncode == 0, autograde.stdout[-3000:] + autograde.stderr[-2000:]
    export = graded_class["export"]
    assert export.returncode == 0, export.stderr
    rows = {r["student_id"]: r for r in csv.DictReader((classroom.layout.course / "grades.csv").open())
            if r["assignment"] == "setup"}
    # student01's latest submission (one answer wrong) is the graded one; the skeleton gets nothing.
    expected = synthetic_class.CLASSES["setup"]
    assert float(rows["student01"]["score"]) == expected["wrong_q1"].expected, rows["student01"]
    assert float(rows["student02"]["score"]) == expected["skeleton"].expected == 0, rows["student02"]
    assert float(rows["student01"]["max_score"]) == expected["correct"].expected, rows["student01"]


def test_each_student_reads_their_own_feedback_and_not_the_others(classroom, graded_class):
    from playwright.sync_api import expect
    lay = classroom.layout
    feedback = {}
    for student in ("student01", "student02"):
        page = graded_class["pages"][student]
        tab = assignment_list(page)
        row = tab.locator("#submitted_assignments_list > .list_item", has_text="setup")
        row.get_by_role("button", name="Fetch Feedback").click()
        # "(view feedback)" beside the graded submission opens its folder in the file browser.
        view = row.locator(".nested_list_item").last.locator("a", has_text="view feedback")
        view.click()
        item = page.locator(".jp-DirListing-item", has_text="00_setup.html")
        item.dblclick()
        html = page.frame_locator(".jp-HTMLViewer iframe, iframe.jp-HTMLViewer, .jp-MainAreaWidget iframe").last
        expect(html.locator("body")).to_contain_text("Score")
        feedback[student] = html.locator("body").inner_text()
        Browser.shot(page, f"08-{student}-feedback")
    assert "Score" in feedback["student01"] and "Score" in feedback["student02"]
    assert "BEGIN HIDDEN TESTS" not in feedback["student01"] + feedback["student02"]
    assert "0.0 / " in feedback["student02"] or "0 / " in feedback["student02"]
    assert "2.0 / 3" in feedback["student01"] or "2 / 3" in feedback["student01"], feedback["student01"][:2000]
    # What the other student handed in, and the exchange's lists, stay closed to a student.
    other = lay.exchange / COURSE_ID / "inbound" / graded_class["inbound"]["student01"][0]
    for cmd in (["ls", lay.exchange / COURSE_ID / "inbound"], ["ls", lay.exchange / COURSE_ID / "feedback"],
                ["ls", other], ["cat", other / "00_setup.ipynb"],
                ["ls", Path(accounts.home_of("student01")) / "task2"]):
        result = as_student("student02", *cmd)
        assert result.returncode != 0 and "Permission denied" in result.stderr, (cmd, result)


# ----------------------------------------------------------------------------- a hostile class

#: What student02 plants in their notebook for the instructor's browser: script in markdown and in
#: outputs (the grader's run makes the outputs again), each setting a mark that the test looks for.
PLANTED_MARKDOWN = ("Planted by student02. <script>window.top.handsonPlanted = 'markdown script'</script>"
                    "<img src=x onerror=\"window.top.handsonPlanted = 'markdown onerror'\">")
PLANTED_CODE = """from IPython.display import HTML, Javascript, display
display(HTML('<b>planted output</b><script>window.top.handsonPlanted = "output script"</script>'
             '<img src=x onerror="window.top.handsonPlanted = \\'output onerror\\'">'))
display(Javascript('window.top.handsonPlanted = "output javascript"'))
"""


def nbgrader_stamp(offset_s=0.0):
    """A submission time as nbgrader's submit writes it, `offset_s` from now."""
    when = time.time() + offset_s
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(when)) + f".{int(when % 1 * 1e6):06d} UTC"


def plant_in_notebook(student, assignment="setup", notebook="00_setup.ipynb"):
    import nbformat
    path = Path(accounts.home_of(student)) / assignment / notebook
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(PLANTED_MARKDOWN))
    nb.cells.append(nbformat.v4.new_code_cell(PLANTED_CODE))
    nbformat.write(nb, path)
    os.chown(path, accounts.uid_of(student), -1)


@pytest.fixture(scope="module")
def hostile_class(classroom, graded_class):
    """student02 hands in a notebook with script for the instructor's browser (nbgrader submit), then
    plants, by hand in the exchange's inbound/, newer submissions that nbgrader's own collect would
    take: one in student01's name, links to the instructor's notebook and to a solution script, a
    FIFO, and a huge file. The instructor collects in the Formgrader and autogrades again."""
    lay = classroom.layout
    inbound = lay.exchange / COURSE_ID / "inbound"
    home = accounts.home_of("student02")
    plant_in_notebook("student02")
    honest = as_student("student02", "nbgrader", "submit", "setup", cwd=home)
    assert honest.returncode == 0, honest.stdout + honest.stderr
    solution = sorted((COURSE_ROOT / "solutions").glob("*.py"))[0]
    notebook = f"{home}/setup/00_setup.ipynb"
    attacks = {
        "another's name": ("student01", f"cp {notebook} ."),
        "link to the instructor's notebook": ("student02", f"ln -s {lay.course}/source/setup/00_setup.ipynb ."),
        "link to a solution script": ("student02", f"cp {notebook} . && ln -s {solution} train.py"),
        "FIFO": ("student02", "mkfifo 00_setup.ipynb"),
        "huge file": ("student02", f"cp {notebook} . && truncate -s 100M data.bin"),
    }
    planted = {}
    for number, (attack, (named, build)) in enumerate(attacks.items()):
        stamp = nbgrader_stamp(60 + number)   # newer than anything handed in: nbgrader's collect takes it
        folder = inbound / f"{named}+setup+{stamp}+planted{number}"
        made = as_student("student02", "bash", "-c", f"mkdir '{folder}' && cd '{folder}' && echo '{stamp}' > "
                                                     f"timestamp.txt && {build}")
        assert made.returncode == 0, (attack, made.stderr)
        planted[attack] = folder.name
    teacher = graded_class["pages"][accounts.INSTRUCTOR]
    teacher.reload()
    frame = formgrader(teacher)
    facts = {"planted": planted, "solution": solution}
    facts["collect"] = formgrader_action(teacher, frame, "setup", "collect", "10-instructor-collect-hostile")
    facts["cli"] = handson("classroom", "collect", "setup")
    # The due date passed long ago: student02's last submission is late (one grading run for both).
    nbgrader_setup.nbgrader_as_instructor(lay, "db", "assignment", "add", "setup", "--duedate=2020-01-01 00:00:00 UTC")
    facts["autograde"] = nbgrader_setup.run_as(
        accounts.INSTRUCTOR, lay.instructor_venv, ["handson", "autograde", "setup", "--course", lay.course, "--unsafe"],
        lay.course, timeout=1500, check=False)
    nbgrader_setup.nbgrader_as_instructor(lay, "export", "--to", str(lay.course / "grades-hostile.csv"))
    facts["grades"] = {r["student_id"]: r for r in csv.DictReader((lay.course / "grades-hostile.csv").open())
                       if r["assignment"] == "setup"}
    return facts


def test_each_hostile_submission_is_refused_and_named_in_the_collect_report(classroom, hostile_class):
    planted = hostile_class["planted"]
    dialog, cli = hostile_class["collect"], hostile_class["cli"]
    assert cli.returncode == 0, cli.stdout + cli.stderr
    why = {"another's name": "it belongs to student02, not to student01: handed in under another's name",
           "link to the instructor's notebook": "00_setup.ipynb is a link",
           "link to a solution script": "train.py is a link",
           "FIFO": "00_setup.ipynb is a FIFO",
           "huge file": "over "}
    for attack, name in planted.items():
        line = f"REFUSED {name}: "
        assert line in dialog, (attack, dialog[-3000:])     # the Formgrader's dialog (nbgrader's log)
        assert line + why[attack] in cli.stdout, (attack, cli.stdout)    # the report
    submitted = classroom.layout.course / "submitted"
    one = (submitted / "student01" / "setup" / "timestamp.txt").read_text().strip()
    assert one == max(_submission_time(n) for n in hostile_class_inbound(classroom, "student01")), one
    two = submitted / "student02" / "setup"
    handed_in = {p.relative_to(two).as_posix() for p in two.rglob("*")}
    assert not handed_in & {"data.bin", "train.py"}, handed_in
    notebook = (two / "00_setup.ipynb").read_text()
    assert "Planted by student02" in notebook and "BEGIN SOLUTION" not in notebook


def hostile_class_inbound(classroom, student):
    """The submissions the student's own account made (what nbgrader's submit makes)."""
    inbound = classroom.layout.exchange / COURSE_ID / "inbound"
    uid = accounts.uid_of(student)
    return [p.name for p in inbound.iterdir() if p.name.startswith(f"{student}+setup+") and p.lstat().st_uid == uid]


def test_every_other_submission_is_graded_unchanged(classroom, graded_class, hostile_class):
    autograde = hostile_class["autograde"]
    assert autograde.returncode == 0, autograde.stdout[-3000:] + autograde.stderr[-2000:]
    grades, expected = hostile_class["grades"], synthetic_class.CLASSES["setup"]
    assert float(grades["student01"]["score"]) == expected["wrong_q1"].expected, grades["student01"]
    assert float(grades["student02"]["score"]) == 0, grades["student02"]


def test_script_in_a_students_notebook_does_not_run_in_the_formgrader(classroom, graded_class, hostile_class):
    """The instructor opens student02's notebook for manual grading: the planted markdown and
    outputs are shown as text or dropped, and nothing of them runs."""
    from playwright.sync_api import expect
    lay = classroom.layout
    found = nbgrader_setup.run_as(accounts.INSTRUCTOR, lay.instructor_venv, [
        "python", "-c", "from nbgrader.api import Gradebook; "
        f"g = Gradebook('sqlite:///{lay.course / 'gradebook.db'}'); "
        "print(g.find_submission_notebook('00_setup', 'setup', 'student02').id)"], lay.course)
    teacher = graded_class["pages"][accounts.INSTRUCTOR].context.new_page()
    dialogs = []
    teacher.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    base = hub.url({"bind": hub.DEFAULT_BIND})
    teacher.goto(f"{base}/user/{accounts.INSTRUCTOR}/formgrader/submissions/{found.stdout.strip()}/")
    expect(teacher.get_by_text("Planted by student02")).to_be_visible()
    expect(teacher.locator("b", has_text="planted output")).to_be_visible()   # the output is shown ...
    teacher.wait_for_timeout(3000)   # ... and had time to run, if it could
    Browser.shot(teacher, "11-instructor-formgrader-planted-notebook")
    ran = [frame.evaluate("() => window.handsonPlanted || null") for frame in teacher.frames]
    assert ran == [None] * len(ran) and not dialogs, (ran, dialogs)
    teacher.close()


def test_a_students_memory_bomb_fork_bomb_and_full_home_stay_theirs(classroom, graded_class):
    """In student02's own server (a terminal of their JupyterLab): a memory bomb is killed at the
    student's limit, a fork bomb stops at theirs and is gone with their server; a full home is full
    for them alone. student01's server answers throughout."""
    token = classroom.layout.admin_token.read_text().strip()
    page, other = graded_class["pages"]["student02"], graded_class["pages"]["student01"]
    home = Path(accounts.home_of("student02"))

    def others_fine():
        assert hub.api("/users/student01", token)["servers"][""]["ready"]
        # student01's JupyterLab answers through the hub, with their own cookies
        assert other.request.get(other.url.split("/lab")[0] + "/api/status").ok

    log = home / "bomb-memory.log"
    log.unlink(missing_ok=True)
    run_in_terminal(page, f"python3 -c \"b = b'x' * ({MEMORY_PER_USER_GIB + 1} << 30)\"", log.name)
    memory = _wait(lambda: "EXIT=" in (log.read_text() if log.exists() else "") and log.read_text(), 180,
                   "the memory bomb to end")
    Browser.shot(page, "12-student02-memory-bomb")
    assert "EXIT=137" in memory, memory   # SIGKILL from the OOM killer of the student's cgroup
    assert limits.events("student02")["memory"] > 0
    others_fine()

    full = as_student("student02", "fallocate", "-l", f"{limits.UserLimits().home_bytes * 2}", home / "fill.bin")
    assert full.returncode != 0 and "No space left on device" in full.stderr, full
    (home / "fill.bin").unlink(missing_ok=True)
    assert as_student("student01", "bash", "-c", "echo fine > ~/still-room.txt").returncode == 0
    assert limits.is_mounted(home) and os.statvfs(home).f_blocks * os.statvfs(home).f_frsize <= \
        limits.UserLimits().home_bytes
    # The exchange, which every student writes, is a file system of its own too.
    exchange = classroom.layout.exchange
    filler = exchange / COURSE_ID / "inbound" / f"student02+setup+{nbgrader_stamp()}+filler"
    size = os.statvfs(exchange).f_blocks * os.statvfs(exchange).f_frsize
    full = as_student("student02", "bash", "-c", f"mkdir '{filler}' && fallocate -l {size + (1 << 30)} '{filler}/big'")
    assert full.returncode != 0 and "No space left on device" in full.stderr, full
    shutil.rmtree(filler)
    assert limits.is_mounted(exchange) and os.statvfs("/").f_fsid != os.statvfs(exchange).f_fsid

    run_in_terminal(page, "bash -c ':(){ :|:& };:'", "bomb-fork.log")
    _wait(lambda: limits.events("student02")["processes"] > 0, 120, "the fork bomb to reach the limit")
    time.sleep(5)
    assert len(limits.members("student02")) <= limits.UserLimits().processes
    Browser.shot(page, "13-student02-fork-bomb")
    others_fine()
    hub.api("/users/student02/server", token, method="DELETE")
    _wait(lambda: not hub.api("/users/student02", token)["servers"], 120, "student02's server to stop")
    _wait(lambda: not limits.members("student02"), 60, "the fork bomb to be gone with the server")
    others_fine()


def test_a_late_submission_is_marked_late(classroom, hostile_class):
    lay = classroom.layout
    row = hostile_class["grades"]["student02"]
    assert row["duedate"].startswith("2020-01-01") and row["timestamp"] > row["duedate"], row
    late = nbgrader_setup.run_as(accounts.INSTRUCTOR, lay.instructor_venv, [
        "python", "-c", "from nbgrader.api import Gradebook; import sys; "
        f"g = Gradebook('sqlite:///{lay.course / 'gradebook.db'}'); "
        "s = g.find_submission('setup', 'student02'); print(s.total_seconds_late)"], lay.course)
    assert float(late.stdout.strip()) > 0, late.stdout


def test_a_killed_server_restarts_with_the_work_saved(classroom):
    token = classroom.layout.admin_token.read_text().strip()
    name = "student02"

    def server():
        return hub.api(f"/users/{name}", token).get("servers", {}).get("")

    if not (server() or {}).get("ready"):
        hub.api(f"/users/{name}/server", token, method="POST", body={})
    _wait(lambda: (server() or {}).get("ready"), 180, "the server to start")
    work = Path(accounts.home_of(name)) / "my-work.txt"
    assert as_student(name, "bash", "-c", f"echo kept > {work}").returncode == 0
    before = [p for p in psutil.process_iter(["username", "cmdline"])
              if p.info["username"] == name and "jupyterhub-singleuser" in " ".join(p.info["cmdline"] or [])]
    assert before, "no server process of the student"
    for proc in before:
        proc.send_signal(signal.SIGKILL)
    _wait(lambda: server() is None, 60, "the hub to notice the dead server")
    hub.api(f"/users/{name}/server", token, method="POST", body={})
    _wait(lambda: (server() or {}).get("ready"), 180, "the server to start again")
    assert work.read_text() == "kept\n"
    after = [p.pid for p in psutil.process_iter(["username", "cmdline"])
             if p.info["username"] == name and "jupyterhub-singleuser" in " ".join(p.info["cmdline"] or [])]
    assert after and not set(after) & {p.pid for p in before}
    # `handson classroom status` names the hub as up (its version: only when its API answers) and
    # lists every user's server.
    status = handson("classroom", "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"JupyterHub {hub.answers()} at {hub.url({'bind': hub.DEFAULT_BIND})}/hub/login" in status.stdout, \
        status.stdout
    servers = dict(re.findall(r"^  (\S+) +(server running|starting|no server)(?: \(.*\))?$", status.stdout, re.M))
    assert {accounts.INSTRUCTOR, *accounts.student_names(2)} <= set(servers), status.stdout
    assert servers[name] == "server running", status.stdout
    # student02's bombs above: the instructor sees which limits stopped whom.
    assert re.search(r"^  student02 .*memory limit hit \d+ time\(s\), processes limit hit", status.stdout, re.M), \
        status.stdout


def _wait(condition, seconds, what):
    """Poll `condition` until it gives something true; that value."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(1)


def test_a_user_can_switch_the_interface_to_japanese(classroom, browser):
    from playwright.sync_api import expect
    page = browser.login("student01", classroom.passwords["student01"])
    Browser.menu(page, "Settings")
    page.locator(".lm-Menu-item", has_text="Language").hover()
    page.locator(".lm-Menu-item", has_text="日本語").click()
    page.get_by_role("button", name=re.compile("Change and reload", re.I)).click()
    expect(page.locator("#jp-menu-panel .lm-MenuBar-item", has_text="ファイル")).to_have_count(1)
    Browser.shot(page, "09-student01-japanese")


@pytest.mark.scheduler
def test_servers_start_as_slurm_jobs_with_the_batch_spawner(classroom):
    token = classroom.layout.admin_token.read_text().strip()
    name = "student01"

    def server():
        return hub.api(f"/users/{name}", token).get("servers", {}).get("")

    with turn_on_the_cluster():
        cluster_up = handson("cluster", "up", "--nodes", 2)
        assert cluster_up.returncode == 0, cluster_up.stderr
        try:
            batch = handson("classroom", "up", "--spawner", "batch")
            assert batch.returncode == 0 and "servers: batch" in batch.stdout, batch.stdout + batch.stderr
            if server():
                hub.api(f"/users/{name}/server", token, method="DELETE")
                _wait(lambda: server() is None, 60, "the old server to stop")
            hub.api(f"/users/{name}/server", token, method="POST", body={})
            _wait(lambda: (server() or {}).get("ready"), 180, "the server's job to start")
            job = server()["state"]["job_id"]
            queue = subprocess.run(["squeue", "-h", "-j", job, "-o", "%u %P %T"], capture_output=True,
                                   text=True).stdout.split()
            assert queue == [name, "jupyter", "RUNNING"], queue
            proc = next(p for p in psutil.process_iter(["username", "cmdline"])
                        if p.info["username"] == name
                        and "jupyterhub-singleuser" in " ".join(p.info["cmdline"] or []))
            assert any(parent.name() == "slurmstepd" for parent in proc.parents()), proc.parents()
            hub.api(f"/users/{name}/server", token, method="DELETE")
            _wait(lambda: not subprocess.run(["squeue", "-h", "-j", job], capture_output=True,
                                             text=True).stdout.strip(), 60, "the server's job to end")
        finally:
            back = handson("classroom", "up", "--spawner", "local")
            handson("cluster", "down")
    assert back.returncode == 0 and "servers: local" in back.stdout, back.stdout + back.stderr


def test_bound_beyond_loopback_the_hub_serves_tls_only(classroom):
    import ssl
    import urllib.request
    lay = classroom.layout
    bound = handson("classroom", "up", "--bind", "0.0.0.0")
    try:
        assert bound.returncode == 0, bound.stdout + bound.stderr
        printed = re.search(r"SHA-256 ([0-9A-F:]{95})", bound.stdout)
        assert printed and "https://0.0.0.0:" in bound.stdout, bound.stdout
        cert, key = lay.secrets / "tls" / "hub.crt", lay.secrets / "tls" / "hub.key"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        with pytest.raises(OSError):   # no plain HTTP: no password or cookie in clear
            urllib.request.urlopen(f"http://127.0.0.1:{hub.PORT}/hub/login", timeout=20).read()
        served = ssl.get_server_certificate(("127.0.0.1", hub.PORT))
        digest = __import__("hashlib").sha256(ssl.PEM_cert_to_DER_cert(served)).hexdigest().upper()
        assert ":".join(digest[i:i + 2] for i in range(0, 64, 2)) == printed.group(1)
        context = ssl.create_default_context(cafile=str(cert))
        with urllib.request.urlopen(f"https://127.0.0.1:{hub.PORT}/hub/login", timeout=30, context=context) as page:
            assert page.status == 200 and b"password" in page.read().lower()
    finally:
        back = handson("classroom", "up", "--bind", hub.DEFAULT_BIND)
    assert back.returncode == 0 and f"http://{hub.DEFAULT_BIND}:{hub.PORT}" in back.stdout, back.stdout + back.stderr


def _from_state_node(lay):
    """Processes run from STATE/node: the proxy (root, configurable-http-proxy)."""
    return [p.info for p in psutil.process_iter(["pid", "username", "cmdline"])
            if str(lay.node) in " ".join(p.info["cmdline"] or [])]


def test_down_stops_everything_and_keeps_the_class(classroom):
    lay = classroom.layout
    ports = {hub.PORT, hub.HUB_API_PORT, hub.PROXY_API_PORT}
    # The hub killed outright: its proxy (root, from STATE/node) and the users' servers outlive it,
    # and down must still stop them.
    assert _from_state_node(lay), "no proxy running from STATE/node while the class is up"
    pid = hub.running_pid(lay)
    assert pid, "the hub does not run"
    os.kill(pid, signal.SIGKILL)
    _wait(lambda: hub.running_pid(lay) is None, 30, "the killed hub to go")
    assert _from_state_node(lay), "the proxy went with the hub: this test no longer tests a leftover proxy"
    result = handson("classroom", "down")
    assert result.returncode == 0, result.stdout + result.stderr
    assert hub.answers() is None
    listening = [c for c in psutil.net_connections(kind="inet")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port in ports]
    assert not listening, listening
    assert not _from_state_node(lay), _from_state_node(lay)
    assert not lay.proxy_pid.exists()
    users = set(accounts.classroom_users(lay.passwords))
    left = [p.info for p in psutil.process_iter(["username", "cmdline"])
            if p.info["username"] in users or str(lay.hub) in " ".join(p.info["cmdline"] or [])]
    assert not left, left
    for kept in (lay.course / "gradebook.db", lay.hub / "jupyterhub.sqlite", lay.exchange / COURSE_ID):
        assert kept.exists(), kept
    # No one logs in with a password of the class until the next `up`.
    assert all(accounts.is_locked(name) for name in users), [(n, accounts.is_locked(n)) for n in users]
    expired = {name: subprocess.run(["getent", "shadow", name], capture_output=True, text=True).stdout.split(":")[7]
               for name in users}
    assert set(expired.values()) == {"1"}, expired   # expired too: no key or cron job logs in either
    assert "account(s) locked until the next `up`" in result.stdout
    # Homes back on the machine's disk, the users' cgroups gone (their images and files stay).
    for name in accounts.student_names(2):
        assert not limits.is_mounted(accounts.home_of(name)), name
        assert limits.home_image(lay.root, name).exists()
        assert not any(folder.exists() for folder in limits.folders(name)), name
    after = COURSE_ROOT.stat()
    assert (stat.S_IMODE(after.st_mode), after.st_gid) == classroom.course_root_before


def test_down_purge_exports_the_class_then_removes_its_accounts_and_data(classroom, tmp_path):
    import tarfile
    lay = classroom.layout
    users = accounts.classroom_users(lay.passwords)
    purged = handson("classroom", "down", "--purge", "--export", tmp_path)
    assert purged.returncode == 0, purged.stdout + purged.stderr
    archive, = tmp_path.glob("handson-classroom-*.tar.gz")
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert {"course/gradebook.db", "course/grades.csv"} <= names, sorted(names)[:20]
    assert any(n.startswith("course/submitted/student01/setup/") for n in names)
    assert users and not any(accounts.exists(name) for name in users), users
    assert not any((lay.root / name).exists() for name in ("exchange", "exchange.ext4", "course", "secrets", "homes"))
    assert lay.student_venv.is_dir() and lay.instructor_venv.is_dir()   # the next class comes up quickly


def test_a_class_in_japanese(classroom, browser):
    """After the English class was purged, `up --lang ja`: a student fetches the Japanese notebook in
    a Japanese JupyterLab and hands it in; the grader's feedback speaks Japanese."""
    import json
    from playwright.sync_api import expect
    lay = classroom.layout
    up = handson("classroom", "up", "--students", 1, "--lang", "ja", "--assignments", "setup",
                 "--memory-per-user", MEMORY_PER_USER_GIB, timeout=1800)
    assert up.returncode == 0 and "language: ja" in up.stdout, up.stdout + up.stderr
    page = browser.login("student01", accounts.read_passwords(lay.passwords)["student01"])
    expect(page.locator("#jp-menu-panel .lm-MenuBar-item", has_text="ファイル")).to_have_count(1)
    fetch(page, "setup")
    home = Path(accounts.home_of("student01"))
    cells = json.loads((home / "setup" / "00_setup.ipynb").read_text())["cells"]
    markdown = "".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")
    assert len(re.findall(r"[\u3040-\u30ff]", markdown)) > 200, markdown[:500]   # kana: the notebook is Japanese
    submit(page, "setup")
    Browser.shot(page, "14-japanese-class-submitted")
    collected = handson("classroom", "collect", "setup")
    assert collected.returncode == 0 and "collected: student01" in collected.stdout, collected.stdout + collected.stderr
    graded = nbgrader_setup.run_as(accounts.INSTRUCTOR, lay.instructor_venv,
                                   ["handson", "autograde", "setup", "--course", lay.course, "--unsafe"], lay.course,
                                   timeout=900, check=False)
    assert graded.returncode == 0, graded.stdout[-2000:] + graded.stderr[-2000:]
    for step in (["generate_feedback", "setup"], ["release_feedback", "setup"]):
        nbgrader_setup.nbgrader_as_instructor(lay, *step)
    tab = assignment_list(page)
    tab.locator("#submitted_assignments_list > .list_item", has_text="setup") \
        .get_by_role("button", name="Fetch Feedback").click()
    feedback = _wait(lambda: list((home / "setup" / "feedback").glob("*/00_setup.html")), 120, "the feedback")
    text = feedback[0].read_text()
    Browser.shot(page, "15-japanese-class-feedback-fetched")
    assert "がノートブックで定義されていません" in text and "（フィードバックではトレースバックを省略）" in text, text[-3000:]
    assert "is not defined in your notebook" not in text
