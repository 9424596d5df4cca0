"""One job of a cluster grading session (`handson autograde --on-cluster`), run on its node.

The submitting grader (handson_lib.autograder.cluster_grading) gives the job a folder holding
job.json (the assignment, the students, the session's settings) and a private copy of the
course with those students' submissions. Here the node grades them exactly as `handson autograde`
grades on one machine (the sandbox, this node's timing slot), against that copy's gradebook, and
returns each student as data: results/<student>.json, written whole as soon as the student is
graded. Only the submitting grader writes the course's gradebook, after checking what came back.

Beside the grading, heartbeat.json is rewritten every few seconds (the node's name and the time):
a node whose heartbeat stops has died, and its students are graded elsewhere. A node that cannot
start the sandbox says why in failed.json and grades nobody. A `stop` file in the job's folder
(the submitting grader's Ctrl-C) stops the grading as Ctrl-C stops it on one machine: every run of
the session stopped, its folders removed, then the job ends. The scheduler's SIGTERM (qdel, the
walltime) first kills every process of the job at once (the scheduler's SIGKILL follows within
seconds, and a sandbox that left the job's process tree would outlive it), then does the same.

    python -m handson_lib.autograder.node_grading JOB_FOLDER
"""

import hashlib
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from handson_lib import launch, settings
from handson_lib.autograder import nbgrader_course, returned_results, sandbox

#: Seconds between two heartbeats.
HEARTBEAT_EVERY = 5.0
#: Exit status of a job whose node cannot grade (no sandbox): its students go to another node.
CANNOT_GRADE = 3
#: At most so many parts of a student's profile go back, each text cut to MOST_PART_CHARS: the
#: kernel's part of the log is written where the submission can write.
MOST_PARTS, MOST_PART_CHARS = 200, 200
#: The scheduler's job id in every process a job starts (Slurm's, PBS's; the grading service's on
#: the hub's machine): the job's processes.
JOB_ID_VARIABLES = ("SLURM_JOB_ID", "PBS_JOBID", settings.variable("grading_job"))


