"""What a grading job returns, checked before it is believed, and written by the submitting grader
alone: the gradebook's scores and the student's graded files.

A node's result (autograder.node_grading.student_result) is data from another machine: it counts
only for a student of that job not graded yet in the session, every grade cell must be one of the
assignment's with its own maximum and a score within it, and every graded file must be a plain
file of the student's folder whose digest is the one the node declared. Anything else refuses the
whole result (the student is graded again elsewhere).
"""

import hashlib
import json
import math
import shutil
import time
import warnings
from pathlib import Path

from handson_lib.launch.progress import read_small

#: The most bytes of one student's result file, and of one graded file copied back.
MOST_RESULT_BYTES = 4 << 20
MOST_FILE_BYTES = 256 << 20
MOST_STATUS_CHARS = 2000
MOST_PARTS = 1000


class Refused(ValueError):
    """A result that cannot be believed; the message says why. `node_fault`: the node's grader
    is to blame (a result for another student, a score out of bounds, a file not as declared),
    and the node is used no more; else the student's own work made it (a graded file too large),
    and that student alone is not graded."""

    def __init__(self, message, node_fault=True):
        super().__init__(message)
        self.node_fault = node_fault


def is_graded(status):
    """Whether nbgrader graded the submission: "graded", alone or with a note after it ("graded;
    not graded (not the assignment's files): ...")."""
    return status == "graded" or status.startswith("graded;")


def read_plain(path, most):
    """The bytes of `path`, a plain file (never through a link, never a FIFO) of at most `most`
    bytes; Refused otherwise (too large: the student's doing, not the node's)."""
    try:
        blob = read_small(path, most + 1)
    except OSError as err:
        raise Refused(f"{Path(path).name} is not a plain file ({err.strerror or err})") from None
    if len(blob) > most:
        raise Refused(f"{Path(path).name} is over {most >> 20} MiB", node_fault=False)
    return blob


def read_result(path):
    """The JSON object in `path` (a plain file, not too large); Refused otherwise."""
    path = Path(path)
    blob = read_plain(path, MOST_RESULT_BYTES)
    try:
        data = json.loads(blob)
    except ValueError as err:
        raise Refused(f"{path.name} is not JSON ({err})") from None
    if not isinstance(data, dict):
        raise Refused(f"{path.name} is not a JSON object")
    return data


def expected_cells(course_dir, assignment):
    """{notebook: {grade cell: max score}} of the assignment in the course's gradebook."""
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{Path(course_dir) / 'gradebook.db'}") as gb:
        return {nb.name: {cell.name: cell.max_score for cell in nb.grade_cells}
                for nb in gb.find_assignment(assignment).notebooks}


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def checked(data, student, job_students, expected):
    """The result of `student` (the file's name) as the session may believe it, else Refused."""
    if data.get("student") != student or student not in job_students:
        raise Refused(f"a result for {data.get('student')!r} in {student}.json, from a job that grades "
                      f"{', '.join(sorted(job_students))}")
    status, seconds = data.get("status"), data.get("seconds")
    if not isinstance(status, str) or not status or len(status) > MOST_STATUS_CHARS:
        raise Refused("its status is not a short text")
    if not _number(seconds) or not 0 <= seconds < 10 ** 6:
        raise Refused(f"its seconds ({seconds!r}) are not a duration")
    grades = data.get("grades")
    if is_graded(status):
        _check_grades(grades, expected)
    elif grades:
        raise Refused(f"scores for a submission whose grading ended with {status[:80]!r}")
    return {"student": student, "node": str(data.get("node", "?"))[:100], "status": status,
            "seconds": float(seconds), "parts": _flat_parts(data.get("parts")), "grades": grades or {},
            "comments": _comments(data.get("comments"), expected), "penalties": _penalties(data.get("penalties"), expected),
            "files": _files(data.get("files"))}


def _check_grades(grades, expected):
    if not isinstance(grades, dict) or set(grades) != set(expected):
        raise Refused(f"its notebooks ({sorted(grades) if isinstance(grades, dict) else grades!r}) are not "
                      f"the assignment's ({sorted(expected)})")
    for notebook, cells in grades.items():
        if not isinstance(cells, dict) or set(cells) != set(expected[notebook]):
            raise Refused(f"the grade cells of {notebook} are not the assignment's")
        for cell, pair in cells.items():
            most = expected[notebook][cell]
            if not (isinstance(pair, list) and len(pair) == 2 and pair[1] == most):
                raise Refused(f"{notebook}/{cell}: its maximum is not the assignment's {most:g}")
            score = pair[0]
            if score is not None and not (_number(score) and 0 <= score <= most):
                raise Refused(f"{notebook}/{cell}: the score {score!r} is outside 0 .. {most:g}")


def _flat_parts(parts):
    if not isinstance(parts, list):
        return []
    return [{k: v for k, v in part.items() if isinstance(k, str) and isinstance(v, (str, int, float, bool, type(None)))}
            for part in parts[:MOST_PARTS]
            if isinstance(part, dict) and isinstance(part.get("part"), str) and _number(part.get("seconds"))]


def _comments(comments, expected):
    if not isinstance(comments, dict):
        return {}
    return {nb: {cell: text[:10000] if isinstance(text, str) else None
                 for cell, text in list(cells.items())[:MOST_PARTS] if isinstance(cell, str)}
            for nb, cells in comments.items() if nb in expected and isinstance(cells, dict)}


