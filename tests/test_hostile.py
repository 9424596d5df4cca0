"""Hostile submissions: each kind of attack the grader defends against, planted here, with the
effect of the defence asserted (the test fails without it).

In the grading sandbox (system tier: root and bubblewrap): reading the course, the instructor's
home, the other students and the instructor's environment; writing the gradebook, another
student's submission, the session's references, the library; the network; memory, process,
disk bombs; a process left running; the other students of the class keep their scores.

The kinds that take a whole grading run are synthetic students of the classes graded in
tests/test_autograde.py: a process started outside the kernel and left running (`daemon`), the
grader's ratio line forged with values that are no numbers (`forged_ratio_line`), a test cell
edited to pass (`tampered_test`), a grade cell deleted, an endless cell, `sys.exit`, a killed
kernel, 200,000 lines of output, ranks that train alone whatever their record says or they send
(`forged_alone`, `alone_described`); there too, Ctrl-C and a failed regrade.
"""

import ast
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy
import psutil
import pytest

from handson_lib import launch
from handson_lib.checking import checks, runs, timing
from handson_lib.verdicts import speed
from handson_lib.verdicts.rules import Rules
from handson_lib.authoring import course_source
from handson_lib.autograder import sandbox
from conftest import sandbox_missing
from test_kept_runs import _kept_runs


@pytest.fixture
def own_lock(tmp_path, monkeypatch):
    """A timing-slot lock file of this test's own: runs of other tests do not interfere."""
    monkeypatch.setattr(launch, "TIMING_LOCK", tmp_path / "timing.lock")
    monkeypatch.delenv(launch.SLOT_HELD, raising=False)


def test_under_the_autograder_a_changed_working_directory_points_nowhere_else(tmp_path, monkeypatch):
    """`handson autograde` names the submission's folder: a cell that moves the working directory
    (to a copy of the solutions, say) does not change which scripts the checks run."""
    handed_in, elsewhere = tmp_path / "autograded" / "student" / "task2", tmp_path / "elsewhere"
    for folder in (handed_in, elsewhere):
        folder.mkdir(parents=True)
        (folder / "train_cifar_multi_node.py").write_text(f"# {folder.name}\n")
    monkeypatch.setenv("HANDSON_GRADING", str(handed_in))
    monkeypatch.chdir(elsewhere)
    assert checks.locate("train_cifar_multi_node.py") == handed_in / "train_cifar_multi_node.py"
    (handed_in / "train_cifar_multi_node.py").unlink()
    with pytest.raises(FileNotFoundError, match="was not handed in: submit it in the same folder as the notebook "
                                                r"\(task2/train_cifar_multi_node.py\)"):
        checks.locate("train_cifar_multi_node.py")
    monkeypatch.setenv("HANDSON_GRADING", "1")   # nbgrader's own CLI: the folder the kernel works in
    assert checks.locate("train_cifar_multi_node.py") == elsewhere / "train_cifar_multi_node.py"


def test_a_planted_cache_file_is_never_executed_nor_believed(tmp_path):
    """What a hostile run writes where the grader keeps runs (a pickle that runs code when loaded,
    a record of another shape, arrays holding objects) is not such a run: it is read as none,
    and the grader measures again. Nothing in it runs."""
    import pickle

    class Payload:
        def __reduce__(self):
            return (open, (str(tmp_path / "executed"), "w"))

    path = tmp_path / "reference-0123456789abcdef.json"
    path.write_bytes(pickle.dumps(Payload()))
    assert runs.load_run(path, runs.MPIObservation) is None
    good = _kept_runs()[1]
    runs.save_run(good, path)
    kept = json.loads(path.read_text())
    for forged in ({**kept, "kind": "Observation"}, {**kept, "format": 0},
                   {**kept, "fields": {**kept["fields"], "returncode": "0"}},
                   {**kept, "fields": {**kept["fields"], "seconds": True, "extra": 1}}):
        path.write_text(json.dumps(forged))
        assert runs.load_run(path, runs.MPIObservation) is None, forged
    path.write_text(json.dumps(kept))
    numpy.savez(path.with_suffix(".npz"), **{"params/0": numpy.array([Payload()], dtype=object)})
    assert runs.load_run(path, runs.MPIObservation) is None   # object arrays are refused (allow_pickle=False)
    assert not (tmp_path / "executed").exists()


def test_a_slot_held_forever_costs_a_bounded_wait_not_the_run(monkeypatch, own_lock):
    """Any account can lock the slot's file: a process that holds it forever (a hostile student's,
    or a stuck one) makes a run wait SLOT_PATIENCE at most; the run goes on without the slot and
    its speed checks say that it shared the machine."""
    monkeypatch.setattr(launch, "SLOT_PATIENCE", 1.5)
    launch._lock_file(launch.TIMING_LOCK).close()
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'rb'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)",
                               str(launch.TIMING_LOCK)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        started = time.monotonic()
        res = launch.run_watched([sys.executable, "-c", "print('ran')"], 30, timed=True)
        assert res.ok and res.output.strip() == "ran" and res.contended, res
        assert time.monotonic() - started >= 1.5   # it waited its patience, then ran without the slot
        shared = launch.run_watched([sys.executable, "-c", "print('ran')"], 30, timed=False)
        assert shared.ok and shared.contended   # an untimed run waits as long at most
    finally:
        holder.kill()
        holder.wait()
    free = launch.run_watched([sys.executable, "-c", "print('ran')"], 30, timed=True)
    assert free.ok and not free.contended
    contended = runs.Observation(0, False, "", {}, {}, 1.0, progress={"contended": True})
    rules = Rules(slot_patience=launch.SLOT_PATIENCE)
    assert "another process held its timing slot longer than 2 s" in speed.contention(rules, contended, None)
    assert speed.contention(rules, runs.Observation(0, False, "", {}, {}, 1.0, progress={})) == ""


# ----------------------------------------------------------------------------- in the sandbox