def write_whole(path, data):
    """JSON written to a new file renamed over `path`: a reader never sees half of it."""
    tmp = Path(path).with_name(f".{Path(path).name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def node_name():
    """The scheduler's name of this node (Slurm's), else the host's."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def node_type():
    """What makes nodes alike for the reference's measurement: the processor's model and the
    cores this job may use (the nodes of a queue are usually one type: the reference is measured
    once per type, not once per node)."""
    model = ""
    try:
        with open("/proc/cpuinfo") as info:
            model = next((line.split(":", 1)[1] for line in info if line.startswith("model name")), "")
    except OSError:
        pass
    words = re.sub(r"[^A-Za-z0-9.]+", "-", model).strip("-")[:60] or "cpu"
    return f"{words}-{launch.cpu_count()}cores"


def beat(job_dir, stop):
    """heartbeat.json every HEARTBEAT_EVERY seconds until `stop` is set; the main thread
    interrupted (as by Ctrl-C) once the submitting grader leaves a `stop` file."""
    asked = False
    while not stop.is_set():
        try:
            write_whole(Path(job_dir) / "heartbeat.json", {"node": node_name(), "time": time.time(),
                                                         "pid": os.getpid()})
        except OSError:
            pass  # a full or slow file system: the next beat tries again
        if not asked and (Path(job_dir) / "stop").exists():
            asked = True
            os.kill(os.getpid(), signal.SIGINT)   # a real signal: it wakes the main thread's wait
        stop.wait(HEARTBEAT_EVERY)


def cell_grades(course_dir, assignment, student, tries=10):
    """({notebook: {grade cell: [auto score, max score]}}, {notebook: {cell: auto comment}},
    {notebook: late penalty}) of the student's submission in this job's gradebook (sqlite: another
    student's grading may be writing it, so a busy database is tried again)."""
    from nbgrader.api import Gradebook, MissingEntry
    for attempt in range(tries):
        try:
            with Gradebook(f"sqlite:///{Path(course_dir) / 'gradebook.db'}") as gb:
                try:
                    sub = gb.find_submission(assignment, student)
                except MissingEntry:
                    return {}, {}, {}
                grades = {nb.name: {g.name: [g.auto_score, g.max_score] for g in nb.grades} for nb in sub.notebooks}
                comments = {nb.name: {c.name: c.auto_comment for c in nb.comments} for nb in sub.notebooks}
                penalties = {nb.name: nb.late_submission_penalty for nb in sub.notebooks}
                return grades, comments, penalties
        except Exception:  # "database is locked"
            if attempt == tries - 1:
                raise
            time.sleep(0.5 + attempt)


def autograded_files(course_dir, assignment, student):
    """{path in the student's graded folder: sha256} of what nbgrader wrote there (plain files)."""
    folder = Path(course_dir) / "autograded" / student / assignment
    files = {}
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if path.is_file() and not path.is_symlink():
            files[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return files


def capped_parts(parts):
    return [{key[:MOST_PART_CHARS]: value[:MOST_PART_CHARS] if isinstance(value, str) else value
             for key, value in list(part.items())[:20]} for part in parts[:MOST_PARTS]]


def student_result(course_dir, assignment, result):
    """What goes back to the submitting grader for one student: the status, the seconds and the
    parts (the profile), the grade cells' scores and comments, and the graded files' digests."""
    student = result["student"]
    graded = returned_results.is_graded(result["status"])
    grades, comments, penalties = cell_grades(course_dir, assignment, student) if graded else ({}, {}, {})
    return {"student": student, "node": node_name(), "status": result["status"], "seconds": result["seconds"],
            "parts": capped_parts(result.get("parts", [])), "grades": grades, "comments": comments, "penalties": penalties,
            "files": autograded_files(course_dir, assignment, student)}


def job_processes():
    """Every other process that carries this job's id (also those that left its process tree)."""
    found = []
    for name in JOB_ID_VARIABLES:
        if os.environ.get(name):
            found += [p for p in launch.processes_carrying(name, os.environ[name]) if p not in found]
    return found


def _sigterm_is_interrupt(signum, frame):
    # The scheduler's qdel or walltime: every process of the job first (its SIGKILL is seconds
    # away), then the orderly stop of Ctrl-C.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    procs = job_processes()
    sandbox.thaw(procs)   # a kernel frozen for a report cell takes no SIGKILL
    launch.terminate_all(procs, timeout=2.0)
    raise KeyboardInterrupt


def grade_job(job_dir, print_fn=print):
    """Grade the job's students; 0 when every one came back, CANNOT_GRADE without a sandbox."""
    job_dir = Path(job_dir)
    spec = json.loads((job_dir / "job.json").read_text())
    course_dir, assignment = job_dir / "course", spec["assignment"]
    results_dir = job_dir / "results"
    results_dir.mkdir(exist_ok=True)
    why = sandbox.why_not_available()
    if why:
        write_whole(job_dir / "failed.json", {"node": node_name(), "why": f"the grading sandbox cannot start: {why}"})
        print_fn(f"{node_name()}: the grading sandbox cannot start here: {why}")
        return CANNOT_GRADE
    nbgrader_course.sweep_stale_sessions(print_fn)   # a session killed with its node left its tmpfs mounts
    references = Path(spec["references"]) / node_type()   # measured once per node type, before its students
    references.mkdir(parents=True, exist_ok=True)

    def returned(result):
        write_whole(results_dir / f"{result['student']}.json", student_result(course_dir, assignment, result))

    print_fn(f"{node_name()}: grading {len(spec['students'])} student(s) of {assignment!r}")
    nbgrader_course.autograde(assignment, course_dir, jobs=spec.get("jobs"), timeout=spec["timeout"],
                              cell_timeout=spec.get("cell_timeout"), site=spec.get("site"),
                              run_timeout=spec.get("run_timeout"), students=spec["students"],
                              reference_cache=references, print_fn=print_fn,
                              on_result=returned)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m handson_lib.autograder.node_grading JOB_FOLDER", file=sys.stderr)
        return 2
    sys.stdout.reconfigure(line_buffering=True)   # the job's output file follows the grading
    signal.signal(signal.SIGINT, signal.default_int_handler)   # the `stop` file's Ctrl-C, even if the job ignored it
    signal.signal(signal.SIGTERM, _sigterm_is_interrupt)
    stop = threading.Event()
    threading.Thread(target=beat, args=(argv[0], stop), daemon=True).start()
    try:
        return grade_job(argv[0])
    except KeyboardInterrupt:
        return 130
    finally:
        stop.set()


if __name__ == "__main__":
    sys.exit(main())
