"""The classroom's grading service (`handson classroom up --grade-on-submit`): a JupyterHub managed
service (the hub starts it, as root, and starts it again when it dies) that grades each
submission as it arrives and releases its feedback to its student.

Every few seconds (`GradingService.tick`):

1. the exchange's inbound/ is read: each new submission is queued (grading_queue.Store), under
   the student it names only when that student made it (another's name queues nothing);
2. the jobs grading are followed as `handson autograde --on-cluster` follows its jobs
   (autograder.cluster_grading.ClusterSession: heartbeats, a dead node's students sent again);
   each student's result is checked and written by the one trusted writer
   (autograder.returned_results), then the report's row (autograde_<assignment>.csv);
3. the queue's next students (grading_queue.choose: fair, the latest submission counts) are
   collected with the course's vetting (classroom.grading_steps, as the instructor) and sent to
   one job per batch: on the local cluster or the site's scheduler when one answers, else as a
   process of this machine (grading_scheduler.ThisMachine), as many students at once as its cores
   allow. A job is autograder.node_grading: the same sandbox and reference as `handson autograde`
   (measured once per node type, kept in STATE/grading/references);
4. the feedback of each graded student is generated (without hidden tests) and released to that
   student alone (nbgrader's feedback exchange: the Assignments tab fetches it).

Its page (`/services/grading/`, classroom.grading_pages) shows each student their own
submissions and the staff the class.

    python -m handson_lib.classroom.grading_service     (started by the hub)
"""

import fcntl
import json
import math
import os
import pwd
import shutil
import sys
import time
import traceback
import types
from pathlib import Path

from handson_lib import settings
from handson_lib.autograder import cluster_grading, grading_scheduler, nbgrader_course, returned_results
from handson_lib.autograder.grading_report import read_report, report_row, scores, write_report
from handson_lib.classroom import accounts, grading_pages, grading_queue, nbgrader_setup
from handson_lib.classroom.layout import layout, load_settings
from handson_lib.sites import table

#: Seconds between two ticks.
TICK = 2.0
#: Tries of a student's feedback before the service stops trying (it says why on the page).
FEEDBACK_TRIES = 3
MACHINE, SCHEDULER = "machine", "scheduler"


def parse_inbound_name(name):
    """(student, assignment, stamp, seconds) of a name nbgrader's submit makes in inbound/
    (STUDENT+ASSIGNMENT+TIME+RANDOM), else None."""
    parts = name.split("+")
    seconds = stamp_seconds(parts[2]) if len(parts) == 4 and all(parts[:3]) else 0.0
    return (parts[0], parts[1], parts[2], seconds) if seconds else None


def stamp_seconds(stamp):
    """The time nbgrader wrote in a submission's name, in seconds (0 when it is none)."""
    from nbgrader.utils import parse_utc
    try:
        return parse_utc(stamp).timestamp()
    except (ValueError, OverflowError, TypeError):
        return 0.0


def give_to_instructor(*paths):
    """What the service (root) wrote in the course folder, back to the instructor who owns it."""
    uid, gid = accounts.uid_of(accounts.INSTRUCTOR), accounts.gid_of_group(accounts.INSTRUCTOR)
    for path in paths:
        path = Path(path)
        for item in [path, *(path.rglob("*") if path.is_dir() and not path.is_symlink() else [])]:
            if item.exists() or item.is_symlink():
                os.chown(item, uid, gid, follow_symlinks=False)


class _Gone:
    """The scheduler of jobs sent when one answered, now that none does: their jobs are over."""
    local, pbs, nodes = True, False, []

    def state(self, jobid):
        return grading_scheduler.DONE, "no scheduler answers any more"

    def cancel(self, jobid):
        return ""


GONE = _Gone()