#: Hostile code, in the answer cell of question 2 beside its right answer: each prints
#: `HOSTILE <json>` with what it managed to do, which the test reads from the graded notebook.
HOSTILE = {
    "reader": '''
import json, os
from handson_lib import COURSE_ROOT
course = os.path.abspath("../../..")
tried = {"gradebook": os.path.join(course, "gradebook.db"),
         "source": os.path.join(course, "source", "setup", "00_setup.ipynb"),
         "another_student": os.path.join(course, "submitted", "correct", "setup", "00_setup.ipynb"),
         "solution_notebook": os.path.join(str(COURSE_ROOT), "solutions", "00_setup.ipynb"),
         "reference_script": os.path.join(str(COURSE_ROOT), "solutions", "train_cifar_multi_node.py"),
         "answer_helpers": os.path.join(str(COURSE_ROOT), "handson_lib", "autograder", "answers.py"),
         "judge": os.path.join(str(COURSE_ROOT), "handson_lib", "autograder", "judge.py"),
         "checkout": os.path.join(str(COURSE_ROOT), ".git", "config"),
         "instructor_home": os.path.join(os.path.expanduser("~root"), ".bashrc"),
         "shadow": "/etc/shadow"}
read = {}
for what, path in tried.items():
    try:
        read[what] = len(open(path, "rb").read())
    except OSError as error:
        read[what] = type(error).__name__
visible = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
secret = os.environ.get("INSTRUCTOR_SECRET")
print("HOSTILE", json.dumps({"read": read, "uid": os.getuid(), "processes": len(visible), "secret": secret}))
''',
    "writer": '''
import json, os
from handson_lib import COURSE_ROOT
course = os.path.abspath("../../..")
tried = {"gradebook": os.path.join(course, "gradebook.db"),
         "another_student": os.path.join(course, "submitted", "correct", "setup", "00_setup.ipynb"),
         "references": os.path.join(os.environ.get("HANDSON_REFERENCE_CACHE", "/nonexistent"), "reference-0.json"),
         "library": os.path.join(str(COURSE_ROOT), "handson_lib", "planted.py"),
         "config": os.path.join(course, "nbgrader_config.py")}
wrote = {}
for what, path in tried.items():
    try:
        with open(path, "ab") as f:
            f.write(b"# planted")
        wrote[what] = "written"
    except OSError as error:
        wrote[what] = type(error).__name__
print("HOSTILE", json.dumps({"wrote": wrote}))
''',
    "network": '''
import json, socket
interfaces = [line.split(":")[0].strip() for line in open("/proc/net/dev").read().splitlines()[2:]]
try:
    socket.create_connection(("192.0.2.1", 80), timeout=3)
    outside = "connected"
except OSError as error:
    outside = type(error).__name__
print("HOSTILE", json.dumps({"interfaces": interfaces, "outside": outside}))
''',
    "bombs": '''
import json, os, subprocess
found = {}
try:
    hog = bytearray(16 << 30)
    found["memory"] = "allocated"
except MemoryError:
    found["memory"] = "MemoryError"
started = []
try:
    for _ in range(1000):
        started.append(subprocess.Popen(["sleep", "600"]))
    found["processes"] = len(started)
except OSError as error:
    found["processes"] = f"{type(error).__name__} after {len(started)}"
for p in started:   # it cleans up after itself: the kernel needs its own threads
    p.kill()
    p.wait()
for where in (".", "/tmp"):
    written = 0
    try:
        with open(os.path.join(where, "filler"), "wb") as f:
            while written < (4 << 30):
                f.write(b"x" * (64 << 20))
                written += 64 << 20
        found[where] = f"wrote {written >> 20} MiB"
    except OSError as error:
        found[where] = f"{type(error).__name__} after {written >> 20} MiB"
    os.remove(os.path.join(where, "filler"))
print("HOSTILE", json.dumps(found))
''',
    # nbgrader executes the notebook it wrote with the grade cells restored, hidden tests included:
    # the kernel's copy of it must hold none of them (a review read the answers from it).
    "hidden_reader": """
import glob, json
found = {"notebooks": 0, "hidden": [], "grade_sources": 0}
for path in glob.glob("*.ipynb") + glob.glob("**/*.ipynb", recursive=True):
    found["notebooks"] += 1
    for cell in json.load(open(path))["cells"]:
        text = "".join(cell.get("source", ""))
        if "HOSTILE" in text:   # this cell, which names what it looks for
            continue
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade") and cell["cell_type"] == "code" and text:
            found["grade_sources"] += 1
        for secret in ("total_batch_size(32, 4) == 128", "lr_set_by_script - 0.05", "HIDDEN TESTS"):
            if secret in text:
                found["hidden"].append(secret)
print("HOSTILE", json.dumps(found))
""",
    # 3000 nested folders (the grader's cleanup once died of RecursionError on them: no summary,
    # no plot, the session left in /tmp) and a daemon that fills the kernel's own folder.
    "deep_tree": """
import os, subprocess, sys
top = os.getcwd()
for _ in range(3000):
    os.mkdir("d")
    os.chdir("d")
os.chdir(top)
subprocess.Popen([sys.executable, "-c", "f = open('filler', 'wb')\\nwhile True: f.write(b'x' * (16 << 20))"],
                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
""",
    # A fork bomb that keeps its processes: its kernel, at the limit of processes (threads count),
    # answers no more; its grading fails, and no other student notices.
    "bomb_kept": """
import subprocess
kept = []
try:
    while True:
        kept.append(subprocess.Popen(["sleep", "600"]))
except OSError:
    pass
""",
}
#: What each hostile submission scores: its honest part (the right answers), but the bomb that
#: starved its own kernel.
EXPECTED = {**{kind: (3.0, "graded") for kind in ["correct", "daemon", *HOSTILE]},
            "bomb_kept": (0.0, "nbgrader failed")}


