"""The grading service's queue: every submission it saw, every job it sent, in one SQLite file.

The service (classroom.grading_service) may be killed at any moment and restarted by the hub;
everything it must not lose is written here before it acts on it, and every step is one
transaction: a submission is queued once (its name in the exchange is unique), is sent to one job
at a time, and is marked graded by the step that wrote its grades, so that a restarted service
neither loses a submission nor grades one twice.

Fairness (`choose`): the latest submission of a student counts (a newer one supersedes the one
still queued), a student has at most one grading in flight, queued students go first come, first
served, and a student over the hourly limit waits; so a student who submits 50 times in a minute
delays nobody else by more than one grading.

Pure logic here (no hub, no nbgrader): the quick tier tests it (tests/test_grading_queue.py).
"""

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

#: A submission's states: waiting, replaced by a newer one of the same student, sent to a job,
#: its grades written, its feedback released; or not graded (refused by the vetting, or its
#: grading failed every try).
QUEUED, SUPERSEDED, GRADING, GRADED, RELEASED, REFUSED, FAILED = (
    "queued", "superseded", "grading", "graded", "released", "refused", "failed")
#: States in which a submission is over (nothing more happens to it).
OVER = (SUPERSEDED, RELEASED, REFUSED, FAILED)
#: The phases a student reads, in order (PrairieLearn's), with the column that holds each one's time.
PHASES = (("submitted", "stamp_time"), ("queued", "seen"), ("grading", "started"), ("graded", "graded"),
          ("released", "released"))
HOUR = 3600.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,       -- its folder in the exchange's inbound/, or 'regrade:...'
    student TEXT NOT NULL,
    assignment TEXT NOT NULL,
    stamp TEXT,                      -- the time nbgrader's submit wrote in its name
    stamp_time REAL,                 -- that time, in seconds (shown, never used for the order)
    seen REAL NOT NULL,              -- when the service saw it: the queue's order
    state TEXT NOT NULL,
    job INTEGER,
    tries INTEGER NOT NULL DEFAULT 0,
    started REAL, graded REAL, released REAL,
    score REAL, max_score REAL,
    parts TEXT,                      -- JSON {notebook: {grade cell: [score, max score]}}
    status TEXT,                     -- the grader's status, or why it was not graded
    regrade INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS by_student ON submissions (student, assignment, state);
