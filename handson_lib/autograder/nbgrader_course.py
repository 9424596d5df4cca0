"""The nbgrader course: assignments assembled from the single source, parallel autograding.

    handson course assemble [--course DIR]       # source/<assignment>/ (handson_lib.authoring.course_source)
    cd course && nbgrader generate_assignment setup
    ... students' work in course/submitted/<student>/<assignment>/ (nbgrader collect puts it there)
    handson autograde setup [--jobs 2]            # one `nbgrader autograde` process per student
    cd course && nbgrader generate_feedback setup && nbgrader export

An assignment's source holds the instructor notebook (with its markers, for nbgrader) and the
*student skeletons* of its scripts: nbgrader copies non-notebook files unchanged into the
release, so it must never see the solution scripts. The grade cells run the student's scripts
through handson_lib.checking.checks, which measures the reference solution from solutions/ itself.
"""

import contextlib
import csv
import hashlib
import json
import math
import os
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from handson_lib import COURSE_ROOT, grader_settings, launch, messages, tasks
from handson_lib.checking import checks, evidence
from handson_lib.autograder import judge, sandbox
from handson_lib.plotting import pyplot

COURSE_DIR = COURSE_ROOT / "course"
#: nbgrader's course id: the exchange's folder and the students' HOME/<course id>/
COURSE_ID = "handson-distributed-dl"
#: assignment -> (instructor notebook in solutions/, student files from exercises/) (handson_lib.tasks)
ASSIGNMENTS = {a.name: (a.notebook, list(a.files)) for a in tasks.ASSIGNMENTS}
STUDENT_FILES = {name: files for name, (_, files) in ASSIGNMENTS.items()}
CELL_TIMEOUT = 900       # seconds per cell (a grading cell runs several trainings)
ANSWER_CELL_TIMEOUT = 60  # seconds for a student's own cell (answers, small functions)
RUN_TIMEOUT = 1800       # seconds per student and assignment, enforced by `handson autograde`
#: Set in every process of a grading session to the session's folder: what a submission leaves
#: running (a daemon that left the kernel's process tree) is found by it and stopped at the end.
SESSION_ENV = grader_settings.VARIABLES["session"]
#: The course's language, written by `handson course assemble --lang` into the course folder:
#: `handson autograde` sets HANDSON_LANG from it, so that the feedback speaks the notebooks' language.
LANG_FILE = ".handson-lang"


def cell_timeout(cell):
    """nbclient's per-cell limit: a student's answer cell runs in seconds, so an infinite loop
    there is stopped after a minute; the course's cells train networks and get CELL_TIMEOUT.
    The settings' cell_timeout (`handson autograde --cell-timeout`) lowers both."""
    limit = grader_settings.current().cell_timeout or CELL_TIMEOUT
    if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
        return int(min(limit, ANSWER_CELL_TIMEOUT))
    return int(limit)