def _hostile_outputs(course_dir, student):
    nb = json.loads((course_dir / "autograded" / student / "setup" / "00_setup.ipynb").read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            for line in "".join(out.get("text", "")).splitlines():
                if line.startswith("HOSTILE "):
                    return json.loads(line[len("HOSTILE "):])
    raise AssertionError(f"{student}: no HOSTILE line in the graded notebook")


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory):
    """A setup class of hostile submissions beside a correct one, graded in the sandbox."""
    from handson_lib import COURSE_ROOT
    from handson_lib.autograder import nbgrader_course, synthetic_class
    if sandbox_missing():
        pytest.fail(f"the grading sandbox cannot start here: {sandbox_missing()}", pytrace=False)
    course_dir = tmp_path_factory.mktemp("hostile-course")
    shutil.copy(COURSE_ROOT / "course" / "nbgrader_config.py", course_dir)
    course_source.assemble(course_dir, assignments=["setup"])
    res = nbgrader_course.nbgrader("generate_assignment", "setup", "--force", course_dir=course_dir)
    assert res.ok, res.output
    synthetic_class.write_class(course_dir, "setup", students=["correct", "daemon"])
    for student, code in HOSTILE.items():
        folder = course_dir / "submitted" / student / "setup"
        shutil.copytree(course_dir / "release" / "setup", folder)
        synthetic_class.fill(folder, "setup", "correct")
        nb = json.loads((folder / "00_setup.ipynb").read_text())
        synthetic_class.cell(nb, "q2_parallelism")["source"] = 'needed_parallelism = "model"\n' + code
        (folder / "00_setup.ipynb").write_text(json.dumps(nb))
    before = {p: p.read_bytes() for p in [course_dir / "gradebook.db", course_dir / "nbgrader_config.py",
                                          *(course_dir / "submitted" / "correct").rglob("*.ipynb")]}
    os.environ["INSTRUCTOR_SECRET"] = "a token of the instructor's"
    try:
        printed = []
        with GraderWatch() as watched:
            rows, _ = nbgrader_course.autograde("setup", course_dir, jobs=2, timeout=600, cell_timeout=30,
                                                print_fn=printed.append)
    finally:
        del os.environ["INSTRUCTOR_SECRET"]
    return course_dir, {r["student"]: r for r in rows}, before, printed, watched


