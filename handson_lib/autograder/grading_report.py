"""The report of `handson autograde`: each student's row (the gradebook's score, what the graded
notebooks show, the status), the CSV report (autograde_<assignment>.csv, safe to open in a
spreadsheet), the lines printed, and the plot of the throughput ratios.
"""

import csv
import json
import math
import socket
from pathlib import Path

from handson_lib import messages
from handson_lib.autograder import judge
from handson_lib.checking import checks
from handson_lib.plotting import pyplot

#: Said after "graded" for a submission with an answer that a person grades (a markdown answer).
AWAITS_MANUAL = "; an answer awaits manual grading (nbgrader formgrader): the score counts it as 0 until then"


def scores(course_dir, assignment):
    """{student: (score, max score, whether an answer awaits manual grading)} from the gradebook."""
    from nbgrader.api import Gradebook
    db = f"sqlite:///{Path(course_dir) / 'gradebook.db'}"
    out = {}
    with Gradebook(db) as gb:
        for sub in gb.assignment_submissions(assignment):
            out[sub.student.id] = (sub.score, sub.max_score, sub.needs_manual_grade)
    return out


def graded_facts(course_dir, assignment, student):
    """What a student's graded notebooks show: the throughput ratios the grader printed, the
    grade cells that failed, the first error (usually the cause of the others), and the report
    cells that say "tampering suspected"."""
    facts = {"throughput_ratio": None, "scaling_ratio": None, "failed_cells": [], "first_error": "",
             "tampering": []}
    marks = [messages.catalogue(lang).get(checks.TAMPERING, checks.TAMPERING) for lang in messages.LANGUAGES]
    for path in sorted((Path(course_dir) / "autograded" / student / assignment).glob("*.ipynb")):
        try:
            cells = json.loads(path.read_text())["cells"]
        except (OSError, ValueError, KeyError):
            continue
        for cell in cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            report = judge.is_report_cell(meta)   # run by the grader
            for out in cell.get("outputs", []):
                text = "".join(out.get("text", ""))
                if report and any(mark in text for mark in marks) and meta["grade_id"] not in facts["tampering"]:
                    facts["tampering"].append(meta["grade_id"])
                if out.get("output_type") == "stream" and meta.get("grade") and \
                        "throughput_credit(" in "".join(cell.get("source", "")):
                    # The grader's line, printed by a throughput grade cell (restored from the source;
                    # another grade cell may print a student's strings).
                    for line in "".join(out.get("text", "")).splitlines():
                        if line.startswith(checks.RATIO_TAG):
                            for item in line[len(checks.RATIO_TAG):].split():
                                key, _, value = item.partition("=")
                                ratio = finite(value)
                                if key in ("throughput", "scaling") and ratio is not None:
                                    facts[f"{key}_ratio"] = round(ratio, 3)
                elif out.get("output_type") == "error":
                    message = f"{out.get('ename')}: {out.get('evalue', '')}".strip().splitlines()[0]
                    if out.get("ename") == "KeyboardInterrupt":  # nbgrader interrupts a cell at its limit
                        message = "the cell ran past its time limit and was interrupted (an endless loop?)"
                    facts["first_error"] = facts["first_error"] or message[:400]
                    if meta.get("grade") and meta.get("grade_id") not in facts["failed_cells"]:
                        facts["failed_cells"].append(meta["grade_id"])
    return facts


