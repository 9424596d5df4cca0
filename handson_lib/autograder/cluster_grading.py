"""`handson autograde ASSIGNMENT --on-cluster`: a class graded as jobs of the cluster's scheduler.

The students are spread over jobs of one node each (the local cluster of `handson cluster up`, or
a site's PBS/Slurm through its `qsub`). Each job grades its students on its node exactly as
`handson autograde` grades on one machine (autograder.node_grading): the sandbox, the node's own
timing slot (one timed run at a time on a node; untimed parts of others meanwhile), the reference
measured on that node before its students. A job returns each student as data; only this process,
the submitting grader, checks it (autograder.returned_results) and writes the gradebook, the
graded files and the report, whose `graded_on` column says which node timed whom.

Faults: a job whose heartbeat stops (its node died), that the scheduler ends early (cancelled,
past its walltime, failed) or whose node cannot start the sandbox: its students not returned yet
are graded again in new jobs, away from the nodes that failed, each at most MOST_TRIES times; a
student is taken once, from the first job that returns it. Ctrl-C cancels every job of the
session, waits until the scheduler holds none, and keeps what was graded (`--resume` goes on).
"""

import contextlib
import dataclasses
import json
import math
import shutil
import signal
import re
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

from handson_lib.autograder import grading_scheduler, nbgrader_course, returned_results
from handson_lib.autograder.grading_profile import progress_line
from handson_lib.autograder.grading_report import report_row, row_line, scores, write_report
from handson_lib.autograder.grading_scheduler import DONE, RUNNING
from handson_lib.launch.progress import read_small
from handson_lib.sites import jobs as site_jobs

#: Seconds without a new heartbeat after which a running job's node is taken for dead.
HEARTBEAT_LIMIT = 60.0
#: Seconds a running job may go without its first heartbeat (the node never started grading).
FIRST_BEAT_LIMIT = 180.0
#: Jobs a student is sent to at most before the session gives up on it.
MOST_TRIES = 3
#: Seconds between two looks at the jobs.
POLL = 2.0
#: Seconds Ctrl-C waits for the jobs to stop by themselves (their nodes stop every run), before qdel.
STOP_WAIT = 60.0
#: Seconds Ctrl-C waits for the scheduler to end the cancelled jobs.
CANCEL_WAIT = 120.0
#: Seconds the session waits for a scheduler that does not answer before it gives up (and cancels).
QUERY_PATIENCE = 300.0
#: Seconds between two progress lines while no student comes back (the nodes measure references).
QUIET_PROGRESS = 60.0


@dataclasses.dataclass
class GradingJob:
    number: int
    folder: Path
    students: list
    jobid: str = ""
    node: str = ""            # from its heartbeat
    beat: str = ""            # the heartbeat last read, and when (this machine's clock)
    beat_seen: float = 0.0
    running_since: float = 0.0
    submitted: float = 0.0    # when qsub took it; `started_after`: seconds until its first heartbeat
    started_after: float = None
    ended: str = ""           # why the session stopped following it ("" while it runs)