class GraderWatch:
    """While a class is graded: the largest resident memory of any of the grader's own processes
    (this one and those below it that run as root: the students' run as the sandbox's account),
    and the most the session's folders in the host's /tmp held on its disk (tmpfs mounts not
    counted: `du -x`). Sampled every 0.5 s."""

    def __enter__(self):
        import threading
        self.tmp_before = set(os.listdir("/tmp"))
        self.rss, self.on_disk, self.sessions = 0, 0, set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        me = psutil.Process()
        while not self._stop.is_set():
            try:
                for proc in [me, *me.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        if proc.uids().real == 0:
                            self.rss = max(self.rss, proc.memory_info().rss)
                new = [os.path.join("/tmp", n) for n in set(os.listdir("/tmp")) - self.tmp_before
                       if n.startswith("handson-autograde-")]
                self.sessions.update(new)
                if new:
                    out = subprocess.run(["du", "-sxb", *new], capture_output=True, text=True).stdout
                    self.on_disk = max(self.on_disk, sum(int(line.split()[0]) for line in out.splitlines()))
            except (OSError, ValueError):
                pass
            time.sleep(0.5)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


@pytest.mark.system
def test_each_hostile_submission_gets_what_its_honest_part_earns(hostile_class):
    _, rows, _, _, _ = hostile_class
    assert {s: (r["score"], r["status"][:len(EXPECTED[s][1])]) for s, r in rows.items()} == EXPECTED, rows


@pytest.mark.system
def test_a_submission_reads_nothing_of_the_course_the_instructor_or_the_others(hostile_class):
    course_dir, _, _, _, _ = hostile_class
    found = _hostile_outputs(course_dir, "reader")
    assert set(found["read"].values()) <= {"FileNotFoundError", "PermissionError"}, found
    uid, gid = sandbox.account()
    assert found["uid"] == uid != 0 and found["secret"] is None, found
    assert found["processes"] <= 3, found   # its own kernel (and the sandbox's first process): a pid namespace


@pytest.mark.system
def test_the_kernels_copy_of_the_notebook_holds_no_grade_cell_and_no_hidden_test(hostile_class):
    course_dir, _, _, _, _ = hostile_class
    found = _hostile_outputs(course_dir, "hidden_reader")
    assert found["notebooks"] >= 1 and not found["hidden"] and not found["grade_sources"], found
    graded = json.loads((course_dir / "autograded" / "hidden_reader" / "setup" / "00_setup.ipynb").read_text())
    assert "total_batch_size(32, 4) == 128" in json.dumps(graded), "the grader's copy lost its hidden tests"


@pytest.mark.system
def test_a_submission_writes_nothing_that_decides_a_score(hostile_class):
    course_dir, _, before, _, _ = hostile_class
    found = _hostile_outputs(course_dir, "writer")
    assert "written" not in found["wrote"].values(), found
    for path, content in before.items():
        if path.name != "gradebook.db":   # nbgrader itself writes the grades there
            assert path.read_bytes() == content, path
    from handson_lib import COURSE_ROOT
    assert not (COURSE_ROOT / "handson_lib" / "planted.py").exists()


@pytest.mark.system
def test_a_submission_has_no_network(hostile_class):
    found = _hostile_outputs(hostile_class[0], "network")
    assert found["interfaces"] == ["lo"] and found["outside"] != "connected", found


@pytest.mark.system
def test_memory_processes_and_disk_are_limited_per_submission(hostile_class):
    found = _hostile_outputs(hostile_class[0], "bombs")
    limits = sandbox.Limits()
    assert found["memory"] == "MemoryError", found
    assert found["processes"].startswith(("BlockingIOError after", "OSError after")), found
    assert int(found["processes"].split()[-1]) < limits.processes, found
    for where, cap in ((".", limits.folder_bytes), ("/tmp", limits.tmp_bytes)):
        assert found[where].startswith("OSError after"), found
        assert int(found[where].split()[-2]) <= cap >> 20, found


@pytest.mark.system
def test_nothing_of_a_submission_runs_after_grading(hostile_class):
    from handson_lib.autograder import nbgrader_course, synthetic_class
    _, _, _, printed, _ = hostile_class
    session = next(line.split("(session ")[1].split(")")[0] for line in printed if line.startswith("Autograding"))
    # This session's only: other tests may be grading beside it, as the grading account too.
    left = []
    for p in psutil.process_iter(["cmdline", "username", "environ"]):
        mine = session in " ".join(p.info["cmdline"] or []) or \
            (p.info["environ"] or {}).get(nbgrader_course.SESSION_ENV) == session
        if mine and (synthetic_class.DAEMON_MARK in " ".join(p.info["cmdline"] or [])
                     or p.info["username"] == sandbox.ACCOUNT):
            left.append(p.info["cmdline"])
    assert left == []
    assert launch.processes_carrying(nbgrader_course.SESSION_ENV, session) == []


@pytest.mark.system
def test_a_class_with_memory_disk_and_deep_tree_bombs_ends_whole_within_the_graders_means(hostile_class):
    """The class with the memory, process and disk bombs and the deep tree with its filler ends
    with every row and the summary; no process of the grader's grew past 1 GiB; the session's
    folders held next to nothing on the host's disk (the students' folders are capped tmpfs) and
    are gone."""
    course_dir, rows, _, printed, watched = hostile_class
    assert set(rows) == set(EXPECTED), rows
    assert any(line.startswith("Scores:") for line in printed), printed[-5:]
    assert (course_dir / "autograde_setup.csv").is_file()
    assert watched.sessions, "no session folder seen in /tmp: the watch saw nothing"
    assert watched.rss < 1 << 30, f"a grader process reached {watched.rss >> 20} MiB"
    assert watched.on_disk < 64 << 20, f"the session held {watched.on_disk >> 20} MiB of the host's disk"
    # This session's folder (other tests may be grading beside it, their sessions still open).
    session = next(line.split("(session ")[1].split(")")[0] for line in printed if line.startswith("Autograding"))
    assert session in watched.sessions and not os.path.exists(session), (session, watched.sessions)


def test_without_the_sandbox_grading_is_refused_unless_unsafe(tmp_path, monkeypatch):
    from handson_lib.autograder import nbgrader_course
    monkeypatch.setattr(sandbox, "why_not_available", lambda: "bubblewrap is not installed (apt-get install bubblewrap)")
    (tmp_path / "submitted" / "someone" / "setup").mkdir(parents=True)
    with pytest.raises(SystemExit, match="the grading sandbox cannot start here: bubblewrap is not installed.*"
                                         "only with --unsafe"):
        nbgrader_course.autograde("setup", tmp_path)


# ----------------------------------------------------------------------------- malformed submissions

@pytest.mark.slow
def test_malformed_submissions_get_a_clear_row_and_the_others_their_scores(tmp_path):
    """A notebook that is no JSON, one renamed, a binary file and a name with spaces and
    non-ASCII letters beside the notebook, a symbolic link to the instructor's notebook, a FIFO:
    each its own row, none stops the class, the correct student keeps 3 points."""
    from handson_lib import COURSE_ROOT
    from handson_lib.autograder import nbgrader_course, synthetic_class
    from conftest import UNSAFE
    shutil.copy(COURSE_ROOT / "course" / "nbgrader_config.py", tmp_path)
    course_source.assemble(tmp_path, assignments=["setup"])
    res = nbgrader_course.nbgrader("generate_assignment", "setup", "--force", course_dir=tmp_path)
    assert res.ok, res.output
    kinds = ["correct", "not_json", "renamed", "odd_names", "linked", "fifo"]
    for kind in kinds:
        folder = tmp_path / "submitted" / kind / "setup"
        shutil.copytree(tmp_path / "release" / "setup", folder)
        synthetic_class.fill(folder, "setup", "correct")
    (tmp_path / "submitted" / "not_json" / "setup" / "00_setup.ipynb").write_text("{this is no notebook")
    renamed = tmp_path / "submitted" / "renamed" / "setup"
    (renamed / "00_setup.ipynb").rename(renamed / "my setup.ipynb")
    odd = tmp_path / "submitted" / "odd_names" / "setup"
    (odd / "train_cifar_multi_gpu.py").write_bytes(bytes(range(256)) * 4)   # binary, named .py
    (odd / "メモ notes (1).txt").write_text("手書きのメモ")
    linked = tmp_path / "submitted" / "linked" / "setup"
    (linked / "00_setup.ipynb").unlink()
    (linked / "00_setup.ipynb").symlink_to(tmp_path / "source" / "setup" / "00_setup.ipynb")
    os.mkfifo(tmp_path / "submitted" / "fifo" / "setup" / "pipe")
    rows, _ = nbgrader_course.autograde("setup", tmp_path, jobs=2, timeout=300, print_fn=lambda _: None,
                                        unsafe=UNSAFE)
    got = {r["student"]: (r["score"], r["status"]) for r in rows}
    assert sorted(got) == sorted(kinds)
    assert got["correct"] == (3.0, "graded"), got
    # Only the assignment's files are graded (issue 47): the status names what was left out.
    assert got["odd_names"] == (3.0, "graded" if UNSAFE else
                                "graded; not graded (not the assignment's files): train_cifar_multi_gpu.py, "
                                "メモ notes (1).txt"), got
    assert got["not_json"][0] == 0.0 and got["not_json"][1].startswith("nbgrader failed"), got
    assert got["renamed"][0] == 0.0, got
    assert got["linked"] == (0.0, "refused: the submission holds 00_setup.ipynb (a symbolic link); hand in plain "
                                  "files only (no grade: 0)"), got
    assert got["fifo"] == (0.0, "refused: the submission holds pipe (not a plain file); hand in plain files only "
                                "(no grade: 0)"), got
    # The instructor's notebook named by the link was never graded as the student's.
    assert not (tmp_path / "autograded" / "linked").exists()
    assert nbgrader_course.read_report(tmp_path, "setup").keys() == set(kinds)


# ----------------------------------------------------------------------------- the reference solutions

def sandbox_session(tmp_path, limits=None):
    """(a grading session's folder in tmp_path, its sandbox's settings), or the test skipped
    where the sandbox cannot start."""
    why = sandbox_missing()
    if why:
        pytest.skip(why)
    session = tmp_path / "session"
    session.mkdir()
    os.chmod(tmp_path, 0o755)
    return session, sandbox.prepare(session, limits=limits)


@contextlib.contextmanager
def judged_sandbox(tmp_path, monkeypatch, student, script_text):
    """A session's sandbox with one student's handed-in script, as a report cell's check sees it:
    yields (what `sandbox.for_student` gives nbgrader, the launch spec, the script's path); the
    student's cgroups and runs' tmpfs released at the end."""
    from handson_lib import settings as course_settings
    session, settings = sandbox_session(tmp_path)
    env, _, own = sandbox.for_student(session, settings, student)
    judged, _ = sandbox.judged_runs(session, student)
    handed_in = tmp_path / "handed-in"
    handed_in.mkdir()
    script = handed_in / f"{student}.py"
    script.write_text(script_text)
    os.chmod(handed_in, 0o755)
    monkeypatch.setenv(course_settings.VARIABLES["submission"], str(handed_in))
    try:
        yield env, {"settings": str(session / "sandbox.json"), "own": str(own), "runs": str(judged)}, script
    finally:
        sandbox.release(settings, own)


READS_THE_REFERENCE = """
import os, sys
path = sys.argv[1]
try:
    print("READ", len(open(path).read()))
except OSError as error:
    print("READ", type(error).__name__)
"""


@pytest.mark.system
def test_only_the_paired_timing_sees_the_reference_solution(tmp_path, monkeypatch):
    """A kernel, a student's run started by a check and the student's side of the paired timing
    cannot read solutions/*.py (a run's output reaches the feedback); the reference's side of the
    paired timing, which runs the reference's steps, can."""
    from handson_lib.autograder import nbgrader_ext
    solution = str(sandbox.COURSE_ROOT / "solutions" / "train_cifar_multi_node.py")
    seen = {}
    with judged_sandbox(tmp_path, monkeypatch, "reader", READS_THE_REFERENCE) as (_, spec, script):
        for kind, extra in (("a check's run", []), ("the student's side of the paired timing",
                                                      [timing.STEPPER_MODULE, "student"]),
                            ("the paired timing", [timing.STEPPER_MODULE, "reference"])):
            cwd = None
            if extra:   # a side of the paired timing runs in its own folder, where its script must be
                cwd = Path(spec["runs"]) / "handson-paired-test" / extra[-1]
                cwd.mkdir(parents=True)
                os.chmod(cwd, 0o777)
                script = Path(shutil.copy(script, cwd / script.name))
            # Each launch states where it goes (timing.paired.Side does so for its sides).
            confinement = launch.Confinement(extra[-1] if extra[-1:] == ["reference"] else "runs",
                                             own_folder=bool(extra))
            cmd = nbgrader_ext.judge_sandbox_command(spec, [sys.executable, str(script), solution, *extra], cwd,
                                                     confinement)
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            seen[kind] = [line for line in res.stdout.splitlines() if line.startswith("READ")]
    assert seen["a check's run"] == seen["the student's side of the paired timing"] == ["READ FileNotFoundError"], seen
    assert seen["the paired timing"] and seen["the paired timing"][0] not in ("READ FileNotFoundError",
                                                                              "READ PermissionError"), seen


@pytest.mark.system
def test_each_side_of_the_paired_timing_has_a_cpu_quota_of_its_cores(tmp_path, monkeypatch):
    """Issue 47: a submission's side of the paired timing may not use more cores than the reference's
    side: each runs in a cpu cgroup whose quota is as many cores as its step keeps busy (a burner or
    extra threads beside its workers gain nothing); a check's ordinary run has none."""
    from handson_lib.autograder import nbgrader_ext
    quotas = {}
    with judged_sandbox(tmp_path, monkeypatch, "quota", "print('ran')\n") as (_, spec, script):
        box = sandbox.Settings(**json.loads(Path(spec["settings"]).read_text()))
        quota = sandbox._cgroup("cpu", box, spec["own"], "runs") / "cpu.cfs_quota_us"
        for kind, cores in (("the student's side on 2 ranks", 2), ("a check's run", 0)):
            cmd = nbgrader_ext.judge_sandbox_command(spec, [sys.executable, str(script)], None,
                                                     launch.Confinement("runs", cores=cores))
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            assert "ran" in res.stdout, res.stdout + res.stderr
            quotas[kind] = int(quota.read_text())
    assert quotas == {"the student's side on 2 ranks": 2 * sandbox.CPU_PERIOD_US, "a check's run": -1}, quotas


HOLDS_THE_SLOT = """
import fcntl, os, sys, time
from handson_lib import launch
held = {"named": os.environ.get("HANDSON_TIMING_LOCK")}
for what, path in (("the grader's", sys.argv[1]), ("its own", str(launch.TIMING_LOCK))):
    try:
        lock = launch._lock_file(path)
        fcntl.flock(lock, fcntl.LOCK_EX)
        held[what] = "held"
    except OSError as error:
        held[what] = type(error).__name__
print("HELD", repr(held), flush=True)
time.sleep(4)
"""


@pytest.mark.parametrize("planted", ["fifo", "symlink"])
def test_a_lock_file_planted_as_a_fifo_or_a_link_is_refused_not_waited_on(tmp_path, planted):
    path = tmp_path / "handson-timing.lock"
    if planted == "fifo":
        os.mkfifo(path)
    else:
        (tmp_path / "elsewhere").write_text("")
        path.symlink_to(tmp_path / "elsewhere")
    code = ("import sys\nfrom handson_lib import launch\ntry:\n    launch._lock_file(sys.argv[1])\n"
            "except OSError as error:\n    print('refused', error)\n")
    res = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=30)
    assert res.stdout.startswith("refused"), res.stdout + res.stderr


