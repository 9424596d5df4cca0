"""Where a grading session's time went: the parts each student's observed runs logged, the waits
for the timing slot and the rest, as a table, as autograde_<assignment>_profile.csv (a timeline
of the session), and the progress line printed as students are graded.
"""

import csv
from pathlib import Path

from handson_lib.autograder.grading_report import spreadsheet_cell
from handson_lib.checking import evidence

def profile_parts(log):
    """The parts a student's runs logged (the kernel's log is written inside the sandbox: read as
    untrusted, never through a link or from a FIFO; lines that are not such a part are left out)."""
    parts = []
    try:
        text = (evidence.read_left(log, limit=16 << 20) or b"").decode(errors="replace")
    except ValueError:
        text = ""
    for line in text.splitlines():
        try:
            part = evidence.parse_record(line, most_containers=1)   # a part is one flat object
        except ValueError:
            continue
        if isinstance(part, dict) and isinstance(part.get("part"), str) and \
                isinstance(part.get("seconds"), (int, float)):
            parts.append({k: v for k, v in part.items() if isinstance(v, (str, int, float, bool, type(None)))})
    return parts


def profile_rows(result):
    """Where one student's grading time went: every observed run (a reference not measured before
    the students is measured by whichever student needs it first), the waits for the timing slot, and the rest (the
    notebook's other cells, the MPI runs outside the grader's launcher, nbgrader itself)."""
    rows = [(part["part"], part["seconds"]) for part in result["parts"]]
    waited = sum(part.get("waited") or 0 for part in result["parts"])
    if waited:
        rows.append(("waiting for the timing slot (a timed run elsewhere)", round(waited, 1)))
    rest = result["seconds"] - sum(seconds for _, seconds in rows)
    rows.append(("the rest: other cells, nbgrader, kernel start-up", round(rest, 1)))
    return rows


def profile_csv_rows(result, session_start):
    """profile_rows with, for each run, when it ended (seconds into the grading session) and
    whether it gave its share of the timing slot back while it idled: a timeline of the session."""
    rows = []
    for part, seconds in profile_rows(result):
        run = next((p for p in result["parts"] if p["part"] == part), {})
        ended = round(run["ended"] - session_start, 1) if run.get("ended") else ""
        rows.append([result["student"], part, seconds, ended,
                     "stepped aside from the timing slot while idle" if run.get("stepped_aside") else ""])
    return rows


def write_profile(path, results, session_start):
    """autograde_<assignment>_profile.csv: profile_csv_rows of every student's result."""
    with Path(path).open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "part", "seconds", "ended_s", "note"])
        for result in results:
            writer.writerows([spreadsheet_cell(value) for value in row]
                             for row in profile_csv_rows(result, session_start))
    return path


def progress_line(done, total, elapsed, width=24):
    """`[#####-----] 3/7  2:10 elapsed, about 3:00 left` (the time left from the mean so far)."""
    filled = int(width * done / total)
    left = elapsed / done * (total - done) if done else None
    clock = lambda s: f"{int(s // 60)}:{int(s % 60):02d}"
    return (f"[{'#' * filled}{'-' * (width - filled)}] {done}/{total}  {clock(elapsed)} elapsed"
            + (f", about {clock(left)} left" if left is not None and done < total else ""))


def profile_table(results):
    """Each student's grading time by part, as text."""
    lines = ["Where the grading time went (seconds; runs of one student overlap with other students'):"]
    for result in results:
        lines.append(f"  {result['student']}  ({result['seconds']:.1f} s in all)")
        lines += [f"    {seconds:8.1f}  {part}" for part, seconds in profile_rows(result)]
    return "\n".join(lines)
