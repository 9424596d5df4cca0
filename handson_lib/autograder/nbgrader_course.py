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

Here: the course's settings, nbgrader run for the course, and `handson autograde` (a session
grading one student per process); each student's row and the CSV report are made by
grading_report, where the time went by grading_profile.
"""

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import signal
import socket
import stat
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from handson_lib import COURSE_ROOT, launch, messages, settings, tasks
from handson_lib.checking import checks
from handson_lib.autograder import grading_plan, judge, sandbox
from handson_lib.autograder.grading_profile import profile_parts, profile_table, progress_line, write_profile
from handson_lib.autograder.grading_report import (AWAITS_MANUAL, plot_throughput, read_report, report_path,
                                                   report_row, row_line, scores, write_report)

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
SESSION_ENV = settings.VARIABLES["session"]
#: The course's language, written by `handson course assemble --lang` into the course folder:
#: `handson autograde` sets HANDSON_LANG from it, so that the feedback speaks the notebooks' language.
LANG_FILE = ".handson-lang"


def cell_timeout(cell):
    """nbclient's per-cell limit: a student's answer cell runs in seconds, so an infinite loop
    there is stopped after a minute; the course's cells train networks and get CELL_TIMEOUT.
    The settings' cell_timeout (`handson autograde --cell-timeout`) lowers both."""
    limit = settings.current().grader.cell_timeout or CELL_TIMEOUT
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
#: grader reads them for every student; the grading sandbox does not see them): (script, arguments, ranks or None).
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
    return settings.GraderSettings(site=site or None, run_timeout=float(run_timeout) if run_timeout else None,
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


def graded_files(course_dir, assignment):
    """The assignment's files (paths in its folder, as its source holds them): only these of a
    submission are graded (the sandbox copies nothing else in)."""
    source = Path(course_dir) / "source" / assignment
    return sorted(str(p.relative_to(source)) for p in source.rglob("*") if p.is_file()
                  and ".ipynb_checkpoints" not in p.parts)


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
        # The course graded is course_dir, whatever root its nbgrader_config.py names (a classroom's
        # pins its own: a copy of it graded elsewhere wrote into the original's gradebook).
        res = nbgrader("autograde", assignment, "--student", student, "--force", *options,
                       f"--CourseDirectory.root={Path(course_dir).resolve()}",
                       course_dir=course_dir, timeout=timeout, env=env)
    finally:
        kernel_parts = profile_parts(log)   # before release: the log is on the student's tmpfs
        if box is not None:
            sandbox.release(box, own)
    seconds = time.monotonic() - started
    parts = kernel_parts + profile_parts(memo / "profile.jsonl")   # the kernel's runs, the grader's
    if res.timed_out:
        status = f"stopped after {timeout:.0f} s (the whole run: a cell that never ends?)"
    elif res.returncode != 0:
        lines = [l for l in res.output.splitlines() if "ERROR" in l]
        status = "nbgrader failed: " + (lines[0].split("]", 1)[-1].strip() if lines else f"exit {res.returncode}")
    else:
        status = "graded"
    if box is not None and box.graded is not None:
        extra = sandbox.left_out(Path(course_dir) / "submitted" / student / assignment, box.graded)
        if extra:
            status += "; not graded (not the assignment's files): " + ", ".join(extra[:5]) + \
                (f" and {len(extra) - 5} more" if len(extra) > 5 else "")
    return {"student": student, "status": status, "seconds": round(seconds, 1), "output": res.output,
            "parts": parts}


def autograde(assignment, course_dir=COURSE_DIR, jobs=None, timeout=RUN_TIMEOUT, cell_timeout=None,
              site=None, run_timeout=None, print_fn=print, profile=False, students=None,
              reference_cache=None, resume=False, unsafe=False, on_result=None):
    """One `nbgrader autograde` process per student (every one handed in, or those named), at
    most `jobs` at once, each student's line printed and the CSV report rewritten as soon as
    that student is graded; the per-part profile of the grading time (printed with `profile`)
    and, when throughput was graded, a plot of the ratios.

    Throughput stays fair with students graded side by side: every run whose time is scored
    (the reference's, a student's) holds the machine's timing slot alone (launch.timing_slot).
    The reference solutions and the course's demos run once per session, kept in a folder of the
    session's own, or in `reference_cache` (a test session shares one between its classes).

    `on_result(result)` is called with each student's result as soon as it is graded (a cluster
    job returns it: autograder.node_grading).

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
    roll = _roll_call(course_dir, assignment, students, resume, print_fn)
    started, session_start = time.monotonic(), time.time()
    results, interrupted, reference_seconds = _grade(roll, jobs, timeout, settings, env, reference_cache, unsafe,
                                                     print_fn, started, on_result)
    total = time.monotonic() - started
    if interrupted:
        path = write_report(course_dir, assignment, roll.report_rows())
        missing = [s for s in roll.students if s not in roll.done_rows]
        print_fn(f"{len(roll.students) - len(missing)} of {len(roll.students)} student(s) graded and kept in {path}; "
                 f"not graded: {', '.join(missing)}. Go on with: handson autograde {assignment} --resume")
        raise KeyboardInterrupt
    rows = _finish(roll, results, f"with {jobs} at a time", total, session_start, site, profile, print_fn)
    if roll.to_grade:
        costs = grading_plan.session_costs([results[s] for s in roll.to_grade], total, jobs, launch.cpu_count(),
                                           reference_seconds, socket.gethostname())
        grading_plan.write_costs(costs_path(course_dir, assignment), costs)
    return rows, total


def costs_path(course_dir, assignment):
    """Where a one-machine session keeps its per-student costs (`handson autograde --plan`)."""
    return Path(course_dir) / f"autograde_{assignment}_costs.json"


@dataclasses.dataclass
class _Roll:
    """Who a grading session grades, and the report's rows as they come."""
    course_dir: Path
    assignment: str
    handed_in: list   # every student with a submission of the assignment
    students: list    # those the session is about (every one handed in, or those named)
    to_grade: list    # those of them graded now (--resume keeps the others' rows)
    earlier: dict     # the last report's row of each student handed in
    done_rows: dict   # the rows of this session's gradings, and those --resume keeps
    before: set       # the students the gradebook held a grade of before the session

    def report_rows(self):
        """The report's rows: each student's of this session, else of the last report."""
        return [self.done_rows.get(s) or self.earlier[s] for s in self.handed_in
                if s in self.done_rows or s in self.earlier]


def _roll_call(course_dir, assignment, students, resume, print_fn):
    """The session's _Roll: the submissions handed in (of `students` where named), less those
    `resume` keeps; no submission at all ends the session."""
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
    try:
        before = set(scores(course_dir, assignment))
    except Exception:  # no gradebook yet
        before = set()
    return _Roll(course_dir, assignment, handed_in, students, to_grade, earlier, done_rows, before)


def _grade(roll, jobs, timeout, settings, env, reference_cache, unsafe, print_fn, started, on_result=None):
    """Every student of roll.to_grade, `jobs` at once, in the session's folders: ({student: result},
    whether Ctrl-C stopped the session, seconds measuring the references). What the submissions
    left running is stopped at the end."""
    results, interrupted, reference_seconds = {}, False, 0.0
    with _session_folders(reference_cache, print_fn) as (shared, scratch):
        pool = ThreadPoolExecutor(max_workers=jobs)
        print_fn(f"Autograding {len(roll.to_grade)} submission(s) of {roll.assignment!r}, {jobs} at a time "
                 f"(session {scratch}) ...")
        # The reference is measured once per session.
        settings = settings.but(reference_cache=shared, session=scratch)
        box = None
        if not unsafe:
            # The machine's timing slot stays out of the sandbox: the grader takes it for the runs
            # of its checks; a kernel's own runs share a slot of their own (sandbox.command).
            # Not even the session's references: they are the grader's (its seed, its replays).
            box = sandbox.prepare(scratch, graded=graded_files(roll.course_dir, roll.assignment))
            measuring = time.monotonic()
            _measure_references(roll.assignment, shared, print_fn)
            reference_seconds = time.monotonic() - measuring
        else:
            print_fn("--unsafe: the submissions run as you, outside the grading sandbox")
        futures = [pool.submit(_autograde_one, roll.course_dir, roll.assignment, s, timeout, settings, env, scratch,
                               box)
                   for s in grading_order(roll.to_grade)]
        try:
            _collect(futures, roll, results, print_fn, started, on_result)
        except KeyboardInterrupt:
            interrupted = True
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
            print_fn("Interrupted: stopping every run of this session ...")
            for future in futures:
                future.cancel()
        finally:
            _stop_what_was_left(scratch, interrupted, print_fn)
            pool.shutdown(wait=True)
            if interrupted:
                signal.signal(signal.SIGINT, signal.default_int_handler)
    return results, interrupted, reference_seconds


def _collect(futures, roll, results, print_fn, started, on_result=None):
    """Each student's result as it comes: handed to `on_result`, its row printed and the report
    rewritten, then the progress line."""
    for future in as_completed(futures):
        result = future.result()
        results[result["student"]] = result
        if on_result is not None:
            on_result(result)
        try:
            graded = scores(roll.course_dir, roll.assignment)
        except Exception as exc:  # the gradebook busy with another student's write: read it below
            print_fn(f"  {result['student']:20s} graded in {result['seconds']:.1f} s "
                     f"(score read later: {exc})")
        else:
            roll.done_rows[result["student"]] = report_row(result, graded, roll.course_dir, roll.assignment,
                                                           roll.before)
            print_fn(row_line(roll.done_rows[result["student"]]))
            write_report(roll.course_dir, roll.assignment, roll.report_rows())
        print_fn("  " + progress_line(len(results), len(roll.to_grade), time.monotonic() - started))


def _stop_what_was_left(scratch, interrupted, print_fn):
    """Stop every process that carries the session (SESSION_ENV): what submissions left running."""
    left = {proc: _name_of(proc) for proc in launch.processes_carrying(SESSION_ENV, scratch)}
    if left:
        launch.terminate_all(list(left))
        if not interrupted:
            print_fn(f"stopped {len(left)} process(es) that submissions left running: "
                     + ", ".join(sorted(set(left.values()))))


def _finish(roll, results, how, total, session_start, site, profile, print_fn):
    """The rows of the session's students (the scores the gradebook was too busy to give, read
    now), printed; the report, the profile and the plot of the throughput ratios written."""
    course_dir, assignment, to_grade = roll.course_dir, roll.assignment, roll.to_grade
    if any(s not in roll.done_rows for s in to_grade):
        graded = scores(course_dir, assignment)
        roll.done_rows.update({s: report_row(results[s], graded, course_dir, assignment, roll.before)
                               for s in to_grade if s not in roll.done_rows})
    rows = [roll.done_rows[s] for s in roll.students]
    print_fn("Scores:")
    for row in rows:
        print_fn(row_line(row))
    report = write_report(course_dir, assignment, roll.report_rows())
    profile_csv = write_profile(report.with_name(f"autograde_{assignment}_profile.csv"),
                                [results[s] for s in to_grade], session_start)
    if profile:
        print_fn(profile_table(results[s] for s in to_grade))
    print_fn(f"{len(to_grade)} submission(s) in {total:.1f} s {how}; report: {report}; "
             f"where the time went: {profile_csv}")
    plot_throughput(rows, report, assignment, site, print_fn)
    return rows


def _measure_references(assignment, cache, print_fn):
    """The assignment's reference runs (PRE_MEASURED), measured before any student, outside the
    sandbox; the grader reads them for every student (the sandbox does not see them)."""
    from handson_lib.checking import reference  # instructor-only: the autograder has it
    from handson_lib.checking.scripts import session_seed
    seed = session_seed(cache)   # the students' runs have the same seed: the same training
    for name, args, np in PRE_MEASURED.get(assignment, []):
        print_fn(f"  the reference {name} on {np or 1} {'rank(s)' if np else 'process'} ...")
        reference.measure_reference(name, [*args, "--seed", str(seed)], RUN_TIMEOUT, np=np, cache=cache)


#: A grading session's folder (in the temporary folder), and the lock its session holds while it
#: lives: a folder whose lock nobody holds is left from a session that was killed (its node died).
SESSION_PREFIX = "handson-autograde-"
SESSION_LOCK = ".session.lock"


def stale_sessions(tmp=None):
    """The grading sessions' folders in `tmp` (default: the temporary folder) left by sessions that
    ended without removing them: folders of this account's own, not links, whose lock no process
    holds. A folder without a lock (being made now) is left alone."""
    found = []
    for folder in sorted(Path(tmp or tempfile.gettempdir()).glob(SESSION_PREFIX + "*")):
        try:
            info = os.lstat(folder)
            fd = os.open(folder / SESSION_LOCK, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue   # its session holds the lock: alive
        finally:
            os.close(fd)
        found.append(folder)
    return found


def sweep_stale_sessions(print_fn=print, tmp=None):
    """Remove what killed sessions left (their students' tmpfs mounts first: sandbox.remove_session),
    before a node grades; how many were removed."""
    stale = stale_sessions(tmp)
    for folder in stale:
        sandbox.remove_session(folder, print_fn)
    if stale:
        print_fn(f"removed {len(stale)} grading session(s) that a killed grading left: "
                 + ", ".join(folder.name for folder in stale))
    return len(stale)


@contextlib.contextmanager
def _session_folders(shared=None, print_fn=print):
    """(the folder that keeps a grading session's reference runs and demos, the session's own
    folder for each student's profile and runs): `shared` where given (a test session grades
    several classes with one set of references), else inside the session's folder; the
    session's folder is removed at the end (sandbox.remove_session: whatever a submission left
    there, never an error in place of the grading's result). The session holds the folder's lock
    while it lives (stale_sessions)."""
    scratch = tempfile.mkdtemp(prefix=SESSION_PREFIX)
    alive = os.open(Path(scratch) / SESSION_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    fcntl.flock(alive, fcntl.LOCK_EX)
    try:
        shared = Path(shared) if shared is not None else Path(scratch) / "references"
        shared.mkdir(parents=True, exist_ok=True)
        yield str(shared), scratch
    finally:
        sandbox.remove_session(scratch, print_fn)
        os.close(alive)


def _name_of(proc):
    try:
        return proc.name()
    except Exception:  # gone already
        return "?"
