"""`handson classroom export --lms moodle|canvas FILE --accounts MAPPING.csv`: the gradebook as the
import file of a learning management system, one column per assignment.

The accounts' mapping file is the instructor's: a CSV with a header row and one row per account
of the class (`account`, the Linux account, is required; the rest as the LMS needs them):

    account,first_name,last_name,email,id_number,lms_id,sis_user_id,sis_login_id,section

- **Moodle** (Grades > Import > CSV file; docs.moodle.org "Grade import"): UTF-8, comma-separated,
  a header row; the columns of Moodle's own grade export (`First name`, `Last name`, `ID number`,
  `Email address`) and one column per assignment named after it. On import the instructor maps an
  identifier column ("Map from": `Email address` or `ID number`) to the user field ("Map to":
  `useremail`, `useridnumber`) and each assignment column to a grade item.
- **Canvas** (Grades > Import; Canvas guide "How do I import grades in the Gradebook?"): UTF-8,
  the gradebook export's header rows: `Student,ID,SIS User ID,SIS Login ID,Section`, one column per
  assignment (a column without a Canvas id makes a new assignment), then the `Points Possible`
  row with each assignment's points; a student's name as `Last, First`.

A student without a grade of an assignment has an empty cell (no grade, not 0). Every text cell that
a spreadsheet would take for a formula gets a leading `'`, as the grader's CSV report does
(grading_report.spreadsheet_cell). Students graded but missing from the mapping are named, not
exported.
"""

import csv
import io
from dataclasses import dataclass

from handson_lib.autograder.grading_report import spreadsheet_cell

LMS = ("moodle", "canvas")
MAPPING_FIELDS = ("account", "first_name", "last_name", "email", "id_number", "lms_id", "sis_user_id",
                  "sis_login_id", "section")
MOODLE_IDENTITY = ("First name", "Last name", "ID number", "Email address")
CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
#: The first cell of Canvas's row of points (its gradebook export writes it so, indented).
CANVAS_POINTS = "    Points Possible"


class MappingError(ValueError):
    """The accounts' mapping file cannot be used; the message says why."""


@dataclass(frozen=True)
class Grades:
    """The gradebook's part an export needs: the assignments in order, each one's points, and
    {account: {assignment: score}} of the students graded."""
    assignments: tuple
    points: dict
    scores: dict


def read_mapping(text):
    """[{field: value}] of the mapping file's rows, in its order; MappingError when it has no
    `account` column, an unknown column, or an account twice."""
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    fields = [f.strip() for f in reader.fieldnames or []]
    if "account" not in fields:
        raise MappingError(f"the mapping file needs an 'account' column (its columns: {', '.join(fields) or 'none'}; "
                           f"known: {', '.join(MAPPING_FIELDS)})")
    unknown = [f for f in fields if f not in MAPPING_FIELDS]
    if unknown:
        raise MappingError(f"unknown column(s) in the mapping file: {', '.join(unknown)} (known: {', '.join(MAPPING_FIELDS)})")
    rows, seen = [], set()
    for row in reader:
        row = {k.strip(): (v or "").strip() for k, v in row.items() if k}
        if not row.get("account"):
            continue
        if row["account"] in seen:
            raise MappingError(f"the account {row['account']} is in the mapping file twice")
        seen.add(row["account"])
        rows.append(row)
    return rows


def number(value):
    """A score as the LMS reads it: 7, 6.5; empty without one."""
    return "" if value is None else f"{value:g}"


def moodle_rows(grades, mapping):
    rows = [[*MOODLE_IDENTITY, *grades.assignments]]
    for person in mapping:
        mine = grades.scores.get(person["account"], {})
        rows.append([spreadsheet_cell(person.get(k, "")) for k in ("first_name", "last_name", "id_number", "email")]
                    + [number(mine.get(a)) for a in grades.assignments])
    return rows


def canvas_rows(grades, mapping):
    rows = [[*CANVAS_IDENTITY, *grades.assignments],
            [CANVAS_POINTS, "", "", "", "", *(number(grades.points.get(a)) for a in grades.assignments)]]
    for person in mapping:
        mine = grades.scores.get(person["account"], {})
        name = ", ".join(p for p in (person.get("last_name", ""), person.get("first_name", "")) if p) or person["account"]
        rows.append([spreadsheet_cell(v) for v in (name, person.get("lms_id", ""), person.get("sis_user_id", ""),
                                                   person.get("sis_login_id", ""), person.get("section", ""))]
                    + [number(mine.get(a)) for a in grades.assignments])
    return rows


def export_text(lms, grades, mapping):
    """The import file's text (CRLF line ends, as both read spreadsheets' CSV)."""
    rows = moodle_rows(grades, mapping) if lms == "moodle" else canvas_rows(grades, mapping)
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows(rows)
    return out.getvalue()


def missing(grades, mapping):
    """The accounts graded that the mapping does not name (not exported)."""
    named = {person["account"] for person in mapping}
    return sorted(set(grades.scores) - named)


def gradebook_grades(course_dir, assignments=None):
    """Grades of the course's gradebook (nbgrader's): every assignment (or those named) in the
    gradebook's order, its points, and each student's score of each graded submission."""
    from pathlib import Path
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{Path(course_dir) / 'gradebook.db'}") as gb:
        chosen = [a for a in gb.assignments if assignments is None or a.name in assignments]
        points = {a.name: a.max_score for a in chosen}
        scores = {}
        for assignment in chosen:
            for sub in gb.assignment_submissions(assignment.name):
                scores.setdefault(sub.student.id, {})[assignment.name] = sub.score
    return Grades(tuple(points), points, scores)