CREATE TABLE IF NOT EXISTS jobs (
    number INTEGER PRIMARY KEY AUTOINCREMENT,
    assignment TEXT NOT NULL,
    folder TEXT NOT NULL,
    launcher TEXT NOT NULL,          -- 'machine' or 'scheduler'
    jobid TEXT,
    students TEXT NOT NULL,          -- JSON list
    submitted REAL NOT NULL,
    ended TEXT                       -- why the service stopped following it (NULL while it runs)
);
"""


@dataclass(frozen=True)
class Submission:
    id: int
    name: str
    student: str
    assignment: str
    stamp: str
    stamp_time: float
    seen: float
    state: str
    job: int
    tries: int
    started: float
    graded: float
    released: float
    score: float
    max_score: float
    parts: str
    status: str
    regrade: int

    def part_scores(self):
        """{grade cell: (score, max score)} of every notebook, from the grades written."""
        try:
            notebooks = json.loads(self.parts or "{}")
        except ValueError:
            return {}
        return {cell: tuple(pair) for cells in notebooks.values() for cell, pair in cells.items()}


@dataclass(frozen=True)
class Job:
    number: int
    assignment: str
    folder: str
    launcher: str
    jobid: str
    students: tuple
    submitted: float
    ended: str


class Store:
    """The queue's file (opened per thread: sqlite connections stay in the thread that made them)."""

    def __init__(self, path):
        self.path = Path(path)
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")   # the page reads while the worker writes
        self.db.executescript(SCHEMA)

    def close(self):
        self.db.close()

    def _rows(self, sql, *args):
        return [Submission(**dict(row)) for row in self.db.execute(sql, args)]

    # ------------------------------------------------------------------ submissions
    def add(self, name, student, assignment, stamp, stamp_time, now):
        """Queue a submission seen in the exchange (once: its name is unique); an older one of the
        same student and assignment still queued is superseded. True when it was new."""
        with self.db:
            if self.db.execute("SELECT 1 FROM submissions WHERE name = ?", (name,)).fetchone():
                return False
            self.db.execute("UPDATE submissions SET state = ?, status = ? WHERE student = ? AND assignment = ? "
                            "AND state = ?", (SUPERSEDED, f"a newer submission replaced it: {name}", student,
                                              assignment, QUEUED))
            self.db.execute("INSERT INTO submissions (name, student, assignment, stamp, stamp_time, seen, state) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?)", (name, student, assignment, stamp, stamp_time, now, QUEUED))
        return True

    def refuse_unseen(self, name, student, assignment, why, now):
        """Record a folder of the exchange that is not queued (another's name, not a folder), under
        the student who made it: it supersedes nothing. True when it was new."""
        with self.db:
            if self.db.execute("SELECT 1 FROM submissions WHERE name = ?", (name,)).fetchone():
                return False
            self.db.execute("INSERT INTO submissions (name, student, assignment, seen, state, status) "
                            "VALUES (?, ?, ?, ?, ?, ?)", (name, student, assignment, now, REFUSED, why))
        return True

    def regrade(self, student, assignment, now):
        """Queue the student's latest graded submission again (after a fix to a test); None when
        the student has none or one is queued or grading already."""
        latest = self.latest(student, assignment)
        if latest is None or latest.state not in (GRADED, RELEASED, FAILED):
            return None
        name = f"regrade:{latest.name}:{now:.6f}"
        with self.db:
            self.db.execute("INSERT INTO submissions (name, student, assignment, stamp, stamp_time, seen, state, "
                            "regrade) VALUES (?, ?, ?, ?, ?, ?, ?, 1)",
                            (name, student, assignment, latest.stamp, latest.stamp_time, now, QUEUED))
        return name

    def queued(self):
        return self._rows("SELECT * FROM submissions WHERE state = ? ORDER BY seen, id", QUEUED)

    def grading(self):
        return self._rows("SELECT * FROM submissions WHERE state = ? ORDER BY started, id", GRADING)

    def of_job(self, job):
        return self._rows("SELECT * FROM submissions WHERE job = ? ORDER BY id", job)

    def to_release(self):
        return self._rows("SELECT * FROM submissions WHERE state = ? ORDER BY graded, id", GRADED)

    def of_student(self, student):
        return self._rows("SELECT * FROM submissions WHERE student = ? ORDER BY seen DESC, id DESC", student)

    def latest(self, student, assignment):
        rows = self._rows("SELECT * FROM submissions WHERE student = ? AND assignment = ? AND state != ? "
                          "ORDER BY seen DESC, id DESC LIMIT 1", student, assignment, REFUSED)
        return rows[0] if rows else None

    def everyone_latest(self):
        """Each student's latest submission of each assignment (refusals aside), by student."""
        return self._rows("SELECT * FROM submissions s WHERE state != ? AND id = (SELECT id FROM submissions t "
                          "WHERE t.student = s.student AND t.assignment = s.assignment AND t.state != ? "
                          "ORDER BY seen DESC, id DESC LIMIT 1) ORDER BY student, assignment", REFUSED, REFUSED)

    def started_since(self, since):
        """{student: gradings of their own submissions started since `since`} (regrades not counted)."""
        return dict(self.db.execute("SELECT student, COUNT(*) FROM submissions WHERE started >= ? AND regrade = 0 "
                                    "GROUP BY student", (since,)).fetchall())

    def start(self, ids, job, now):
        with self.db:
            self.db.executemany("UPDATE submissions SET state = ?, job = ?, started = ?, tries = tries + 1 "
                                "WHERE id = ? AND state = ?", [(GRADING, job, now, i, QUEUED) for i in ids])

    def note(self, submission_id, text):
        """Add `text` to a submission's status (what went wrong after it was graded)."""
        with self.db:
            self.db.execute("UPDATE submissions SET status = COALESCE(status, '') || '; ' || ? WHERE id = ?",
                            (text, submission_id))

    def supersede(self, submission_id, why):
        with self.db:
            self.db.execute("UPDATE submissions SET state = ?, status = ? WHERE id = ? AND state = ?",
                            (SUPERSEDED, why, submission_id, QUEUED))

    def refuse(self, submission_id, why):
        with self.db:
            self.db.execute("UPDATE submissions SET state = ?, status = ? WHERE id = ?", (REFUSED, why, submission_id))

    def graded(self, job, student, score, max_score, parts, status, now, state=GRADED):
        """The student's submission in `job` graded (its grades are written; FAILED: the grading
        itself failed, the status says why): False when it was not grading there (taken already:
        a restarted service reads a job's results again)."""
        with self.db:
            done = self.db.execute("UPDATE submissions SET state = ?, graded = ?, score = ?, max_score = ?, "
                                   "parts = ?, status = ? WHERE job = ? AND student = ? AND state = ?",
                                   (state, now, score, max_score, json.dumps(parts), status, job, student, GRADING))
        return done.rowcount > 0

    def released(self, submission_id, now):
        with self.db:
            self.db.execute("UPDATE submissions SET state = ?, released = ? WHERE id = ? AND state = ?",
                            (RELEASED, now, submission_id, GRADED))

    def back_to_queue(self, job, student, why, most_tries):
        """The student's submission in `job` not returned: queued again (before newer arrivals: it
        keeps its place), or failed after `most_tries` jobs. The new state, or None."""
        rows = [r for r in self.of_job(job) if r.student == student and r.state == GRADING]
        if not rows:
            return None
        row = rows[0]
        superseded = any(r.state == QUEUED for r in self._rows(
            "SELECT * FROM submissions WHERE student = ? AND assignment = ? AND state = ?", student, row.assignment,
            QUEUED))
        state = FAILED if row.tries >= most_tries or superseded else QUEUED
        status = (f"not graded: sent to {row.tries} job(s), none returned it ({why})" if state == FAILED and
                  not superseded else f"a newer submission replaced it ({why})" if superseded else why)
        with self.db:
            self.db.execute("UPDATE submissions SET state = ?, job = NULL, status = ? WHERE id = ?",
                            (SUPERSEDED if superseded else state, status, row.id))
        return SUPERSEDED if superseded else state

    def fail(self, job, student, why):
        with self.db:
            self.db.execute("UPDATE submissions SET state = ?, status = ? WHERE job = ? AND student = ? AND state = ?",
                            (FAILED, why, job, student, GRADING))

    # ------------------------------------------------------------------ jobs
    def add_job(self, assignment, folder_of, launcher, students, now):
        """A new job's row; `folder_of(number)` names its folder. The Job."""
        with self.db:
            cursor = self.db.execute("INSERT INTO jobs (assignment, folder, launcher, students, submitted) "
                                     "VALUES (?, '', ?, ?, ?)", (assignment, launcher, json.dumps(list(students)), now))
            number = cursor.lastrowid
            self.db.execute("UPDATE jobs SET folder = ? WHERE number = ?", (str(folder_of(number)), number))
        return self.job(number)

    def set_jobid(self, number, jobid):
        with self.db:
            self.db.execute("UPDATE jobs SET jobid = ? WHERE number = ?", (jobid, number))

    def end_job(self, number, why):
        with self.db:
            self.db.execute("UPDATE jobs SET ended = ? WHERE number = ? AND ended IS NULL", (why, number))

    def job(self, number):
        row = self.db.execute("SELECT * FROM jobs WHERE number = ?", (number,)).fetchone()
        return _job(row) if row else None

    def active_jobs(self):
        return [_job(row) for row in self.db.execute("SELECT * FROM jobs WHERE ended IS NULL ORDER BY number")]