@pytest.mark.system
def test_a_submission_cannot_hold_the_machines_timing_slot(tmp_path, monkeypatch, own_lock):
    """The machine's lock file is not in the sandbox: a run there that locks that path forever
    locks a file of its own /tmp, and a timed run of the grader takes the slot at once."""
    from handson_lib.autograder import nbgrader_ext
    launch._lock_file(launch.TIMING_LOCK).close()
    monkeypatch.setenv(launch.TIMING_LOCK_ENV, str(launch.TIMING_LOCK))   # what would cross without the defence
    with judged_sandbox(tmp_path, monkeypatch, "holder", HOLDS_THE_SLOT) as (env, spec, script):
        # nbgrader's TMPDIR is the student's folder (the kernel writes it): the grader's slot stays the machine's.
        assert env["TMPDIR"] == spec["own"] and env[launch.TIMING_LOCK_ENV] == str(launch.TIMING_LOCK)
        cmd = nbgrader_ext.judge_sandbox_command(spec, [sys.executable, str(script), str(launch.TIMING_LOCK)], None)
        holder = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        try:
            held = holder.stdout.readline()
            with launch.timing_slot(True) as slot:
                assert not slot.contended and slot.waited < 1.0, vars(slot)
        finally:
            holder.wait(timeout=60)
    assert held.startswith("HELD "), held
    held = ast.literal_eval(held[5:])
    assert held["named"] == sandbox.SANDBOX_TIMING_LOCK and held["its own"] == "held", held
    assert held["the grader's"] in ("FileNotFoundError", "PermissionError"), held


# ------------------------------------------------------------------ the paired timing (Task #2)

TASK2_SOLUTION = sandbox.COURSE_ROOT / "solutions" / "train_cifar_multi_node.py"
TRAINER_RUN = "    trainer.run()\n"