class QueueSession(cluster_grading.ClusterSession):
    """The jobs of one assignment and one launcher, followed as ClusterSession follows a class's,
    with the queue's store as its memory: a restarted service follows the same jobs again."""

    def __init__(self, service, assignment, launcher, scheduler, per_node):
        roll = types.SimpleNamespace(course_dir=service.lay.course, assignment=assignment, to_grade=[])
        spec = {"assignment": assignment, "timeout": nbgrader_course.RUN_TIMEOUT, "jobs": per_node,
                "cell_timeout": None, "site": None, "run_timeout": None,
                "references": str(service.folder / "references")}
        super().__init__(roll, scheduler, service.folder / "jobs", spec, max(1, len(scheduler.nodes)), None,
                         service.say)
        self.service, self.store, self.launcher = service, service.store, launcher
        self.ending, self.finished = None, []

    def new_job(self, students):
        """The job's row, and its students marked as grading there, before anything is sent: a
        service killed after qsub finds the job and knows whom it grades."""
        rows = self.sending
        job = self.store.add_job(self.roll.assignment, lambda n: self.folder / f"job-{n:05d}", self.launcher,
                                 students, time.time())
        self.store.start([r.id for r in rows], job.number, time.time())
        return cluster_grading.GradingJob(job.number, Path(job.folder), list(students))

    def send(self, rows):
        """One job for the queue's `rows` (one per student)."""
        students = [r.student for r in rows]
        for student in students:   # a student graded before in this session is graded anew
            self.results.pop(student, None)
            self.given_up.pop(student, None)
        self.sending = rows
        job = self.submit(students)
        self.store.set_jobid(job.number, job.jobid)
        return job

    def restore(self, job):
        """A job the store says is running (the service was restarted): followed again."""
        followed = cluster_grading.GradingJob(job.number, Path(job.folder), list(job.students), jobid=job.jobid or "",
                                              submitted=time.monotonic())
        self.jobs.append(followed)
        for row in self.store.of_job(job.number):
            if row.state in (grading_queue.GRADED, grading_queue.RELEASED, grading_queue.FAILED):
                self.results[row.student] = {"restored": row.state}
        if not job.jobid:
            self.end(followed, "the service stopped before the job was sent")

    def end(self, job, why, cancel=False, node_failed=False):
        self.ending = job
        try:
            super().end(job, why, cancel, node_failed)
        finally:
            self.ending = None
        self.store.end_job(job.number, job.ended)
        self.finished.append(job)

    def requeue(self, students, why):
        for student in students:
            state = self.store.back_to_queue(self.ending.number, student, why, cluster_grading.MOST_TRIES)
            if state:
                self.say(f"  {student}: {state} ({why})")

    def take_results(self, job):
        super().take_results(job)
        for student in job.students:   # a result refused for the student's own work (too large)
            if student in self.given_up:
                self.store.fail(job.number, student, self.given_up[student])

    def grading_in(self, job):
        """The students whose row of `job` still waits for its result (not one graded there before
        and sent to a newer job since: the older job's result of them is not theirs now)."""
        return {r.student for r in self.store.of_job(job.number) if r.state == grading_queue.GRADING}

    def left_in(self, job):
        return [s for s in super().left_in(job) if s in self.grading_in(job)]

    def write(self, job, result):
        """The trusted side (returned_results), then the gradebook's score into the queue; nothing
        for a student whose row of this job is decided already."""
        course, assignment, student = self.roll.course_dir, self.roll.assignment, result["student"]
        if student not in self.grading_in(job):
            return
        returned_results.write_result(result, job.folder / "course" / "autograded", course, assignment)
        give_to_instructor(course / "autograded" / student / assignment)
        self.results[student] = result
        graded = scores(course, assignment)
        row = self.service.report(assignment, result, graded)
        state = grading_queue.GRADED if returned_results.is_graded(result["status"]) else grading_queue.FAILED
        if self.store.graded(job.number, student, row["score"], row["max_score"], result.get("grades", {}),
                             row["status"], time.time(), state):
            self.say(f"  {student} {assignment}: {row['score']:g} / {row['max_score'] or '-'} ({row['status'][:120]})")

    def tidy(self):
        """Remove the folders of jobs that returned every student, once the scheduler holds them no more."""
        for job in list(self.finished):
            if job.ended != "returned every student":
                self.finished.remove(job)   # kept, with its output, for the instructor to read
            elif self._done(job):
                shutil.rmtree(job.folder, ignore_errors=True)
                self.finished.remove(job)