def nbgrader_env():
    """nbgrader runs `alembic` and kernels from PATH: the venv must come first."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("MPLBACKEND", "Agg")
    return env


#: The reference runs of each assignment's checks, measured before the session's students (the
#: grading sandbox sees the session's references read-only): (script, arguments, ranks or None).
PRE_MEASURED = {a.name: [t.reference_run() for t in tasks.tasks_of(a.name) if t.reference_run()]
                for a in tasks.ASSIGNMENTS if any(t.reference_run() for t in tasks.tasks_of(a.name))}


def nbgrader(*args, course_dir=COURSE_DIR, timeout=RUN_TIMEOUT, env=None):
    cmd = [str(Path(sys.executable).parent / "nbgrader"), *map(str, args)]
    return launch.run_watched(cmd, timeout, env={**nbgrader_env(), **(env or {})}, cwd=str(course_dir))


def course_language(course_dir):
    """The language `handson course assemble --lang` wrote the course in, else None."""
    try:
        lang = (Path(course_dir) / LANG_FILE).read_text().strip()
    except OSError:
        return None
    return lang if lang in messages.LANGUAGES else None


def grading_env(course_dir=None):
    """The kernels' language beyond the grader's settings: HANDSON_LANG from
    course_dir/.handson-lang, unless the environment sets HANDSON_LANG."""
    env = {}
    lang = course_language(course_dir) if course_dir is not None else None
    if lang and not os.environ.get(messages.ENV):
        env[messages.ENV] = lang
    return env


def session_settings(site=None, run_timeout=None, cell_timeout=None):
    """The grader's settings of a session beyond nbgrader_config.py's defaults (its reference
    cache and folder are added when the session starts, each student's submission and log then)."""
    if site:
        checks.site_thresholds(site)  # an unknown site fails here, before any student runs
    return grader_settings.GraderSettings(site=site or None, run_timeout=float(run_timeout) if run_timeout else None,
                                          cell_timeout=float(cell_timeout) if cell_timeout else None)


def students_of(course_dir, assignment):
    base = Path(course_dir) / "submitted"
    return sorted(p.parent.name for p in base.glob(f"*/{assignment}") if p.is_dir())


def default_jobs():
    """Students graded at once: two more than the cores, so that students whose runs wait (the
    timing slot, a deadlock until the watchdog, nbgrader's start-up) leave no core idle (on 2
    cores, 42 students: 92 % of the CPU busy with 4 at once, 84 % with 3)."""
    return launch.cpu_count() + 2


def grading_order(students):
    """A fixed order unrelated to the names: students whose names sort together (often the same
    kind of work) are spread over the session, so that long and short gradings share the cores
    and the time left, estimated from the mean so far, holds."""
    return sorted(students, key=lambda s: hashlib.sha256(s.encode()).hexdigest())


def not_plain_files(folder):
    """What in a submission's folder is not a plain file or folder: symbolic links (nbgrader's
    copy would follow one to whatever it names, a solution say), FIFOs, sockets, devices."""
    found = []
    for path in sorted(Path(folder).rglob("*")):
        if path.is_symlink():
            found.append(f"{path.relative_to(folder)} (a symbolic link)")
        elif not (path.is_file() or path.is_dir()):
            found.append(f"{path.relative_to(folder)} (not a plain file)")
    return found


def _autograde_one(course_dir, assignment, student, timeout, settings, env=None, session=None, box=None):
    """One student: `nbgrader autograde` with the kernel in the grading sandbox (`box`: the
    session's sandbox.Settings), or as this user (None: --unsafe). A submission holding anything
    but plain files is not graded: the status names what to hand in instead."""
    started = time.monotonic()
    odd = not_plain_files(Path(course_dir) / "submitted" / student / assignment)
    if odd:
        return {"student": student, "status": "refused: the submission holds " + ", ".join(odd)
                + "; hand in plain files only", "seconds": 0.0, "output": "", "parts": []}
    env = dict(env or {})
    options, own = [], Path(session) / f"student-{student}"
    if box is not None:   # the student's folder is the one the sandbox may write
        more, options, own = sandbox.for_student(session, box, student)
        env.update(more)
        runs, memo = sandbox.judged_runs(session, student)
    else:
        own.mkdir()
        runs, memo = own / "judged-runs", own / "judged-memo"
        runs.mkdir(), memo.mkdir()
    # The report cells' checks, run by the grader (nbgrader_ext.JudgedExecute), keep their runs apart.
    env[judge.JUDGE_ENV] = json.dumps({"runs": str(runs), "memo": str(memo), "own": str(own),
                                              "settings": str(Path(session) / "sandbox.json") if box else None})
    # Every observed run of this student appends its part (checking.runs): the kernel's here, the
    # report cells' in the grader's own folder (memo).
    log = own / "profile.jsonl"
    # The folder whose scripts the checks run, fixed here (checks.locate), not the kernel's cwd.
    env.update(settings.but(submission=str(Path(course_dir).resolve() / "autograded" / student / assignment),
                            profile_log=str(log)).to_env())
    try:
        res = nbgrader("autograde", assignment, "--student", student, "--force", *options,
                       course_dir=course_dir, timeout=timeout, env=env)
    finally:
        kernel_parts = _profile_parts(log)   # before release: the log is on the student's tmpfs
        if box is not None:
            sandbox.release(box, own)
    seconds = time.monotonic() - started
    parts = kernel_parts + _profile_parts(memo / "profile.jsonl")   # the kernel's runs, the grader's
    if res.timed_out:
        status = f"stopped after {timeout:.0f} s (the whole run: a cell that never ends?)"
    elif res.returncode != 0:
        lines = [l for l in res.output.splitlines() if "ERROR" in l]
        status = "nbgrader failed: " + (lines[0].split("]", 1)[-1].strip() if lines else f"exit {res.returncode}")
    else:
        status = "graded"
    return {"student": student, "status": status, "seconds": round(seconds, 1), "output": res.output,
            "parts": parts}


def _profile_parts(log):
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


def _progress_line(done, total, elapsed, width=24):
    """`[#####-----] 3/7  2:10 elapsed, about 3:00 left` (the time left from the mean so far)."""
    filled = int(width * done / total)
    left = elapsed / done * (total - done) if done else None
    clock = lambda s: f"{int(s // 60)}:{int(s % 60):02d}"
    return (f"[{'#' * filled}{'-' * (width - filled)}] {done}/{total}  {clock(elapsed)} elapsed"
            + (f", about {clock(left)} left" if left is not None and done < total else ""))


#: Said after "graded" for a submission with an answer that a person grades (a markdown answer).
AWAITS_MANUAL = "; an answer awaits manual grading (nbgrader formgrader): the score counts it as 0 until then"


def scores(course_dir, assignment):
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
                                ratio = _finite(value)
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


def _finite(text):
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


def _row(result, graded, course_dir, assignment, before=()):
    """The report's row of one student. `before`: the students the gradebook held a grade of
    before this session: when nbgrader fails this time, that grade is stale, and is removed."""
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
            "scaling_ratio": facts["scaling_ratio"], "feedback": feedback}


