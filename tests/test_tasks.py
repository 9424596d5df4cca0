"""The registry of tasks and assignments (handson_lib.tasks) against the course's files: every
graded solution notebook is an assignment, and what each entry names exists where it says."""

import json

import pytest

from handson_lib import tasks
from handson_lib.autograder import judge
from handson_lib.checking import checks
from handson_lib.sites import generate
from conftest import ROOT

SOLUTIONS = ROOT / "solutions"


def graded_notebooks(folder):
    """The notebooks of `folder` with a graded cell (nbgrader's `grade`)."""
    return {path.name for path in folder.glob("*.ipynb")
            if any(c.get("metadata", {}).get("nbgrader", {}).get("grade") for c in json.loads(path.read_text())["cells"])}


def not_assignments(folder, assignments=tasks.ASSIGNMENTS):
    return sorted(graded_notebooks(folder) - {a.notebook for a in assignments})


def test_every_graded_solution_notebook_is_an_assignment():
    assert graded_notebooks(SOLUTIONS)
    assert not_assignments(SOLUTIONS) == []


def test_a_graded_notebook_left_out_of_the_registry_is_named(tmp_path):
    cell = {"cell_type": "code", "source": "", "metadata": {"nbgrader": {"grade": True, "grade_id": "q"}}}
    (tmp_path / "08_new.ipynb").write_text(json.dumps({"cells": [cell]}))
    (tmp_path / "09_reading.ipynb").write_text(json.dumps({"cells": [{**cell, "metadata": {}}]}))
    assert not_assignments(tmp_path) == ["08_new.ipynb"]


@pytest.mark.parametrize("assignment", tasks.ASSIGNMENTS, ids=lambda a: a.name)
def test_an_assignments_notebook_and_files_exist(assignment):
    assert (SOLUTIONS / assignment.notebook).exists()
    for name in assignment.files:
        assert (SOLUTIONS / name).exists() and (ROOT / "exercises" / name).exists(), name


@pytest.mark.parametrize("task", tasks.TASKS, ids=lambda t: t.name)
def test_a_task_is_checked_by_a_locked_report_cell_of_its_assignment(task):
    assignment = tasks.assignment(task.assignment)
    assert task.script in assignment.files
    assert callable(getattr(checks, task.check)) and task.name in checks.TASKS
    cells = json.loads((SOLUTIONS / assignment.notebook).read_text())["cells"]
    report = [c for c in cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == task.report_cell]
    assert len(report) == 1 and report[0]["metadata"]["nbgrader"]["locked"]
    assert task.report_cell in judge.REPORT_CELLS
    if task.jobscript:
        assert generate.SCRIPTS[task.jobscript][0] == task.script and tasks.task(task.runs)
    else:
        assert task.gpus or task.ranks, "a script's check compares with a reference run"


def test_names_are_unique():
    for entries in (tasks.ASSIGNMENTS, tasks.TASKS):
        names = [e.name for e in entries]
        assert len(names) == len(set(names))
    cells = [t.report_cell for t in tasks.TASKS]
    assert len(cells) == len(set(cells))