class GradingService:
    """The queue's worker (module docstring); one per classroom (its lock)."""

    def __init__(self, lay=None, say=print):
        self.lay = lay or layout()
        self.folder = self.lay.grading
        self.folder.mkdir(mode=0o700, exist_ok=True)
        self.say = say
        self.store = grading_queue.Store(self.folder / "queue.sqlite")
        self.per_hour = settings.current().gradings_per_hour
        self.machine = grading_scheduler.ThisMachine(site=table.get_site("local"))
        self.sessions = {}
        self.feedback_failures = {}
        self.waiting_for_scheduler = False
        self.seen = {row[0] for row in self.store.db.execute("SELECT name FROM submissions")}
        for job in self.store.active_jobs():
            self.session(job.assignment, job.launcher).restore(job)

    # ------------------------------------------------------------------ where jobs go
    def scheduler(self):
        """(launcher, scheduler, students at once on a node, students in flight at most) of the
        classroom's choice (`up --grade-on`): the local cluster or the site's scheduler where one
        answers (`auto`, `scheduler`: none then is no grading), else this machine."""
        from handson_lib.sites import jobs
        where = load_settings(self.lay).get("grade_on", "auto")
        try:
            if where == MACHINE:
                raise grading_scheduler.SchedulerError("this machine, as the classroom asks")
            found = grading_scheduler.find()
            if not found.local and not jobs.scheduler_answers():
                raise grading_scheduler.SchedulerError("no scheduler answers")
        except grading_scheduler.SchedulerError as err:
            if where == SCHEDULER:
                if not self.waiting_for_scheduler:
                    self.say(f"grading service: no scheduler to grade on ({err}); waiting for one")
                self.waiting_for_scheduler = True
                return SCHEDULER, GONE, None, 0
            return MACHINE, self.machine, None, nbgrader_course.default_jobs()
        self.waiting_for_scheduler = False
        nodes = max(1, len(found.nodes) or 4)
        per_node = math.ceil(nbgrader_course.default_jobs() / nodes) if found.local else nbgrader_course.default_jobs()
        return SCHEDULER, found, per_node, nodes * per_node

    def session(self, assignment, launcher, scheduler=None, per_node=None):
        key = (assignment, launcher)
        if key not in self.sessions:
            if scheduler is None:
                scheduler = self.machine if launcher == MACHINE else self.scheduler()[1]
            self.sessions[key] = QueueSession(self, assignment, launcher, scheduler, per_node)
        return self.sessions[key]

    # ------------------------------------------------------------------ one tick
    def tick(self):
        self.scan()
        for session in list(self.sessions.values()):
            session.poll()
            session.tidy()
        self.dispatch()
        self.release()

    def class_students(self):
        return set(accounts.student_names(load_settings(self.lay).get("students", 0)))

    def scan(self):
        """New folders in the exchange's inbound/: each queued under the student it names, only
        when that student made it; anything else is recorded, refused, under whoever made it."""
        inbound = self.lay.exchange / nbgrader_course.COURSE_ID / "inbound"
        if not inbound.is_dir():
            return
        students, released = self.class_students(), set(nbgrader_setup.released(self.lay))
        new = [entry for entry in os.scandir(inbound) if entry.name not in self.seen]
        # In the order they were handed in (the time in their names), among those seen at once.
        new.sort(key=lambda entry: (parse_inbound_name(entry.name) or ("", "", "", 0.0))[3])
        for entry in new:
            self.seen.add(entry.name)
            owner = owner_of(entry.stat(follow_symlinks=False))
            parsed = parse_inbound_name(entry.name)
            why = refusal(parsed, owner, entry.is_dir(follow_symlinks=False), students, released)
            if why is None:
                student, assignment, stamp, stamp_time = parsed
                self.store.add(entry.name, student, assignment, stamp, stamp_time, time.time())
            elif owner in students:
                self.store.refuse_unseen(entry.name, owner, parsed[1] if parsed else "?", why, time.time())

    def dispatch(self):
        """The queue's next students (grading_queue.choose), collected, then sent: one job per
        assignment."""
        launcher, scheduler, per_node, capacity = self.scheduler()
        in_flight = self.store.grading()
        free = capacity - len(in_flight)
        if free <= 0:
            return
        since = self.store.started_since(time.time() - grading_queue.HOUR)
        chosen = grading_queue.choose(self.store.queued(), {r.student for r in in_flight}, free, since, self.per_hour)
        for assignment in sorted({r.assignment for r in chosen}):
            rows = self.collected([r for r in chosen if r.assignment == assignment], assignment)
            if rows:
                self.session(assignment, launcher, scheduler, per_node).send(rows)
                self.say(f"{assignment}: {', '.join(r.student for r in rows)} sent to a job ({launcher})")

    def collected(self, rows, assignment):
        """The rows whose submission nbgrader's vetted collect put in submitted/ (a regrade grades
        what is there); the others refused, with the collect's reason."""
        fresh = [r for r in rows if not r.regrade]
        done = self.steps("collect", assignment, [r.student for r in fresh]) if fresh else {}
        sent = []
        for row in rows:
            got = done.get(row.student, {})
            collected = got.get("collected")
            if row.regrade or collected == row.stamp:
                sent.append(row)
            elif collected and stamp_seconds(collected) > row.stamp_time:
                # Handed in again since it was queued: the newer one is queued (now or at the next
                # look at the exchange) and graded instead.
                self.store.supersede(row.id, f"a newer submission replaced it ({collected})")
            else:
                why = (got.get("refused") or {}).get(row.name) or got.get("error") or "it was not collected"
                self.store.refuse(row.id, f"refused by the collect's vetting: {why}")
        return sent

    def release(self):
        """Feedback of the graded, generated and released to each student alone."""
        rows = [r for r in self.store.to_release() if self.feedback_failures.get(r.id, 0) < FEEDBACK_TRIES]
        for assignment in sorted({r.assignment for r in rows}):
            mine = [r for r in rows if r.assignment == assignment]
            done = self.steps("feedback", assignment, sorted({r.student for r in mine}))
            for row in mine:
                if row.student in done and done[row.student] is None:
                    self.store.released(row.id, time.time())
                    continue
                tries = self.feedback_failures[row.id] = self.feedback_failures.get(row.id, 0) + 1
                self.say(f"  feedback of {row.student} {assignment} failed: {done.get(row.student)}")
                if tries == FEEDBACK_TRIES:   # graded all the same: the page says so, the instructor reads why
                    self.store.note(row.id, f"{grading_pages.FEEDBACK_FAILED}: {str(done.get(row.student))[:300]}")

    def steps(self, step, assignment, students):
        """classroom.grading_steps as the instructor: its JSON answer ({} when it failed)."""
        result = nbgrader_setup.run_as(accounts.INSTRUCTOR, self.lay.instructor_venv,
                                       ["python", "-m", "handson_lib.classroom.grading_steps", step, assignment,
                                        *students], self.lay.course, timeout=900, check=False)
        try:
            return json.loads(result.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.say(f"  {step} of {assignment} failed: {(result.stdout + result.stderr)[-1500:]}")
            return {}

    def report(self, assignment, result, graded):
        """The student's row of autograde_<assignment>.csv, as `handson autograde` writes it."""
        course = self.lay.course
        row = report_row(result, graded, course, assignment, before=set(graded))
        rows = read_report(course, assignment)
        rows[result["student"]] = row
        path = write_report(course, assignment, [rows[s] for s in sorted(rows)])
        give_to_instructor(path)
        return row


def owner_of(info):
    """The account that made a folder of inbound/ (a student cannot give a folder away)."""
    return accounts.name_of(pwd.getpwuid, info.st_uid)


def refusal(parsed, owner, is_folder, students, released):
    """Why a folder of inbound/ is not queued (None: it is): a name nbgrader's submit does not
    make, an assignment not released, someone not of the class, another's name, not a folder."""
    if parsed is None:
        return "its name is not one nbgrader's submit makes (STUDENT+ASSIGNMENT+TIME+ID)"
    student, assignment = parsed[:2]
    if assignment not in released:
        return f"{assignment} is not an assignment released to the class"
    if student not in students:
        return f"{student} is not a student of the class"
    if owner != student:
        return f"it belongs to {owner}, not to {student}: handed in under another's name"
    if not is_folder:
        return "it is not a folder"
    return None


def work(lay, parent):
    """The worker (a process of its own, without the hub's token in its environment): a tick every
    TICK seconds while the service's page process that started it lives; an error is said and the
    next tick tries again."""
    lock = hold_the_lock(lay.grading)
    service = GradingService(lay)
    service.say(f"grading service: worker {os.getpid()} follows {len(service.store.active_jobs())} job(s)")
    while os.getppid() == parent:
        try:
            service.tick()
        except Exception:   # the service lives on; the hub's log has the traceback
            service.say("the grading service's tick failed:\n" + traceback.format_exc())
        time.sleep(TICK)
    lock.close()


def hold_the_lock(folder):
    """One worker per classroom: a second one (a restart racing the old worker, which ends once it
    sees its page process gone) waits here."""
    handle = open(Path(folder) / "service.lock", "w")
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def main(argv=None):
    """The page (this process, which the hub starts and restarts) and the worker (its child)."""
    import subprocess
    argv = sys.argv[1:] if argv is None else argv
    sys.stdout.reconfigure(line_buffering=True)
    lay = layout()
    lay.grading.mkdir(mode=0o700, exist_ok=True)
    if argv[:1] == ["--worker"]:
        work(lay, int(argv[1]))
        return 0
    clean = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
    worker = subprocess.Popen([sys.executable, "-m", "handson_lib.classroom.grading_service", "--worker",
                               str(os.getpid())], env=clean)

    def watch():
        if worker.poll() is not None:   # the hub starts the whole service again
            print(f"grading service: the worker ended ({worker.returncode})", flush=True)
            os._exit(1)
    grading_pages.serve(lay, watch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