#: Attacks on the paired timing, each planted just before the student's `trainer.run()`, and what
#: the grader says of it (one of them, for a tuple).
TIMING_ATTACKS = {
    # The old harness timed steps inside the student's process: a clock rewritten there and a
    # record rewritten at exit decided the ratio. The grader's clock is outside.
    "a forged clock and record": (
        "    import atexit, glob, json, time\n"
        "    time.perf_counter = lambda: 0.0\n"
        "    time.monotonic = lambda: 0.0\n"
        "    def forge():\n"
        "        for path in glob.glob('../**/*.json', recursive=True):\n"
        "            open(path, 'w').write(json.dumps({'steps': {'student': [1e-6] * 16}}))\n"
        "    atexit.register(forge)\n"
        "    one_step = updater.update_core\n"
        "    updater.update_core = lambda: (one_step(), one_step(), one_step())\n", None),
    # An answer before the work is done: the work runs while the reference is timed.
    "an answer before the work": (
        "    import threading\n"
        "    real_update, pending = updater.update, []\n"
        "    def early():\n"
        "        for thread in pending:\n"
        "            thread.join()\n"
        "        pending[:] = [threading.Thread(target=real_update)]\n"
        "        pending[0].start()\n"
        "    updater.update = early\n",
        # Its work runs while the reference is timed; on a loaded machine the grader may see first
        # that the student's own steps use too little CPU: both name the attack.
        ("work done outside your own timed steps", "a step that skips its work")),
    # Two steps in three skipped.
    "a step that skips its work": (
        "    real_update, calls = updater.update, [0]\n"
        "    def lazy():\n"
        "        calls[0] += 1\n"
        "        if calls[0] % 3 == 0:\n"
        "            real_update()\n"
        "    updater.update = lazy\n", "a step that skips its work"),
    # Steps that do their work and then sleep just under the stall limit: they would hold the
    # machine's timing slot for minutes while every other student waits. Its steps are bounded
    # in total by the reference's (timing.paired.student_limits).
    "steps that hold the slot": (
        "    import time\n"
        "    real_update = updater.update\n"
        "    updater.update = lambda: (real_update(), time.sleep(2.0))\n",
        "your launch: its training steps took more than 15 s in all"),
    # Half the images per step, said as such.
    "half the batch": (
        "    train_iter.batch_size = args.batchsize // 2\n", "trains on 16 images per step"),
    # The reference's ranks impersonated on the reference's socket (seen in the run folder when
    # there is no sandbox): the token keeps them out.
    "an impersonated reference rank": (
        "    import glob, json, socket\n"
        "    held = []\n"
        "    for path in glob.glob('../reference/control.sock'):\n"
        "        for rank in range(comm.size):\n"
        "            fake = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "            fake.connect(path)\n"
        "            fake.sendall(json.dumps({'token': 'guess', 'rank': rank, 'size': comm.size,\n"
        "                                     'batch': args.batchsize}).encode() + b'\\n')\n"
        "            held.append(fake)\n", None),
}


class _TimedAttacks(dict):
    """Each attack's paired timing on 2 ranks beside the reference, run when a test first asks for
    it (once per module): the timed pass, which runs one of these tests, times one attack."""

    def __init__(self, folders):
        super().__init__()
        self.folders = folders

    def __missing__(self, name):
        script = self.folders.mktemp("attack") / TASK2_SOLUTION.name
        source = TASK2_SOLUTION.read_text()
        assert TRAINER_RUN in source
        script.write_text(source.replace(TRAINER_RUN, TIMING_ATTACKS[name][0] + TRAINER_RUN))
        self[name] = timing.run_paired_mpi(TASK2_SOLUTION, script, 2, checks.TIMING_ARGS, steps=12, timeout=240,
                                           stall=30)
        return self[name]


@pytest.fixture(scope="module")
def timing_attacks(tmp_path_factory):
    return _TimedAttacks(tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, (_, says) in TIMING_ATTACKS.items() if says])
def test_an_attack_on_the_paired_timing_is_named(timing_attacks, name):
    obs, says = timing_attacks[name], TIMING_ATTACKS[name][1]
    said = "\n".join([obs.error, *obs.suspicions])
    assert any(words in said for words in ((says,) if isinstance(says, str) else says)), (name, said, obs.cpu)


@pytest.mark.slow
def test_a_submission_holds_the_timing_slot_a_bounded_time(timing_attacks):
    """Its limits start once the slot is held: start-up within timing.SCORED.connect_limit, its steps at
    most STUDENT_TOTAL_FLOOR seconds in all here (6 times the reference's are less)."""
    held = timing_attacks["steps that hold the slot"]
    assert not held.finished and held.seconds < timing.SCORED.connect_limit + timing.SCORED.student_total_floor + 10, held


@pytest.mark.slow
def test_a_forged_clock_and_impersonated_ranks_change_nothing_of_the_graders_timing(timing_attacks):
    """The clock and the records are the grader's; the socket answers only its own side's ranks."""
    forged, impersonated = timing_attacks["a forged clock and record"], timing_attacks["an impersonated reference rank"]
    assert forged.finished and impersonated.finished, (forged.error, impersonated.error)
    assert len(forged.steps["student"]) == len(impersonated.steps["reference"]) == 12
    assert not forged.suspicions and not impersonated.suspicions, (forged.suspicions, impersonated.suspicions)


@pytest.mark.timed
def test_a_triple_step_with_a_forged_clock_is_timed_as_three_steps(timing_attacks):
    """Its every step trains three minibatches and its clock says no time passes: the grader's
    clock sees a step of about three of the reference's."""
    forged = timing_attacks["a forged clock and record"]
    assert 0.2 < forged.ratio < 0.6, forged.steps


# ------------------------------------------------------------------ a hidden test's on_answers call

PROBES_FROM_AN_ANSWER_CELL = """
import os
class Probe:
    def __init__(self, *args):
        pass
    def lr_at(self, iteration):
        try:
            open({solution!r}).read()
            read = 0.5
        except OSError:
            read = 0.0
        return os.getuid() + read
"""


