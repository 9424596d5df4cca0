"""The nbgrader course: assignments assembled from the single source, parallel autograding.

    handson course assemble [--course DIR]       # source/<assignment>/ from solutions/ + exercises/
    cd course && nbgrader generate_assignment setup
    ... students' work in course/submitted/<student>/<assignment>/ (nbgrader collect puts it there)
    handson autograde setup [--jobs 2]            # one `nbgrader autograde` process per student
    cd course && nbgrader generate_feedback setup && nbgrader export

An assignment's source holds the instructor notebook (with its markers, for nbgrader) and the
*student skeletons* of its scripts: nbgrader copies non-notebook files unchanged into the
release, so it must never see the solution scripts. The grade cells run the student's scripts
through handson_lib.grading, which measures the reference solution from solutions/ itself.
"""

import csv
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from handson_lib import COURSE_ROOT, mpi

COURSE_DIR = COURSE_ROOT / "course"
#: assignment -> (instructor notebook in solutions/, student files from exercises/)
ASSIGNMENTS = {
    "setup": ("00_setup.ipynb", []),
    "task1": ("01_multi_gpu.ipynb", ["train_cifar_multi_gpu.py", "run_multi_gpu_training.sh"]),
    "task2": ("02_multi_node.ipynb", ["train_cifar_multi_node.py", "run_multi_node_training.sh",
                                      "train_mnist.py", "train_mnist_multi_node.py"]),
}
STUDENT_FILES = {name: files for name, (_, files) in ASSIGNMENTS.items()}
CELL_TIMEOUT = 900       # seconds per cell (a grading cell runs several trainings)
RUN_TIMEOUT = 1800       # seconds per student and assignment, enforced by `handson autograde`


def assemble(course_dir=COURSE_DIR, root=COURSE_ROOT, assignments=None):
    """Write course_dir/source/<assignment>/ for every (or the named) assignment."""
    written = []
    for name in assignments or ASSIGNMENTS:
        notebook, files = ASSIGNMENTS[name]
        dest = Path(course_dir) / "source" / name
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / "solutions" / notebook, dest / notebook)
        for f in files:
            shutil.copy2(root / "exercises" / f, dest / f)
        written.append(dest)
    return written


def nbgrader_env():
    """nbgrader runs `alembic` and kernels from PATH: the venv must come first."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("MPLBACKEND", "Agg")
    return env


def nbgrader(*args, course_dir=COURSE_DIR, timeout=RUN_TIMEOUT):
    cmd = [str(Path(sys.executable).parent / "nbgrader"), *map(str, args)]
    return mpi.run_watched(cmd, timeout, env=nbgrader_env(), cwd=str(course_dir))


def students_of(course_dir, assignment):
    base = Path(course_dir) / "submitted"
    return sorted(p.parent.name for p in base.glob(f"*/{assignment}") if p.is_dir())


def _autograde_one(course_dir, assignment, student, timeout, cell_timeout=None):
    started = time.monotonic()
    extra = [f"--Execute.timeout={int(cell_timeout)}"] if cell_timeout else []
    res = nbgrader("autograde", assignment, "--student", student, "--force", *extra,
                   course_dir=course_dir, timeout=timeout)
    seconds = time.monotonic() - started
    if res.timed_out:
        status = f"stopped after {timeout:.0f} s (the whole run: a cell that never ends?)"
    elif res.returncode != 0:
        lines = [l for l in res.output.splitlines() if "ERROR" in l]
        status = "nbgrader failed: " + (lines[0].split("]", 1)[-1].strip() if lines else f"exit {res.returncode}")
    else:
        status = "graded"
    return {"student": student, "status": status, "seconds": round(seconds, 1), "output": res.output}


def scores(course_dir, assignment):
    from nbgrader.api import Gradebook
    db = f"sqlite:///{Path(course_dir) / 'gradebook.db'}"
    out = {}
    with Gradebook(db) as gb:
        for sub in gb.assignment_submissions(assignment):
            out[sub.student.id] = (sub.score, sub.max_score, sub.needs_manual_grade)
    return out


def autograde(assignment, course_dir=COURSE_DIR, jobs=None, timeout=RUN_TIMEOUT, cell_timeout=None,
              print_fn=print):
    """One `nbgrader autograde` process per student, at most `jobs` at once; a CSV report."""
    jobs = jobs or mpi.cpu_count()
    students = students_of(course_dir, assignment)
    if not students:
        raise SystemExit(f"no submissions in {course_dir}/submitted/*/{assignment}")
    print_fn(f"Autograding {len(students)} submission(s) of {assignment!r}, {jobs} at a time ...")
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda s: _autograde_one(course_dir, assignment, s, timeout, cell_timeout),
                                students))
    total = time.monotonic() - started
    graded = scores(course_dir, assignment)
    rows = []
    for r in results:
        score, max_score, manual = graded.get(r["student"], (0.0, None, False))
        rows.append({"student": r["student"], "score": score, "max_score": max_score,
                     "status": r["status"] if r["student"] in graded else r["status"] + " (no grade: 0)",
                     "seconds": r["seconds"]})
        print_fn(f"  {r['student']:20s} {score:6.1f} / {max_score or '-'}  {r['seconds']:6.1f} s  {rows[-1]['status']}")
    report = Path(course_dir) / f"autograde_{assignment}.csv"
    with report.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["student", "score", "max_score", "status", "seconds"])
        writer.writeheader()
        writer.writerows(rows)
    print_fn(f"{len(students)} submission(s) in {total:.1f} s with {jobs} at a time; report: {report}")
    return rows, total


def main(args):
    course_dir = Path(args.course)
    if args.command == "course":
        for dest in assemble(course_dir, assignments=args.assignments or None):
            print(f"assembled {dest}")
        return 0
    autograde(args.assignment, course_dir, jobs=args.jobs, timeout=args.timeout, cell_timeout=args.cell_timeout)
    return 0
