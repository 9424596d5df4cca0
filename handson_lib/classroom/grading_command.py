"""The grading service's part of `handson classroom` (root):

    handson classroom up --grade-on-submit [--gradings-per-hour N]   # grade each submission as it arrives
    handson classroom up --no-grade-on-submit                         # back to collect and autograde by hand
    handson classroom regrade ASSIGNMENT [--student NAME]             # grade again (after a fix to a test)
    handson classroom export --lms moodle|canvas FILE --accounts MAPPING.csv [--assignments ...]
"""

import os
import time
from pathlib import Path

from handson_lib.classroom import grading_queue, hub, lms_export
from handson_lib.classroom.layout import ClassroomError, layout, load_settings
from handson_lib.autograder import nbgrader_course

SERVICE_MODULE = "handson_lib.classroom.grading_service"
#: Gradings of one student's submissions started in an hour, at most (the first default).
GRADINGS_PER_HOUR = 30


#: Where the service grades (`up --grade-on`): the scheduler where one answers, else this machine.
GRADE_ON = ("auto", "machine", "scheduler")


def grading_settings(settings, grade_on_submit=None, gradings_per_hour=None, grade_on=None):
    """What `up` keeps of the grading service: asked now, else as the last `up` left it."""
    if gradings_per_hour is not None and gradings_per_hour < 0:
        raise ClassroomError("--gradings-per-hour must be 0 (no limit) or more")
    on = settings.get("grade_on_submit", False) if grade_on_submit is None else grade_on_submit
    per_hour = settings.get("gradings_per_hour", GRADINGS_PER_HOUR) if gradings_per_hour is None else gradings_per_hour
    return {"grade_on_submit": bool(on), "gradings_per_hour": int(per_hour),
            "grade_on": grade_on or settings.get("grade_on", "auto")}


def stop_jobs(lay, out=print):
    """`down`: the service's jobs on a scheduler cancelled (those on this machine are processes of
    the classroom, stopped with the rest)."""
    if not (lay.grading / "queue.sqlite").exists():
        return
    store = grading_queue.Store(lay.grading / "queue.sqlite")
    try:
        jobs = [job for job in store.active_jobs() if job.launcher == "scheduler" and job.jobid]
    finally:
        store.close()
    if jobs:
        from handson_lib.sites import jobs as site_jobs
        for job in jobs:
            site_jobs.qdel(job.jobid)
        out(f"  the grading service's job(s) {', '.join(job.jobid for job in jobs)} cancelled (qdel)")


def summary(settings, out=print):
    if settings.get("grade_on_submit"):
        limit = settings.get("gradings_per_hour") or "no limit of"
        where = {"auto": "on the scheduler where one answers, else on this machine", "machine": "on this machine",
                 "scheduler": "on the scheduler"}[settings.get("grade_on", "auto")]
        out(f"  grading as students submit, {where}: {hub.url(settings)}/services/{hub.GRADING_SERVICE}/ (each student "
            f"sees their own; the instructor the class); {limit} grading(s) per student per hour")


def assignment_named(name, action):
    if name not in nbgrader_course.ASSIGNMENTS:
        raise ClassroomError(f"name the assignment: `handson classroom {action} ASSIGNMENT` "
                             f"({', '.join(nbgrader_course.ASSIGNMENTS)})")
    return name


def regrade(assignment, student=None, out=print):
    """Queue the latest submission of one student (or of every student) of `assignment` again;
    the grading service grades it as it grades a new one."""
    if os.geteuid() != 0:
        raise ClassroomError("`handson classroom regrade` needs root (the grading service's queue is root's)")
    lay = layout()
    if not load_settings(lay).get("grade_on_submit") or not (lay.grading / "queue.sqlite").exists():
        raise ClassroomError("no grading service in this classroom: `handson classroom up --grade-on-submit`, or "
                             "grade by hand with `handson autograde`")
    store = grading_queue.Store(lay.grading / "queue.sqlite")
    try:
        names = [student] if student else sorted({r.student for r in store.everyone_latest()
                                                  if r.assignment == assignment})
        queued = [name for name in names if store.regrade(name, assignment, time.time())]
    finally:
        store.close()
    out(f"queued again: {', '.join(queued) or 'nobody'}"
        + (f"; not queued (no graded submission, or one queued already): {', '.join(sorted(set(names) - set(queued)))}"
           if set(names) - set(queued) else ""))
    return 0


def export(lms, target, mapping_path, assignments=None, out=print):
    """The gradebook in the LMS's import format (classroom.lms_export), to `target`."""
    if lms not in lms_export.LMS:
        raise ClassroomError(f"--lms {' or '.join(lms_export.LMS)} is needed")
    if not target or not mapping_path:
        raise ClassroomError("usage: handson classroom export --lms moodle|canvas FILE --accounts MAPPING.csv")
    lay = layout()
    if not (lay.course / "gradebook.db").exists():
        raise ClassroomError(f"no gradebook in {lay.course}: `handson classroom up` first")
    try:
        mapping = lms_export.read_mapping(Path(mapping_path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, lms_export.MappingError) as err:
        raise ClassroomError(f"the accounts' mapping file {mapping_path}: {err}") from None
    grades = lms_export.gradebook_grades(lay.course, assignments)
    Path(target).write_bytes(lms_export.export_text(lms, grades, mapping).encode("utf-8"))
    left = lms_export.missing(grades, mapping)
    out(f"{len(mapping)} account(s), {len(grades.assignments)} assignment(s) ({', '.join(grades.assignments)}) "
        f"written to {target} for {lms}" + (f"; graded but not in the mapping, not exported: {', '.join(left)}"
                                            if left else ""))
    return 0


def add_arguments(parser):
    parser.add_argument("--grade-on-submit", action="store_true", default=None,
                        help="up: grade each submission as it arrives (a service of the hub), release its feedback "
                             "to its student and show the state at /services/grading/ (the first default: off)")
    parser.add_argument("--no-grade-on-submit", dest="grade_on_submit", action="store_false",
                        help="up: stop grading on submit (collect and autograde by hand)")
    parser.add_argument("--gradings-per-hour", type=int, default=None, metavar="N",
                        help=f"up: gradings of one student's submissions per hour at most (0: no limit; the first "
                             f"default: {GRADINGS_PER_HOUR}); the latest submission waits for the hour")
    parser.add_argument("--grade-on", choices=GRADE_ON, default=None,
                        help="up: where the grading service grades: the local cluster or the site's scheduler where "
                             "one answers, else this machine (auto, the first default), or only one of them")
    parser.add_argument("--student", default=None, help="regrade: one student (default: every student)")
    parser.add_argument("--lms", choices=lms_export.LMS, default=None, help="export: the LMS whose import format")
    parser.add_argument("--accounts", default=None, metavar="MAPPING.csv",
                        help="export: the accounts' names and the LMS's identifiers (columns: "
                             + ", ".join(lms_export.MAPPING_FIELDS) + "; account required)")