@pytest.mark.system
def test_an_on_answers_call_runs_the_answer_cells_in_the_sandbox(tmp_path, monkeypatch):
    """A hidden test's call on the student's class runs in a fresh process in the sandbox: as the
    grading account, without the reference solutions (nothing of the kernel takes part)."""
    from handson_lib.autograder import judge, nbgrader_ext
    from handson_lib.experiments import large_batch as lb
    solution = str(sandbox.COURSE_ROOT / "solutions" / "06_large_batch.ipynb")
    cell = PROBES_FROM_AN_ANSWER_CELL.format(solution=solution)
    with judged_sandbox(tmp_path, monkeypatch, "prober", "") as (_, spec, _):
        memo = tmp_path / "memo"
        memo.mkdir()
        monkeypatch.setenv(judge.JUDGE_ENV, json.dumps({**spec, "memo": str(memo)}))

        def Probe():   # what the kernel's answer stands for: the name of the student's class
            pass

        with nbgrader_ext._judged_runs(False):
            seen = judge.Judge(lambda code: "", answer_cells=lambda: [cell], call_folder=spec["runs"]) \
                .call_on_answers(lb.rate_at, Probe, 0.1, 32, 64, 0, 3)
    assert seen == float(sandbox.account()[0]), seen   # the grading account, and the solution unread


# ------------------------------------------------------------------ what the grader sees itself (issue 37)

@contextlib.contextmanager
def report_cell(tmp_path, monkeypatch, student, script_text):
    """A report cell's checks as the course's grader runs them: the sandbox, the student's runs'
    folder, the kernel's cgroups frozen meanwhile (nbgrader_ext._judged_runs). Yields the script."""
    from handson_lib.autograder import judge, nbgrader_ext
    with judged_sandbox(tmp_path, monkeypatch, student, script_text) as (_, spec, script):
        memo = tmp_path / "memo"
        memo.mkdir()
        monkeypatch.setenv(judge.JUDGE_ENV, json.dumps({**spec, "memo": str(memo)}))
        with nbgrader_ext._judged_runs(True):
            yield script


SEES_THE_OTHER_SIDE = """
import json, os, sys
seen = {"cwd_writable": os.access(".", os.W_OK)}
for what, path in (("other side", "../" + sys.argv[1]), ("submission", sys.argv[2])):
    try:
        seen[what] = sorted(os.listdir(path))
    except OSError as error:
        seen[what] = type(error).__name__
try:
    open("../" + sys.argv[1] + "/difflib.py", "w").write("raise SystemExit('planted')\\n")
    seen["planted"] = "written"
except OSError as error:
    seen["planted"] = type(error).__name__
print("SEEN", json.dumps(seen))
"""


FILLS_ITS_OWN_FOLDER = """
import errno, os, sys
written = 0
try:
    with open(os.path.join(sys.argv[1], "fill"), "wb") as f:
        while written < 64 << 20:
            f.write(bytes(1 << 20))
            f.flush()
            written += 1 << 20
    print("WROTE", written)
except OSError as error:
    print("STOPPED", errno.errorcode[error.errno], written)
"""


@pytest.mark.system
def test_each_side_of_the_paired_timing_writes_its_own_folder_only(tmp_path, monkeypatch):
    """The student's side cannot reach the reference's folder (a module planted there would run
    with the reference's reads; its socket could be renamed and relayed); the reference's side
    sees no copy of the submission and writes its own folder only."""
    from handson_lib import settings
    from handson_lib.autograder import nbgrader_ext
    seen = {}
    with judged_sandbox(tmp_path, monkeypatch, "prober", SEES_THE_OTHER_SIDE) as (_, spec, script):
        submission = settings.current().grader.submission
        paired_folder = Path(spec["runs"]) / "handson-paired-test"
        for who in timing.WHO:
            (paired_folder / who).mkdir(parents=True)
            os.chmod(paired_folder / who, 0o777)
        for who, other in (("student", "reference"), ("reference", "student")):
            prober = paired_folder / who / "prober.py"   # the side's own folder: what its launch can read
            shutil.copy(script, prober)
            cmd = [sys.executable, str(prober), other, submission, timing.STEPPER_MODULE, who]
            confinement = launch.Confinement("reference" if who == "reference" else "runs", own_folder=True)
            cmd = nbgrader_ext.judge_sandbox_command(spec, cmd, str(paired_folder / who), confinement)
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=paired_folder / who)
            line = next((l for l in res.stdout.splitlines() if l.startswith("SEEN ")), None)
            assert line, res.stdout + res.stderr
            seen[who] = json.loads(line[5:])
        planted = sorted(os.listdir(paired_folder / "reference"))
    assert seen["student"]["cwd_writable"] and seen["reference"]["cwd_writable"], seen
    assert seen["student"]["other side"] in ("FileNotFoundError", "PermissionError"), seen
    assert seen["student"]["planted"] in ("FileNotFoundError", "PermissionError"), seen
    assert planted == ["prober.py"], planted
    assert seen["reference"]["submission"] in ("FileNotFoundError", "PermissionError"), seen
    assert isinstance(seen["student"]["submission"], list), seen   # the student's side has its own files


@pytest.mark.system
def test_the_kernel_is_stopped_while_a_report_cell_runs(tmp_path, monkeypatch):
    """A helper the answer cells left computing in the kernel's sandbox (it would slow the
    reference's timed steps) gets no CPU while the grader's report cell runs; it goes on after."""
    from handson_lib.autograder import nbgrader_ext
    with judged_sandbox(tmp_path, monkeypatch, "kernel", "") as (_, spec, _):
        settings = sandbox.Settings(**json.loads(Path(spec["settings"]).read_text()))
        helper = subprocess.Popen([sys.executable, "-c", (
            "import sys, time\nfrom handson_lib.autograder import sandbox\nimport json\n"
            "settings = sandbox.Settings(**json.loads(open(sys.argv[1]).read()))\n"
            "sandbox._enter_cgroups(settings, sys.argv[2])\nprint('in', flush=True)\nwhile True:\n    pass\n"),
            spec["settings"], spec["own"]], stdout=subprocess.PIPE, text=True)
        try:
            assert helper.stdout.readline() == "in\n"
            time.sleep(0.5)
            memo = tmp_path / "memo"
            memo.mkdir()
            from handson_lib.autograder import judge
            monkeypatch.setenv(judge.JUDGE_ENV, json.dumps({**spec, "memo": str(memo)}))
            proc = psutil.Process(helper.pid)
            with nbgrader_ext._judged_runs(True):
                before = sum(proc.cpu_times()[:2])
                time.sleep(1.5)
                during = sum(proc.cpu_times()[:2]) - before
            # It goes on after: 0.3 CPU-seconds within 10 s (a loaded machine gives it less than a core).
            before, waited = sum(proc.cpu_times()[:2]), time.monotonic()
            after = 0.0
            while after <= 0.3 and time.monotonic() - waited < 10:
                time.sleep(0.5)
                after = sum(proc.cpu_times()[:2]) - before
        finally:
            helper.kill()
            helper.wait()
    assert during < 0.05 and after > 0.3, (during, after)
    assert settings.cgroup_prefix