class ClusterSession:
    """One cluster grading session: its jobs, the results taken, the students given up on."""

    def __init__(self, roll, scheduler, folder, spec, nodes, partition, print_fn, settled=()):
        """`settled`: students of roll.to_grade decided without a job (refused before sending)."""
        self.roll, self.scheduler, self.folder, self.spec = roll, scheduler, Path(folder), spec
        self.nodes, self.partition, self.say = nodes, partition, print_fn
        self.jobs, self.results, self.given_up, self.settled = [], {}, {}, set(settled)
        self.unanswered_since = None
        self.tries, self.why = Counter(), {}
        self.failed_nodes = set()
        self.expected = returned_results.expected_cells(roll.course_dir, roll.assignment)
        self.started = self.last_progress = time.monotonic()

    # ------------------------------------------------------------------ submitting
    def new_job(self, students):
        """The GradingJob of a new job (its number and folder)."""
        number = len(self.jobs) + 1
        return GradingJob(number, self.folder / f"job-{number:03d}", list(students))

    def submit(self, students):
        """One job for `students`: its folder with the course's copy, its script, qsub."""
        job = self.new_job(students)
        job_course(self.roll.course_dir, job.folder / "course", self.roll.assignment, job.students)
        (job.folder / "job.json").write_text(json.dumps({**self.spec, "students": job.students}))
        queue, walltime = self.scheduler.queue_for(grading_scheduler.walltime_for(len(students)), self.partition)
        hosts = self.scheduler.usable_hosts(self.failed_nodes)
        script = grading_scheduler.job_script(job.folder, f"grade-{self.roll.assignment}-{job.number}", queue,
                                              walltime, self.failed_nodes, host=hosts[job.number % len(hosts)]
                                              if hosts else None)
        with sigint_held():   # a job qsub took is always followed (and cancelled by Ctrl-C)
            job.jobid = self.scheduler.submit(script, job.folder)
            self.jobs.append(job)
        job.submitted = time.monotonic()
        for student in students:
            self.tries[student] += 1
        self.say(f"  job {job.jobid}: {len(students)} student(s), queue {queue}, walltime {walltime // 60} min"
                 + (f", not on {', '.join(sorted(self.failed_nodes))}" if self.failed_nodes else ""))
        return job

    def spread(self, students, batches):
        """`students` over `batches` jobs (the grading order keeps long and short ones mixed)."""
        ordered = nbgrader_course.grading_order(students)
        batches = max(1, min(batches, len(ordered)))
        for i in range(batches):
            if ordered[i::batches]:
                self.submit(ordered[i::batches])

    # ------------------------------------------------------------------ following the jobs
    def active(self):
        return [job for job in self.jobs if not job.ended]

    def waiting_students(self):
        return [s for s in self.roll.to_grade
                if s not in self.results and s not in self.given_up and s not in self.settled]

    def follow(self):
        """Poll the jobs until every student is taken or given up on."""
        while self.waiting_students():
            self.poll()
            if not self.active() and self.waiting_students():
                self.requeue(self.waiting_students(), "no job of the session holds them")
            if time.monotonic() - self.last_progress > QUIET_PROGRESS:
                self.progress()
            time.sleep(POLL)

    def poll(self):
        """One look at every job followed: the results it returned taken, then its state."""
        for job in self.active():
            self.take_results(job)
            if not job.ended:   # a refused result ends it
                self.check(job)

    def progress(self):
        self.last_progress = time.monotonic()
        self.say("  " + progress_line(len(self.results) + len(self.given_up), len(self.roll.to_grade),
                                      time.monotonic() - self.started) + "  " + self.job_counts())

    def state(self, job):
        """The scheduler's (state, word) of the job; None while the scheduler does not answer (a
        failed query is never "done"); SchedulerError after QUERY_PATIENCE seconds of silence."""
        try:
            answer = self.scheduler.state(job.jobid)
        except Exception as err:  # jobs.QueryError, ClusterError, a timeout
            now = time.monotonic()
            self.unanswered_since = self.unanswered_since or now
            if now - self.unanswered_since > QUERY_PATIENCE:
                raise grading_scheduler.SchedulerError(f"the scheduler has not answered for {QUERY_PATIENCE:.0f} s "
                                                       f"({err})") from None
            return None
        self.unanswered_since = None
        return answer

    def check(self, job):
        answer = self.state(job)
        if answer is None:
            return
        state, word = answer
        self.read_heartbeat(job)
        now = time.monotonic()
        if state == RUNNING and not job.running_since:
            job.running_since = now
        if not self.left_in(job):
            self.end(job, "")   # it ends by itself once its node has cleaned up (settle)
        elif state == DONE:
            self.take_results(job)
            if not job.ended:   # its last results may have come with its end
                self.end(job, self.ended_why(job, word) if self.left_in(job) else "")
        elif state == RUNNING and job.beat and now - job.beat_seen > HEARTBEAT_LIMIT:
            self.end(job, f"no heartbeat from {job.node} for {now - job.beat_seen:.0f} s: the node died?",
                     cancel=True, node_failed=True)
        elif state == RUNNING and not job.beat and now - job.running_since > FIRST_BEAT_LIMIT:
            self.end(job, f"running {now - job.running_since:.0f} s without starting to grade", cancel=True,
                     node_failed=True)

    def read_heartbeat(self, job):
        try:
            text = read_small(job.folder / "heartbeat.json", 1000).decode(errors="replace")
            node = node_name(json.loads(text).get("node"))
        except (OSError, ValueError, AttributeError):
            return
        if text != job.beat:
            job.beat, job.beat_seen, job.node = text, time.monotonic(), node or job.node
            if job.started_after is None:
                job.started_after = job.beat_seen - job.submitted

    def ended_why(self, job, word):
        """Why a job the scheduler ended left students ungraded: failed.json's reason, its state."""
        try:
            failed = json.loads(read_small(job.folder / "failed.json", 4000))
            node = node_name(failed.get("node")) or job.node
            self.fail_node(node)
            return f"{node or '?'}: {str(failed.get('why', ''))[:300]}"
        except (OSError, ValueError, AttributeError):
            pass
        if word in ("NODE_FAIL", "BOOT_FAIL"):
            self.fail_node(job.node)
        log = site_jobs.output_file(job.folder, job.jobid)
        return f"the job ended ({word}) before returning them" + (f" (its output: {log})" if log else "")

    def end(self, job, why, cancel=False, node_failed=False):
        """Stop following `job`; its students not taken go to new jobs (`why` says why)."""
        if cancel:
            failed = self.scheduler.cancel(job.jobid)
            if failed and why:
                self.say(f"  job {job.jobid}: qdel failed ({failed})")
        if node_failed:
            self.fail_node(job.node)
        job.ended = why or "returned every student"
        left = self.left_in(job)
        if left:
            self.say(f"  job {job.jobid}{' on ' + job.node if job.node else ''}: {why}; "
                     f"{len(left)} student(s) to grade again")
            self.requeue(left, why)

    def left_in(self, job):
        """The job's students neither taken nor given up on."""
        return [s for s in job.students if s not in self.results and s not in self.given_up]

    def fail_node(self, node):
        """Leave `node` out of the session's next jobs (a name the scheduler knows, where it says)."""
        if node and (not self.scheduler.nodes or node in self.scheduler.nodes):
            self.failed_nodes.add(node)

    def requeue(self, students, why):
        for student in students:
            self.why.setdefault(student, []).append(why)
        retry = [s for s in students if self.tries[s] < MOST_TRIES]
        for student in set(students) - set(retry):
            self.given_up[student] = (f"not graded: sent to {self.tries[student]} job(s), none returned it "
                                      f"({'; '.join(self.why[student])[:600]})")
        usable = [n for n in self.scheduler.nodes if n not in self.failed_nodes]
        if self.scheduler.nodes and not usable:
            for student in retry:
                self.given_up[student] = f"not graded: every node failed ({'; '.join(self.why[student])[:600]})"
            return
        if retry:
            self.spread(retry, len(usable) if usable else self.nodes)

    # ------------------------------------------------------------------ taking results
    def take_results(self, job):
        for path in sorted((job.folder / "results").glob("*.json")):
            student = path.stem
            if student in self.results or student in self.given_up or student not in job.students:
                continue
            try:
                result = returned_results.checked(returned_results.read_result(path), student, job.students,
                                                  self.expected)
                self.write(job, result)
            except returned_results.Refused as err:
                self.say(f"  job {job.jobid}: the result of {student} is refused ({err})")
                if not err.node_fault:   # the student's own work made it: that student alone
                    self.given_up[student] = f"not graded: its result was refused ({err})"
                    continue
                self.fail_node(job.node)
                self.end(job, f"a result was refused: {err}", cancel=True)
                return

    def write(self, job, result):
        """The trusted side: a checked result into the gradebook, the graded files, the report."""
        roll = self.roll
        returned_results.write_result(result, job.folder / "course" / "autograded", roll.course_dir, roll.assignment)
        self.results[result["student"]] = result
        roll.done_rows[result["student"]] = report_row(result, scores(roll.course_dir, roll.assignment),
                                                       roll.course_dir, roll.assignment, roll.before)
        write_report(roll.course_dir, roll.assignment, roll.report_rows())
        self.say(row_line(roll.done_rows[result["student"]]) + f"  (on {result['node']})")
        self.progress()

    def job_counts(self):
        states = Counter("running" if job.running_since else "queued" for job in self.active())
        return ", ".join(f"{n} job(s) {state}" for state, n in sorted(states.items())) or "no job left"

    def settle(self):
        """Wait for the jobs that returned every student to end by themselves (their nodes stop
        what submissions left and remove their folders); qdel every job still listed then."""
        self._wait_done([job for job in self.jobs if job.ended == "returned every student"], CANCEL_WAIT)
        for job in self.jobs:
            if not self._done(job):
                failed = self.scheduler.cancel(job.jobid)
                self.say(f"  job {job.jobid} ({job.ended}) still listed: qdel " + (failed or "done"))

    # ------------------------------------------------------------------ Ctrl-C
    def cancel_all(self):
        """Ctrl-C (or an error): every job grading asked to stop (its node stops its runs and
        removes its folders, as Ctrl-C on one machine), qdel for every other job the scheduler
        lists and for those not ended after STOP_WAIT; wait until the scheduler holds none. The
        job ids it still lists after CANCEL_WAIT."""
        live = [job for job in self.jobs if not self._done(job)]
        grading = [job for job in live if job.beat and not job.ended]
        for job in grading:
            (job.folder / "stop").touch()
        stopping = self._wait_done(grading, STOP_WAIT)
        left = stopping + [job for job in live if job not in grading]
        self.say(f"  {len(grading) - len(stopping)} job(s) stopped grading by themselves; qdel for {len(left)}")
        for job in left:
            failed = self.scheduler.cancel(job.jobid)
            if failed:
                self.say(f"  job {job.jobid}: qdel failed ({failed})")
        left = self._wait_done(left, CANCEL_WAIT)
        for job in self.active():
            job.ended = "cancelled"
        return [job.jobid for job in left]

    def _done(self, job):
        answer = self.state(job)
        return answer is not None and answer[0] == DONE

    def _wait_done(self, jobs, seconds):
        deadline = time.monotonic() + seconds
        while jobs and time.monotonic() < deadline:
            jobs = [job for job in jobs if not self._done(job)]
            if jobs:
                time.sleep(1.0)
        return jobs


