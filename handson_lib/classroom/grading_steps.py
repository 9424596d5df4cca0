"""The grading service's nbgrader steps, run as the instructor in the course folder (the service
runs as root: what nbgrader writes there stays the instructor's), through nbgrader's own API in
one process for many students:

    python -m handson_lib.classroom.grading_steps collect ASSIGNMENT STUDENT...
    python -m handson_lib.classroom.grading_steps feedback ASSIGNMENT STUDENT...

`collect`: nbgrader's collect of each student's newest acceptable submission, with the course's
vetting (classroom.collect.SafeCollect, as `handson classroom collect` and the Formgrader run it);
`feedback`: nbgrader's generate_feedback (without hidden tests: the course's configuration) and
release_feedback, for each student alone. Prints one JSON object: {student: what happened}.
"""

import json
import sys
from pathlib import Path


def course_api(course_dir):
    """nbgrader's API on the course folder, configured by its nbgrader_config.py."""
    from nbgrader.apps.api import NbGraderAPI
    from traitlets.config.loader import PyFileConfigLoader
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course_dir)).load_config()
    return NbGraderAPI(config=config)


def collected_stamp(course_dir, assignment, student):
    try:
        return (Path(course_dir) / "submitted" / student / assignment / "timestamp.txt").read_text().strip()
    except OSError:
        return None


def collect(api, course_dir, assignment, students):
    """{student: {"collected": the time of the submission in submitted/ after the collect, "refused":
    {submission's name: why}}}."""
    from nbgrader.utils import capture_log, temp_attrs
    done = {}
    for student in students:
        with temp_attrs(api.coursedir, assignment_id=assignment, student_id=student):
            app = api.exchange.Collect(coursedir=api.coursedir, authenticator=api.authenticator, parent=api)
            app.update = True
            result = capture_log(app)
        done[student] = {"collected": collected_stamp(course_dir, assignment, student),
                         "refused": dict(getattr(app, "refusals", [])),
                         "error": None if result.get("success") else str(result.get("error", ""))[-500:]}
    return done


def feedback(api, assignment, students):
    """{student: None when the feedback was made and released, else what failed}."""
    done = {}
    for student in students:
        made = api.generate_feedback(assignment, student)
        released = api.release_feedback(assignment, student) if made.get("success") else made
        done[student] = None if released.get("success") else str(released.get("error") or released.get("log", ""))[-800:]
    return done


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3 or argv[0] not in ("collect", "feedback"):
        print(__doc__, file=sys.stderr)
        return 2
    step, assignment, students = argv[0], argv[1], argv[2:]
    course_dir = Path.cwd()
    api = course_api(course_dir)
    done = collect(api, course_dir, assignment, students) if step == "collect" else feedback(api, assignment, students)
    print(json.dumps(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