def _penalties(penalties, expected):
    """{notebook: late penalty} (AssignLatePenalties' points off), each within the notebook's points."""
    if not isinstance(penalties, dict):
        return {}
    out = {}
    for notebook, value in penalties.items():
        if notebook in expected and value is not None:
            if not (_number(value) and 0 <= value <= sum(expected[notebook].values())):
                raise Refused(f"{notebook}: the late penalty {value!r} is outside its points")
            out[notebook] = value
    return out


def _files(files):
    if not isinstance(files, dict):
        raise Refused("its graded files are not listed")
    for name, digest in files.items():
        parts = Path(name).parts
        if not parts or Path(name).is_absolute() or ".." in parts or not (isinstance(digest, str) and len(digest) == 64):
            raise Refused(f"a graded file {name!r} outside the student's folder, or without a digest")
    return files


def graded_blobs(result, graded_root, assignment):
    """{name: bytes} of the student's graded files in the job's folder, each a plain file whose
    digest is the one the node declared; Refused otherwise (nothing is written yet)."""
    source = Path(graded_root) / result["student"] / assignment
    if any(p.is_symlink() for p in (source, source.parent)):
        raise Refused("the graded folder is a symbolic link")
    blobs = {}
    for name, digest in result["files"].items():
        path = source / name
        if any(p.is_symlink() for p in [path, *path.parents][:len(Path(name).parts)]):
            raise Refused(f"the graded file {name} is not a plain file")
        blob = read_plain(path, MOST_FILE_BYTES)
        if hashlib.sha256(blob).hexdigest() != digest:
            raise Refused(f"the graded file {name} is not the one the node declared")
        blobs[name] = blob
    return blobs


def place_graded_files(blobs, course_dir, assignment, student):
    """The checked graded files into the course's autograded/<student>/<assignment>/, replacing
    what an earlier grading left."""
    target = Path(course_dir) / "autograded" / student / assignment
    if target.exists():
        shutil.rmtree(target)
    for name, blob in blobs.items():
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_bytes(blob)


def copy_graded_files(result, graded_root, course_dir, assignment):
    """graded_blobs, then place_graded_files: Refused (nothing copied) when one file differs."""
    place_graded_files(graded_blobs(result, graded_root, assignment), course_dir, assignment, result["student"])


def write_result(result, graded_root, course_dir, assignment):
    """A checked result (`checked`) into the course: its graded files read and checked first
    (Refused: nothing written), then the gradebook's scores (a graded submission), then the
    graded files; what `nbgrader autograde` would have written there."""
    blobs = graded_blobs(result, graded_root, assignment)
    if is_graded(result["status"]):
        write_grades(course_dir, assignment, result)
    place_graded_files(blobs, course_dir, assignment, result["student"])


def submission_timestamp(course_dir, assignment, student):
    """The submission's time from nbgrader's timestamp.txt, as `nbgrader autograde` reads it."""
    from nbgrader.utils import parse_utc
    path = Path(course_dir) / "submitted" / student / assignment / "timestamp.txt"
    try:
        text = path.read_text().strip()
        return parse_utc(text) if text else None
    except (OSError, ValueError):
        return None


def write_grades(course_dir, assignment, result, tries=8):
    """The student's scores into the course's gradebook (write_grades_once), tried again while
    the database is busy (the Formgrader open, nbgrader's own commands)."""
    for attempt in range(tries):
        try:
            return write_grades_once(course_dir, assignment, result)
        except Exception as err:  # sqlalchemy's OperationalError: "database is locked"
            if "locked" not in str(err) or attempt == tries - 1:
                raise
            time.sleep(0.5 * (attempt + 1))


def write_grades_once(course_dir, assignment, result):
    """The student's scores into the course's gradebook, as nbgrader's SaveAutoGrades writes them
    (a manual score a grader gave stays, and the cell is marked for review)."""
    from nbgrader.api import Gradebook
    student = result["student"]
    with warnings.catch_warnings(), Gradebook(f"sqlite:///{Path(course_dir) / 'gradebook.db'}") as gb:
        # nbgrader's own submission creation warns about SQLAlchemy's autoflush (as in its autograde)
        warnings.simplefilter("ignore", category=Warning)
        gb.update_or_create_student(student)
        timestamp = submission_timestamp(course_dir, assignment, student)
        if timestamp:
            gb.update_or_create_submission(assignment, student, timestamp=timestamp)
        else:
            gb.update_or_create_submission(assignment, student)
        for notebook, cells in result["grades"].items():
            for cell, (score, _) in cells.items():
                grade = gb.find_grade(cell, notebook, assignment, student)
                grade.auto_score = score
                grade.needs_manual_grade = grade.manual_score is not None or score is None
        for notebook, penalty in result["penalties"].items():
            gb.find_submission_notebook(notebook, assignment, student).late_submission_penalty = penalty
        for notebook, cells in result["comments"].items():
            for cell, text in cells.items():
                try:
                    gb.find_comment(cell, notebook, assignment, student).auto_comment = text
                except Exception:  # not a comment cell of the assignment: nothing to write
                    continue
        gb.db.commit()