@contextlib.contextmanager
def sigint_held():
    """Ctrl-C waits until the block is done (where signals can be held: the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def node_name(text):
    """A node's name as a node file gives it, if it is one ("" otherwise: it goes into job scripts)."""
    return text if isinstance(text, str) and NODE_NAME.fullmatch(text) else ""


def job_course(course_dir, target, assignment, students):
    """A job's own copy of the course: its configuration, the assignment's source, the gradebook
    (sqlite's backup: a consistent copy) and those students' submissions. The node's nbgrader
    writes only there."""
    course_dir, target = Path(course_dir), Path(target)
    target.mkdir(parents=True)
    for name in ("nbgrader_config.py", nbgrader_course.LANG_FILE):
        if (course_dir / name).is_file():
            shutil.copy2(course_dir / name, target / name)
    with open(target / "nbgrader_config.py", "a") as config:
        # The copy is the node's course, whatever root the course's configuration names (the
        # classroom's names its own folder): the node never writes the course's gradebook.
        config.write(f"\nc = get_config()  # noqa: F821\nc.CourseDirectory.root = {str(target)!r}\n")
    shutil.copytree(course_dir / "source" / assignment, target / "source" / assignment, symlinks=True)
    with sqlite3.connect(course_dir / "gradebook.db") as source, sqlite3.connect(target / "gradebook.db") as copy:
        source.backup(copy)
    for student in students:
        shutil.copytree(course_dir / "submitted" / student / assignment, target / "submitted" / student / assignment,
                        symlinks=True)