def remove_grade(course_dir, assignment, student):
    """Take a student's submission of `assignment` out of the gradebook (its grades with it)."""
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{Path(course_dir) / 'gradebook.db'}") as gb:
        gb.remove_submission(assignment, student)


REPORT_FIELDS = ["student", "score", "max_score", "status", "seconds", "throughput_ratio", "scaling_ratio",
                 "feedback"]


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
        return _finite(text) if text not in ("", None) else None

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
        writer = csv.DictWriter(f, fieldnames=REPORT_FIELDS)
        writer.writeheader()
        writer.writerows({key: spreadsheet_cell(value) for key, value in row.items()} for row in rows)
    tmp.replace(path)
    return path


def _row_line(row):
    return (f"  {row['student']:20s} {row['score']:6.1f} / {row['max_score'] or '-'}  {row['seconds']:6.1f} s  "
            f"{row['status']}" + (f"\n  {'':20s} {row['feedback'][:110]}" if row["feedback"] else ""))


def autograde(assignment, course_dir=COURSE_DIR, jobs=None, timeout=RUN_TIMEOUT, cell_timeout=None,
              site=None, run_timeout=None, print_fn=print, profile=False, students=None,
              reference_cache=None, resume=False, unsafe=False):
    """One `nbgrader autograde` process per student (every one handed in, or those named), at
    most `jobs` at once, each student's line printed and the CSV report rewritten as soon as
    that student is graded; the per-part profile of the grading time (printed with `profile`)
    and, when throughput was graded, a plot of the ratios.

    Throughput stays fair with students graded side by side: every run whose time is scored
    (the reference's, a student's) holds the machine's timing slot alone (launch.timing_slot).
    The reference solutions and the course's demos run once per session, kept in a folder of the
    session's own, or in `reference_cache` (a test session shares one between its classes).

    `resume`: the students the last report shows graded are kept, the others graded. Ctrl-C
    stops every run of the session and keeps what was graded (`--resume` goes on from there).

    Every submission's kernel, and all it starts, runs in the grading sandbox
    (handson_lib.autograder.sandbox); where the sandbox cannot start, grading is refused unless
    `unsafe` (the submissions then run as this user, with this user's rights)."""
    if not unsafe:
        why = sandbox.why_not_available()
        if why:
            raise SystemExit(f"handson autograde: the grading sandbox cannot start here: {why}. Without it every "
                             "submission runs as you, with your rights (your files, the gradebook, the others' "
                             "submissions, the network): only with --unsafe.")
    env = grading_env(course_dir)
    settings = session_settings(site, run_timeout, cell_timeout)
    jobs = jobs or default_jobs()
    handed_in = students_of(course_dir, assignment)
    students = [s for s in handed_in if s in students] if students is not None else handed_in
    if not students:
        raise SystemExit(f"no submissions in {course_dir}/submitted/*/{assignment}")
    # The report keeps the row of every student not graded again now (their last grading).
    earlier = {s: row for s, row in read_report(course_dir, assignment).items() if s in handed_in}
    done_rows = {}
    if resume:
        done_rows = {s: row for s, row in earlier.items()
                     if s in students and row["status"] in ("graded", "graded" + AWAITS_MANUAL)}
        print_fn(f"--resume: {len(done_rows)} student(s) graded earlier are kept "
                 f"({report_path(course_dir, assignment).name}), {len(students) - len(done_rows)} to grade")
    to_grade = [s for s in students if s not in done_rows]

    def report_rows():
        return [done_rows.get(s) or earlier[s] for s in handed_in if s in done_rows or s in earlier]
    try:
        before = set(scores(course_dir, assignment))
    except Exception:  # no gradebook yet
        before = set()
    started, session_start = time.monotonic(), time.time()
    results, interrupted = {}, False
    with _session_folders(reference_cache, print_fn) as (shared, scratch):
        pool = ThreadPoolExecutor(max_workers=jobs)
        print_fn(f"Autograding {len(to_grade)} submission(s) of {assignment!r}, {jobs} at a time "
                 f"(session {scratch}) ...")
        # The reference is measured once per session.
        settings = settings.but(reference_cache=shared, session=scratch)
        box = None
        if not unsafe:
            # The machine's timing slot stays out of the sandbox: the grader takes it for the runs
            # of its checks; a kernel's own runs share a slot of their own (sandbox.command).
            box = sandbox.prepare(scratch, readable=[shared])
            _measure_references(assignment, shared, print_fn)
        else:
            print_fn("--unsafe: the submissions run as you, outside the grading sandbox")
        futures = [pool.submit(_autograde_one, course_dir, assignment, s, timeout, settings, env, scratch, box)
                   for s in grading_order(to_grade)]
        try:
            for future in as_completed(futures):
                result = future.result()
                results[result["student"]] = result
                try:
                    graded = scores(course_dir, assignment)
                except Exception as exc:  # the gradebook busy with another student's write: read it below
                    print_fn(f"  {result['student']:20s} graded in {result['seconds']:.1f} s "
                             f"(score read later: {exc})")
                else:
                    done_rows[result["student"]] = _row(result, graded, course_dir, assignment, before)
                    print_fn(_row_line(done_rows[result["student"]]))
                    write_report(course_dir, assignment, report_rows())
                print_fn("  " + _progress_line(len(results), len(to_grade), time.monotonic() - started))
        except KeyboardInterrupt:
            interrupted = True
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
            print_fn("Interrupted: stopping every run of this session ...")
            for future in futures:
                future.cancel()
        finally:
            left = {proc: _name_of(proc) for proc in launch.processes_carrying(SESSION_ENV, scratch)}
            if left:
                launch.terminate_all(list(left))
                if not interrupted:
                    print_fn(f"stopped {len(left)} process(es) that submissions left running: "
                             + ", ".join(sorted(set(left.values()))))
            pool.shutdown(wait=True)
            if interrupted:
                signal.signal(signal.SIGINT, signal.default_int_handler)
    total = time.monotonic() - started
    if interrupted:
        path = write_report(course_dir, assignment, report_rows())
        missing = [s for s in students if s not in done_rows]
        print_fn(f"{len(students) - len(missing)} of {len(students)} student(s) graded and kept in {path}; "
                 f"not graded: {', '.join(missing)}. Go on with: handson autograde {assignment} --resume")
        raise KeyboardInterrupt
    if any(s not in done_rows for s in to_grade):
        graded = scores(course_dir, assignment)
        done_rows.update({s: _row(results[s], graded, course_dir, assignment, before)
                          for s in to_grade if s not in done_rows})
    rows = [done_rows[s] for s in students]
    print_fn("Scores:")
    for row in rows:
        print_fn(_row_line(row))
    report = write_report(course_dir, assignment, report_rows())
    profile_csv = write_profile(report.with_name(f"autograde_{assignment}_profile.csv"),
                                [results[s] for s in to_grade], session_start)
    if profile:
        print_fn(profile_table(results[s] for s in to_grade))
    print_fn(f"{len(to_grade)} submission(s) in {total:.1f} s with {jobs} at a time; report: {report}; "
             f"where the time went: {profile_csv}")
    ratios = [r for r in rows if _finite(str(r["throughput_ratio"])) is not None
              or _finite(str(r["scaling_ratio"])) is not None]
    if ratios:
        plot = report.with_name(f"autograde_{assignment}_throughput.png")
        bands = checks.site_thresholds(site)["throughput_bands"]
        shown = [{**r, "throughput_ratio": _finite(str(r["throughput_ratio"])),
                  "scaling_ratio": _finite(str(r["scaling_ratio"]))} for r in rows]
        throughput_figure(shown, bands, f"{assignment}: throughput ratios ({checks.grading_site(site)} bands)").savefig(plot, dpi=100)
        print_fn(f"throughput ratios plotted in {plot}")
    return rows, total


