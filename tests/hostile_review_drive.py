"""Issue 47 item 9 (hostile review): grade one handed-in task script as the course's grader's
report cell does -- the grading sandbox, the judge's runs folder, the kernel's cgroups frozen,
the session's seed and references kept in a reference cache -- and print the report and points.

    sudo .venv/bin/python tests/hostile_review_drive.py TASK SCRIPT [--np N] [--cache DIR] [--fresh-seed]

TASK: multi-gpu | multi-node | mnist-multi-node. The reference cache (default
/tmp/w47h-review-cache) keeps the session's seed and the references between invocations, as one
grading session keeps them for every student.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

POINTS = {"multi-gpu": (4, 1), "multi-node": (5, 2), "mnist-multi-node": (3, 0)}
NAMES = {"multi-gpu": "train_cifar_multi_gpu.py", "multi-node": "train_cifar_multi_node.py",
         "mnist-multi-node": "train_mnist_multi_node.py"}


def points(task, report):
    """The points nbgrader records for the report's grade cells (correctness, throughput)."""
    from handson_lib.checking import checks
    correct_points, speed_points = POINTS[task]
    speed = report.speed_checks
    failed = [c for c in report.checks if c not in speed and not c.passed]
    got = 0.0 if failed else float(correct_points)
    credit = 0.0
    if speed_points:
        try:
            credit = checks.throughput_credit(report, points=speed_points, print_fn=lambda *a: None)
        except AssertionError:
            credit = 0.0
    return got, credit


def grade(task, script_text, np=2, cache="/tmp/w47h-review-cache", student="hostile", print_fn=print):
    from handson_lib import settings as course_settings
    from handson_lib.autograder import judge, nbgrader_ext, sandbox
    from handson_lib.checking import against, checks, reference

    os.makedirs(cache, exist_ok=True)
    os.chmod(cache, 0o755)
    work = Path(tempfile.mkdtemp(prefix="w47h-review-"))
    os.chmod(work, 0o755)
    session = work / "session"
    session.mkdir()
    box = sandbox.prepare(session)
    env, _, own = sandbox.for_student(session, box, student)
    runs, memo = sandbox.judged_runs(session, student)
    handed = work / "handed-in"
    handed.mkdir()
    os.chmod(handed, 0o755)
    script = handed / NAMES[task]
    script.write_text(script_text)
    spec = {"settings": str(session / "sandbox.json"), "own": str(own), "runs": str(runs), "memo": str(memo)}
    saved = dict(os.environ)
    os.environ.update({
        course_settings.VARIABLES["submission"]: str(handed),
        "HANDSON_REFERENCE_CACHE": cache,
        "HANDSON_AUTOGRADE_SESSION": str(session),
        "HANDSON_RUN_TIMEOUT": "300",
        "HANDSON_PLOT_REPORTS": "0",
        judge.JUDGE_ENV: json.dumps(spec),
    })
    started = time.time()
    try:
        with against.reference_solutions_from(reference), nbgrader_ext._judged_runs(True):
            located = checks.locate(NAMES[task])
            if task == "multi-gpu":
                report = checks.check_multi_gpu(located, print_fn=print_fn)
            elif task == "multi-node":
                report = checks.check_multi_node(located, np=np, print_fn=print_fn)
            else:
                report = checks.check_mnist_multi_node(located, np=np, print_fn=print_fn)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        sandbox.release(box, own)
        sandbox.remove_session(str(session), print_fn=lambda *a: None)
        shutil.rmtree(work, ignore_errors=True)
    return report, points(task, report), time.time() - started


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("task", choices=sorted(POINTS))
    parser.add_argument("script")
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--cache", default="/tmp/w47h-review-cache")
    args = parser.parse_args()
    report, (correct, speed), seconds = grade(args.task, Path(args.script).read_text(), np=args.np, cache=args.cache)
    print(report.text())
    print(f"POINTS {args.task} {Path(args.script).name}: correctness {correct} / {POINTS[args.task][0]}, "
          f"speed {speed} / {POINTS[args.task][1]}  ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
