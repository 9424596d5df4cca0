"""Task #1 submissions that attack the verdict rather than do the work (synthetic_class.CLASSES
["task1"]): the grader runs the report and grade cells itself (autograder/judge.py) and weighs the
run's records against its own evaluation of the trained model (checking/evidence.py). Apart from
test_autograde.py so that the parallel pass spreads the two classes over its workers."""

import pytest

from test_autograde import UNSAFE, errors_in_autograded, grade_class


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
    workers on two shards, with two workers' arrays: no worker kept the parameters the grader asked
    for, and the main process's are not two workers' training. q1 and the job script: 2."""
    course_dir, rows, _ = graded_task1_hostile
    assert rows["forged_structure"]["score"] == 2.0, rows["forged_structure"]
    errors = errors_in_autograded(course_dir, "task1", "forged_structure")
    assert any("not shown by what the run trained" in e for e in errors), errors


@pytest.mark.slow
@pytest.mark.students("described_as_parallel", "imports_its_helper")
def test_task1_a_run_that_describes_itself_as_parallel_earns_its_honest_work_only(graded_task1_hostile):
    """Issue 47's first two wins, 7/7 before: one process training (a StandardUpdater named like
    Chainer's, Chainer's module, the shards' iterators kept on it, the runtime's backend set to
    Chainer's, a helper burning a core beside it); and a module of the student's own beside the
    script that rewrites the records at exit. The grader judges what the runs trained and grades the
    assignment's files only: q1 and the job script, 2 each."""
    course_dir, rows, _ = graded_task1_hostile
    assert (rows["described_as_parallel"]["score"], rows["described_as_parallel"]["status"]) == (2.0, "graded"), rows
    described = errors_in_autograded(course_dir, "task1", "described_as_parallel")
    assert any("the run says it ran Chainer's updater" in e for e in described), described
    helper = rows["imports_its_helper"]
    assert helper["score"] == 2.0, helper
    assert helper["status"].startswith("graded" if UNSAFE else
                                       "graded; not graded (not the assignment's files): cifar_utils.py"), helper
    errors = errors_in_autograded(course_dir, "task1", "imports_its_helper")
    assert any("imports cifar_utils, which lie(s) beside it" in e for e in errors), errors


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