def finite(text):
    """The finite float `text` spells, else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def throughput_figure(rows, bands, title):
    """Bars of each student's throughput and scaling ratio to the reference, with the credit bands."""
    plt = pyplot("Agg")
    students = [r["student"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(rows) + 1.5))
    for offset, key, color in ((-0.2, "throughput_ratio", "tab:blue"), (0.2, "scaling_ratio", "tab:orange")):
        values = [r.get(key) for r in rows]
        ax.barh([i + offset for i in range(len(rows))], [v or 0 for v in values], height=0.38,
                color=color, label=key.replace("_", " "))
        for i, v in enumerate(values):
            if v is None:
                ax.text(0.02, i + offset, "not scored", va="center", fontsize=7, color="gray")
    for floor, share in bands:
        ax.axvline(floor, color="gray", ls="--", lw=1)
        ax.text(floor, len(rows) - 0.4, f" {share:.0%}", fontsize=8, color="gray")
    ax.set_yticks(range(len(rows)), students)
    ax.invert_yaxis()
    ax.set_xlabel("ratio to the reference solution measured in the same session")
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def report_row(result, graded, course_dir, assignment, before=()):
    """The report's row of one student. `before`: the students the gradebook held a grade of
    before this session: when nbgrader fails this time, that grade is stale, and is removed.
    `graded_on`: the machine that graded (and timed) the student (result["node"], else this one)."""
    student = result["student"]
    try:
        facts = graded_facts(course_dir, assignment, student)
    except Exception as error:  # whatever the graded notebook holds, the row is made
        facts = {"throughput_ratio": None, "scaling_ratio": None, "failed_cells": [],
                 "first_error": f"the graded notebook could not be read ({type(error).__name__}: {error})"}
    feedback = facts["first_error"]
    if facts["failed_cells"]:
        feedback = f"failed: {', '.join(facts['failed_cells'])}; first error: {feedback}"
    status = result["status"]
    score, max_score, manual = graded.get(student, (0.0, None, False))
    if status == "graded" and manual:
        status += AWAITS_MANUAL
    if not status.startswith("graded") and student in before:
        stale = score
        remove_grade(course_dir, assignment, student)
        score = 0.0
        status += (f"; its score {stale:g} from an earlier grading is stale and was removed from the gradebook "
                   f"(grade it again: handson autograde {assignment} --resume)")
    elif student not in graded:
        status += " (no grade: 0)"
    if facts.get("tampering"):
        status += f"; tampering suspected, for the instructor to review: {', '.join(facts['tampering'])}"
    return {"student": student, "score": score, "max_score": max_score, "status": status,
            "seconds": result["seconds"], "throughput_ratio": facts["throughput_ratio"],
            "scaling_ratio": facts["scaling_ratio"], "feedback": feedback,
            "graded_on": result.get("node") or socket.gethostname()}


def remove_grade(course_dir, assignment, student):
    """Take a student's submission of `assignment` out of the gradebook (its grades with it)."""
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{Path(course_dir) / 'gradebook.db'}") as gb:
        gb.remove_submission(assignment, student)


REPORT_FIELDS = ["student", "score", "max_score", "status", "seconds", "throughput_ratio", "scaling_ratio",
                 "feedback", "graded_on"]


#: What a spreadsheet takes for the start of a formula (OWASP's CSV injection list); a quote, the
#: prefix itself, so that every text reads back as it was written.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "'")


def spreadsheet_cell(value):
    """A cell of a CSV an instructor opens: a text that a spreadsheet would run as a formula (a
    student's exception named `=HYPERLINK(...)`) gets a leading `'`; numbers stay numbers."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def from_spreadsheet_cell(text):
    """The value of a cell written by spreadsheet_cell."""
    return text[1:] if isinstance(text, str) and text.startswith("'") else text


def report_path(course_dir, assignment):
    return Path(course_dir) / f"autograde_{assignment}.csv"


def read_report(course_dir, assignment):
    """{student: row} of the report an earlier `handson autograde` wrote ({} without one)."""
    path = report_path(course_dir, assignment)
    if not path.exists():
        return {}
    def number(text):
        return finite(text) if text not in ("", None) else None

    with path.open(newline="") as f:
        rows = [{key: from_spreadsheet_cell(text) for key, text in row.items()} for row in csv.DictReader(f)]
    return {row["student"]: {**row, "score": number(row["score"]) or 0.0, "max_score": number(row["max_score"]),
                             "seconds": number(row["seconds"]) or 0.0,
                             "throughput_ratio": number(row["throughput_ratio"]),
                             "scaling_ratio": number(row["scaling_ratio"])}
            for row in rows}


def write_report(course_dir, assignment, rows):
    """The report, rewritten whole (a new file renamed over the old: never half written)."""
    path = report_path(course_dir, assignment)
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=REPORT_FIELDS, restval="")
        writer.writeheader()
        writer.writerows({key: spreadsheet_cell(value) for key, value in row.items()} for row in rows)
    tmp.replace(path)
    return path


def row_line(row):
    return (f"  {row['student']:20s} {row['score']:6.1f} / {row['max_score'] or '-'}  {row['seconds']:6.1f} s  "
            f"{row['status']}" + (f"\n  {'':20s} {row['feedback'][:110]}" if row["feedback"] else ""))


def plot_throughput(rows, report, assignment, site, print_fn):
    """autograde_<assignment>_throughput.png beside the report, when a ratio was graded."""
    ratios = [r for r in rows if finite(str(r["throughput_ratio"])) is not None
              or finite(str(r["scaling_ratio"])) is not None]
    if ratios:
        plot = report.with_name(f"autograde_{assignment}_throughput.png")
        bands = checks.site_thresholds(site)["throughput_bands"]
        shown = [{**r, "throughput_ratio": finite(str(r["throughput_ratio"])),
                  "scaling_ratio": finite(str(r["scaling_ratio"]))} for r in rows]
        throughput_figure(shown, bands, f"{assignment}: throughput ratios ({checks.grading_site(site)} bands)").savefig(plot, dpi=100)
        print_fn(f"throughput ratios plotted in {plot}")