def _measure_references(assignment, cache, print_fn):
    """The assignment's reference runs (PRE_MEASURED), measured before any student, outside the
    sandbox; the students' sandboxes read them."""
    from handson_lib.checking import reference  # instructor-only: the autograder has it
    for name, args, np in PRE_MEASURED.get(assignment, []):
        print_fn(f"  the reference {name} on {np or 1} {'rank(s)' if np else 'process'} ...")
        reference.measure_reference(name, list(args), RUN_TIMEOUT, np=np, cache=cache)


@contextlib.contextmanager
def _session_folders(shared=None, print_fn=print):
    """(the folder that keeps a grading session's reference runs and demos, the session's own
    folder for each student's profile and runs): `shared` where given (a test session grades
    several classes with one set of references), else inside the session's folder; the
    session's folder is removed at the end (sandbox.remove_session: whatever a submission left
    there, never an error in place of the grading's result)."""
    scratch = tempfile.mkdtemp(prefix="handson-autograde-")
    try:
        shared = Path(shared) if shared is not None else Path(scratch) / "references"
        shared.mkdir(parents=True, exist_ok=True)
        yield str(shared), scratch
    finally:
        sandbox.remove_session(scratch, print_fn)


def _name_of(proc):
    try:
        return proc.name()
    except Exception:  # gone already
        return "?"


