"""Task #1 submissions that attack the verdict rather than do the work (synthetic_class.CLASSES
["task1"]): the grader runs the report and grade cells itself (autograder/judge.py) and weighs the
run's records against its own evaluation of the trained model (checking/evidence.py). Apart from
test_autograde.py so that the parallel pass spreads the two classes over its workers."""

import pytest

from test_autograde import errors_in_autograded, grade_class


@pytest.fixture(scope="module")
def graded_task1_hostile(tmp_path_factory, request, reference_cache):
    return grade_class("task1", tmp_path_factory.mktemp("course-task1-hostile"), request, reference_cache, jobs=2,
                       timeout=600)


@pytest.mark.slow
@pytest.mark.students("skeleton")
def test_task1_skeleton_scores_nothing(graded_task1_hostile):
    """The released skeleton scripts handed in as they are: no point, every task cell failed."""
    _, rows, _ = graded_task1_hostile
    assert (rows["skeleton"]["score"], rows["skeleton"]["max_score"]) == (0.0, 7.0), rows["skeleton"]
    assert rows["skeleton"]["feedback"].startswith("failed: q1_lr_test, task1_jobscript, task1_correctness, "
                                                   "task1_throughput"), rows["skeleton"]


@pytest.mark.slow
@pytest.mark.students("forged_structure")
def test_task1_a_record_that_tells_of_two_workers_earns_nothing(graded_task1_hostile):
    """One process trains the whole set; at exit the record is rewritten to tell of the stand-in's two
    workers on two shards, with two workers' arrays: the grader, outside the run, sees one process
    compute. q1 and the job script: 2."""
    course_dir, rows, _ = graded_task1_hostile
    assert (rows["forged_structure"]["score"], rows["forged_structure"]["status"]) == (
        2.0, "graded; tampering suspected, for the instructor to review: task1_report"), rows["forged_structure"]
    errors = errors_in_autograded(course_dir, "task1", "forged_structure")
    assert any("one worker process per device: tampering suspected, for the instructor to review: the grader saw 1 "
               "process(es) computing" in e for e in errors), errors


@pytest.mark.slow
@pytest.mark.students("forged_report", "patched_checks", "forged_records")
def test_task1_verdicts_are_made_by_the_grader_not_the_kernel(graded_task1_hostile):
    """Skeleton scripts beside the right answer to q1: forged report cells; checks monkeypatched,
    tests blanked by an input transformer and the kernel pointed at the reference scripts. The
    grader runs the report and grade cells itself, on the scripts handed in: 1 point each, q1's.
    And a script that trains five iterations and forges its record: q1 and the job script, 2."""
    course_dir, rows, _ = graded_task1_hostile
    for student in ("forged_report", "patched_checks"):
        assert (rows[student]["score"], rows[student]["status"]) == (1.0, "graded"), rows[student]
    forged = errors_in_autograded(course_dir, "task1", "forged_report")
    assert any("'report' is made by a cell of the release that this notebook does not hold as released" in e
               for e in forged), forged
    # A record rewritten after the run: the review of the script names its atexit handler first (the
    # grader's own accuracy of the parameters contradicts the record too: test_task1_multi_gpu.py).
    assert (rows["forged_records"]["score"], rows["forged_records"]["status"]) == (
        2.0, "graded; tampering suspected, for the instructor to review: task1_report"), rows
    records = errors_in_autograded(course_dir, "task1", "forged_records")
    assert any("runs to the end: tampering suspected, for the instructor to review: the script line " in e
               and "imports atexit" in e for e in records), records