def refused_before_sending(roll):
    """{student: result} of submissions holding something but plain files: refused here, as one
    machine refuses them (a FIFO would block the copy to the job's folder)."""
    refused = {}
    for student in roll.to_grade:
        odd = nbgrader_course.not_plain_files(Path(roll.course_dir) / "submitted" / student / roll.assignment)
        if odd:
            refused[student] = {"student": student, "seconds": 0.0, "output": "", "parts": [],
                                "status": "refused: the submission holds " + ", ".join(odd)
                                          + "; hand in plain files only"}
    return refused


def autograde_on_cluster(assignment, course_dir, nodes=None, partition=None, jobs=None, timeout=None,
                         cell_timeout=None, site=None, run_timeout=None, print_fn=print, profile=False,
                         students=None, resume=False):
    """The class (or the students named) graded as jobs of the scheduler (module docstring); the
    report, the profile and the plot as `handson autograde` writes them. Returns (rows, seconds)."""
    nbgrader_course.session_settings(site, run_timeout, cell_timeout)   # an unknown site fails here
    roll = nbgrader_course._roll_call(course_dir, assignment, students, resume, print_fn)
    scheduler = grading_scheduler.find(site)
    nodes = nodes or len(scheduler.nodes) or 4
    if scheduler.local and jobs is None:   # the local cluster's nodes share this machine's cores
        jobs = max(1, math.ceil(nbgrader_course.default_jobs() / nodes))
    started, session_start = time.monotonic(), time.time()
    folder = Path(course_dir) / "cluster-grading" / f"{time.strftime('%Y%m%d-%H%M%S')}-{assignment}"
    folder.mkdir(parents=True, mode=0o700)
    spec = {"assignment": assignment, "timeout": timeout or nbgrader_course.RUN_TIMEOUT, "jobs": jobs,
            "cell_timeout": cell_timeout, "site": site, "run_timeout": run_timeout,
            "references": str(folder / "references")}
    refused = refused_before_sending(roll)
    session = ClusterSession(roll, scheduler, folder, spec, nodes, partition, print_fn, settled=refused)
    to_send = [s for s in roll.to_grade if s not in refused]
    print_fn(f"Autograding {len(roll.to_grade)} submission(s) of {assignment!r} on "
             f"{'the local cluster' if scheduler.local else 'the scheduler of ' + scheduler.site.name}, "
             f"{min(nodes, len(to_send))} job(s) at first, {jobs or 'cores + 2'} student(s) at a time on each "
             f"node (session {folder}) ...")
    try:
        if to_send:
            session.spread(to_send, nodes)
        session.follow()
        session.settle()
    except BaseException as err:   # Ctrl-C, a scheduler that stopped answering, a full disk, a bug
        signal.signal(signal.SIGINT, signal.SIG_IGN)   # a second Ctrl-C must not cut the cancelling short
        try:
            _interrupted(session, folder, print_fn, "Interrupted" if isinstance(err, KeyboardInterrupt)
                         else f"Stopped by an error ({type(err).__name__}: {err})")
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        raise
    results = {**refused, **session.results,
               **{s: {"student": s, "status": why, "seconds": 0.0, "output": "", "parts": []}
                  for s, why in session.given_up.items()}}
    failures = [job for job in session.jobs if job.ended != "returned every student"]
    starts = [job.started_after for job in session.jobs[:nodes] if job.started_after is not None]   # the first wave
    if starts:
        print_fn(f"the first jobs started grading {sum(starts) / len(starts):.1f} s after qsub on average "
                 f"(at most {max(starts):.1f} s)")
    rows = nbgrader_course._finish(roll, results, f"on {nodes} node(s)", time.monotonic() - started,
                                   session_start, site, profile, print_fn)
    if failures:
        print_fn(f"{len(failures)} job(s) ended early; their logs and folders are kept in {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return rows, time.monotonic() - started


def _interrupted(session, folder, print_fn, why):
    """Every job cancelled, the report written with what was graded, how to go on."""
    roll = session.roll
    print_fn(f"{why}: cancelling every job of this session ...")
    left = session.cancel_all()
    path = write_report(roll.course_dir, roll.assignment, roll.report_rows())
    missing = [s for s in roll.students if s not in roll.done_rows]
    if left:
        print_fn(f"the scheduler still lists job(s) {', '.join(left)}: `qdel` them by hand")
    else:
        print_fn("no job of this session is queued or running any more")
    print_fn(f"{len(roll.students) - len(missing)} of {len(roll.students)} student(s) graded and kept in {path}; "
             f"not graded: {', '.join(missing) or 'none'}. Go on with: handson autograde {roll.assignment} "
             f"--on-cluster --resume (job folders kept in {folder})")