def profile_table(results):
    """Each student's grading time by part, as text."""
    lines = ["Where the grading time went (seconds; runs of one student overlap with other students'):"]
    for result in results:
        lines.append(f"  {result['student']}  ({result['seconds']:.1f} s in all)")
        lines += [f"    {seconds:8.1f}  {part}" for part, seconds in profile_rows(result)]
    return "\n".join(lines)


def add_autograde_arguments(parser):
    parser.add_argument("assignment")
    parser.add_argument("--jobs", type=int, default=None, help="students graded at once (default: cores + 2)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per student before the watchdog")
    parser.add_argument("--cell-timeout", type=float, default=None,
                        help="seconds per cell (default: course/nbgrader_config.py's Execute.timeout)")
    parser.add_argument("--site", default=None, help="throughput thresholds and bands of a site in "
                        "handson_lib/sites/table.py: local, reedbush, miyabi, abci, cloud (default: "
                        "HANDSON_SITE, else local)")
    parser.add_argument("--run-timeout", type=float, default=300,
                        help="seconds one training run may take before the watchdog kills it (deadlocks)")
    parser.add_argument("--profile", action="store_true",
                        help="print where each student's grading time went (always in autograde_<assignment>_profile.csv)")
    parser.add_argument("--unsafe", action="store_true",
                        help="grade without the grading sandbox (where it cannot start: not root, no bubblewrap): "
                             "every submission then runs as you, with your rights")
    parser.add_argument("--resume", action="store_true",
                        help="keep the students the last report (autograde_<assignment>.csv) shows graded; grade the "
                             "others (after Ctrl-C, or to grade again those that failed)")
    parser.add_argument("--course", default=str(COURSE_ROOT / "course"))


def autograde_main(args):
    try:
        autograde(args.assignment, Path(args.course), jobs=args.jobs, timeout=args.timeout,
                  cell_timeout=args.cell_timeout, site=args.site, run_timeout=args.run_timeout,
                  profile=args.profile, resume=args.resume, unsafe=args.unsafe)
    except KeyboardInterrupt:
        return 130
    return 0