def _job(row):
    data = dict(row)
    data["students"] = tuple(json.loads(data["students"]))
    return Job(**data)


# ----------------------------------------------------------------------------- fairness

def over_limit(student, started_last_hour, per_hour):
    """Whether the student has had `per_hour` gradings in the last hour (None or 0: no limit)."""
    return bool(per_hour) and started_last_hour.get(student, 0) >= per_hour


def choose(queued, in_flight, free, started_last_hour, per_hour):
    """The queued submissions to send now: first come (the queue's order), at most one per student
    and none of a student whose grading is in flight or who is over the hourly limit, at most
    `free`. The queue's length changes nothing of this: at most `free` grade at once."""
    chosen, busy = [], set(in_flight)
    for row in queued:
        if len(chosen) >= free:
            break
        if row.student in busy or (not row.regrade and over_limit(row.student, started_last_hour, per_hour)):
            continue
        chosen.append(row)
        busy.add(row.student)
    return chosen


def places(queued, in_flight, started_last_hour, per_hour):
    """{submission id: (place in the queue or None, why it waits or None)}: the place among the
    submissions that may be sent (1 is next); a student whose grading is in flight, or who is over
    the limit, waits for that instead."""
    found, place = {}, 0
    for row in queued:
        if row.student in in_flight:
            found[row.id] = (None, "in_flight")
        elif not row.regrade and over_limit(row.student, started_last_hour, per_hour):
            found[row.id] = (None, "limit")
        else:
            place += 1
            found[row.id] = (place, None)
    return found


def phases(row):
    """[(phase, seconds since the epoch or None)] of a submission, in order: each phase it reached
    with its time, so that a wait in the queue is not taken for a slow grader."""
    return [(name, getattr(row, column)) for name, column in PHASES]

