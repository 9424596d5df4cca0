"""Instructor workflow, end to end with nbgrader's CLI: a class of synthetic students is
autograded in parallel and each kind of bad submission gets its expected score."""

import csv
import html
import json
import re
import shutil

import psutil
import pytest

from handson_lib import course
from conftest import ROOT

ANSWERS = {
    "q1_total_batch": "def total_batch_size(batch_per_worker, n_workers):\n    return batch_per_worker * n_workers\n",
    "q2_parallelism": 'needed_parallelism = "model"\n',
    "q3_lr": "n_gpus = 2\nlr_set_by_script = 0.05\n",
}
WRONG_Q1 = "def total_batch_size(b, n):\n    return b\n"


def _cell(nb, grade_id):
    return next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)


def _tamper(nb):
    _cell(nb, "q1_total_batch_test")["source"] = "pass  # always passes\n"


def _delete_grade_cell(nb):
    nb["cells"].remove(_cell(nb, "q2_parallelism_test"))


#: student -> (answers, edit of the notebook, expected score out of 3, expected status start)
CLASS = {
    "correct": (ANSWERS, None, 3, "graded"),
    "skeleton": ({}, None, 0, "graded"),
    "wrong_q1": ({**ANSWERS, "q1_total_batch": WRONG_Q1}, None, 2, "graded"),
    "infinite_loop": ({**ANSWERS, "q1_total_batch": "while True:\n    pass\n"}, None, 2, "graded"),
    "sys_exit": ({**ANSWERS, "q2_parallelism": "import sys\nsys.exit('bye')\n"}, None, 2, "graded"),
    "kernel_killed": ({**ANSWERS, "q3_lr": "import os\nos._exit(1)\n"}, None, 0, "nbgrader failed: Kernel died"),
    "huge_output": ({**ANSWERS, "q2_parallelism":
                     'needed_parallelism = "model"\nfor i in range(200000):\n    print("spam", i)\n'}, None, 3, "graded"),
    "tampered_test": ({**ANSWERS, "q1_total_batch": WRONG_Q1}, _tamper, 2, "graded"),
    "deleted_grade_cell": (ANSWERS, _delete_grade_cell, 2, "graded"),
}


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    course_dir = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "course" / "nbgrader_config.py", course_dir)
    course.assemble(course_dir, assignments=["setup"])
    res = course.nbgrader("generate_assignment", "setup", "--force", course_dir=course_dir)
    assert res.ok, res.output
    release = json.loads((course_dir / "release" / "setup" / "00_setup.ipynb").read_text())
    for student, (answers, edit, _, _) in CLASS.items():
        nb = json.loads(json.dumps(release))
        for grade_id, source in answers.items():
            _cell(nb, grade_id)["source"] = source
        if edit:
            edit(nb)
        folder = course_dir / "submitted" / student / "setup"
        folder.mkdir(parents=True)
        (folder / "00_setup.ipynb").write_text(json.dumps(nb))
    rows, seconds = course.autograde("setup", course_dir, jobs=2, timeout=120, cell_timeout=15)
    return course_dir, {r["student"]: r for r in rows}


def test_release_leaks_no_solution(graded_class):
    course_dir, _ = graded_class
    text = (course_dir / "release" / "setup" / "00_setup.ipynb").read_text()
    assert "return batch_per_worker * n_workers" not in text and "HIDDEN TESTS" not in text
    assert "# PUT YOUR CODE HERE" in text


@pytest.mark.parametrize("student", sorted(CLASS))
def test_each_submission_gets_its_expected_score(graded_class, student):
    _, rows = graded_class
    expected_score, expected_status = CLASS[student][2], CLASS[student][3]
    assert rows[student]["score"] == expected_score, rows[student]
    assert rows[student]["status"].startswith(expected_status), rows[student]


def test_huge_output_is_cut_in_the_gradebook_copy(graded_class):
    course_dir, _ = graded_class
    nb = json.loads((course_dir / "autograded" / "huge_output" / "setup" / "00_setup.ipynb").read_text())
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    assert "spam 10" in text and text.count("spam") <= 600


def test_feedback_hides_hidden_tests_and_export_has_every_student(graded_class):
    course_dir, rows = graded_class
    res = course.nbgrader("generate_feedback", "setup", "--force", course_dir=course_dir)
    assert res.ok, res.output
    page = (course_dir / "feedback" / "skeleton" / "setup" / "00_setup.html").read_text()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))  # what the student reads
    assert "total_batch_size(32, 2) == 64" in text  # the visible test is shown
    assert 'needed_parallelism == "model"' not in text and "total_batch_size(128, 8)" not in text
    assert "AssertionError   (traceback not shown in feedback)" in text
    assert "NameError: name 'needed_parallelism' is not defined" in text
    res = course.nbgrader("export", course_dir=course_dir)
    assert res.ok, res.output
    with (course_dir / "grades.csv").open() as f:
        exported = {r["student_id"]: float(r["score"]) for r in csv.DictReader(f)}
    for student, (_, _, score, _) in CLASS.items():
        assert exported.get(student) == score, (student, exported)


def test_no_run_is_left_behind(graded_class):
    course_dir, _ = graded_class
    leftovers = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(str(course_dir) in part for part in proc.info["cmdline"] or []):
                leftovers.append(proc.info["cmdline"])
        except psutil.Error:
            pass
    assert leftovers == []


def test_task1_grades_the_scripts_each_student_handed_in(tmp_path):
    """The assignment's source holds the skeleton scripts; the student's own scripts must be the
    ones run (Autograde.exclude_overwriting), with throughput scored against the reference."""
    shutil.copy(ROOT / "course" / "nbgrader_config.py", tmp_path)
    course.assemble(tmp_path, assignments=["task1"])
    res = course.nbgrader("generate_assignment", "task1", "--force", course_dir=tmp_path)
    assert res.ok, res.output
    release = tmp_path / "release" / "task1"
    assert "# PUT YOUR CODE HERE" in (release / "train_cifar_multi_gpu.py").read_text()
    for student in ("correct", "skeleton"):
        shutil.copytree(release, tmp_path / "submitted" / student / "task1")
    correct = tmp_path / "submitted" / "correct" / "task1"
    nb = json.loads((correct / "01_multi_gpu.ipynb").read_text())
    _cell(nb, "q1_lr")["source"] = "lr_after_updater = 0.1 / 4\nimages_per_update = 4 * 64\n"
    (correct / "01_multi_gpu.ipynb").write_text(json.dumps(nb))
    for name in ("train_cifar_multi_gpu.py", "run_multi_gpu_training.sh"):
        shutil.copy(ROOT / "solutions" / name, correct / name)
    rows, _ = course.autograde("task1", tmp_path, jobs=1, timeout=600)
    scores = {r["student"]: (r["score"], r["max_score"]) for r in rows}
    assert scores == {"correct": (6.0, 6.0), "skeleton": (0.0, 6.0)}, rows