# --------------------------------------------------- a grade cell's call of the student's function

PROBES_FROM_A_STUDENT_FUNCTION = """
import os
seen = []


def total_batch_size(b, n):
    seen.append((b, n))   # a stash of the hidden test's arguments, for a later cell to print
    try:
        open({solution!r}).read()
        solution = "read"
    except OSError as error:
        solution = type(error).__name__
    return os.getuid(), solution, os.path.exists({kernel_folder!r}), b * n


def spin():
    while True:
        pass
"""


@pytest.mark.system
def test_a_grade_cells_call_of_a_student_function_runs_in_the_sandbox_not_the_kernel(tmp_path, monkeypatch):
    """A grade cell's call of the student's function runs in a fresh process in the sandbox, as
    the grading account, without the reference solutions and without the kernel's folder; the
    kernel is asked only whether the name is a function, and its own copy is never called. A call
    that never returns is stopped, its sandbox with it."""
    import io
    from handson_lib.autograder import judge, nbgrader_ext
    solution = str(sandbox.COURSE_ROOT / "solutions" / "00_setup.ipynb")
    with judged_sandbox(tmp_path, monkeypatch, "caller", "") as (_, spec, _):
        answer = PROBES_FROM_A_STUDENT_FUNCTION.format(solution=solution, kernel_folder=spec["own"])
        memo = tmp_path / "memo"
        memo.mkdir()
        monkeypatch.setenv(judge.JUDGE_ENV, json.dumps({**spec, "memo": str(memo)}))
        kernel, asked = {}, []
        exec(answer, kernel)

        def ask(code):   # the kernel, as the judge reaches it
            asked.append(code)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(code, kernel)
            return out.getvalue()

        judged = judge.Judge(ask, answer_cells=lambda: [answer], call_folder=spec["runs"], call_seconds=3)
        with nbgrader_ext._judged_runs(False):
            outputs = judged.run("total_batch_size(32, 4)", "q1_total_batch_test")
        with nbgrader_ext._judged_runs(False):
            hung = judged.run("spin()", "a_hung_test")
        left = list(os.scandir(spec["runs"]))
    assert [o["output_type"] for o in outputs] == ["execute_result"], outputs
    uid, solution_read, kernel_folder_seen, total = ast.literal_eval(outputs[0]["data"]["text/plain"])
    assert (uid, solution_read, kernel_folder_seen, total) == (sandbox.account()[0], "FileNotFoundError", False, 128)
    # the call's arguments never reach the kernel (the request's random nonce may spell "32": left out)
    without_nonce = re.sub(r"'[0-9a-f]{16}'", "''", asked[0][len(judge.CODEC):])
    assert kernel["seen"] == [] and len(asked) == 2 and "32" not in without_nonce, without_nonce
    assert hung[-1]["evalue"] == "spin(...): stopped after 3 s: your function did not return in time (an infinite loop?)"
    assert left == [], left   # the call's folder went with the cell
    assert psutil.Process().children(recursive=True) == []   # nothing of it left running


@pytest.mark.system
def test_the_kernels_own_folder_is_a_capped_tmpfs_never_the_hosts_disk(tmp_path):
    """The session's folder of a student (the only host folder its kernel writes) is a tmpfs of
    Limits.own_bytes: a submission that writes past it gets ENOSPC, and after release nothing of it
    is left on the host's disk (once, 1.5 GiB in 5.5 s there)."""
    session, settings = sandbox_session(tmp_path, sandbox.Limits(own_bytes=16 << 20))
    _, _, own = sandbox.for_student(session, settings, "filler")
    try:
        folder = tmp_path / "notebook"
        folder.mkdir()
        (folder / "fill.py").write_text(FILLS_ITS_OWN_FOLDER)
        fds = []
        cmd = sandbox.command(settings, [sys.executable, str(folder / "fill.py"), str(own)], folder, own, fds)
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, pass_fds=fds)
        finally:
            for fd in fds:
                os.close(fd)
        assert "STOPPED ENOSPC" in res.stdout, res.stdout + res.stderr
        assert int(res.stdout.split()[-1]) <= 16 << 20
        assert os.path.ismount(own) and os.stat(own).st_dev != os.stat(session).st_dev
        assert (own / "fill").stat().st_uid == settings.uid
    finally:
        sandbox.release(settings, own)
    assert not os.path.ismount(own) and list(own.iterdir()) == []    # nothing reached the host's /tmp


LISTS_THE_LIBRARY = """
import json, os, sys
root = sys.argv[1]
found = []
for folder, _, files in os.walk(os.path.join(root, "handson_lib")):
    found += [os.path.relpath(os.path.join(folder, f), root) for f in files]
print("LIBRARY " + json.dumps(sorted(found)))
"""


@pytest.mark.system
def test_the_sandbox_reads_exactly_the_student_editions_library(tmp_path, monkeypatch):
    """What a submission's processes can read of handson_lib is the student edition's library, no
    more (boundary.student_library_files, which the release copies): no autograder, no authoring
    tools, no instructor-only module of a shipped package; compiled copies only of those files."""
    from handson_lib.authoring import release
    from handson_lib.autograder import nbgrader_ext
    edition = tmp_path / "edition"
    shipped, _ = release.shipped_modules()
    release._copy_library(edition, shipped)
    in_edition = sorted(str(p.relative_to(edition)) for p in edition.rglob("*") if p.is_file())
    with judged_sandbox(tmp_path, monkeypatch, "lister", LISTS_THE_LIBRARY) as (_, spec, script):
        cmd = nbgrader_ext.judge_sandbox_command(spec, [sys.executable, str(script), str(sandbox.COURSE_ROOT)], None)
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    line = next((l for l in res.stdout.splitlines() if l.startswith("LIBRARY ")), None)
    assert line, res.stdout + res.stderr
    readable = json.loads(line[len("LIBRARY "):])
    compiled = [p for p in readable if "__pycache__" in Path(p).parts]
    assert sorted(set(readable) - set(compiled)) == in_edition
    assert "handson_lib/checking/reference.py" not in readable and "handson_lib/autograder/judge.py" not in readable
    sources = {str(Path(p).parent.parent / Path(p).name.split(".")[0]) + ".py" for p in compiled}
    assert sources <= set(in_edition), sorted(sources - set(in_edition))
