"""`handson autograde`: the command over the one-machine session (autograder.nbgrader_course),
the cluster session (autograder.cluster_grading) and the projection of a class's grading time
(autograder.grading_plan, `--plan`).
"""

import sys
from pathlib import Path

from handson_lib import COURSE_ROOT, settings
from handson_lib.autograder import grading_plan
from handson_lib.autograder.nbgrader_course import ASSIGNMENTS, autograde, costs_path
from handson_lib.sites import table


def add_arguments(parser):
    parser.add_argument("assignment", nargs="?", help="the assignment to grade (with --plan: whose costs to "
                        "project; default: the last one graded on this machine)")
    parser.add_argument("--jobs", type=int, default=None, help="students graded at once (default: cores + 2; "
                        "with --on-cluster: on each node)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per student before the watchdog")
    parser.add_argument("--cell-timeout", type=float, default=None,
                        help="seconds per cell (default: course/nbgrader_config.py's Execute.timeout)")
    parser.add_argument("--site", default=None, help="throughput thresholds and bands of a site in "
                        f"handson_lib/sites/table.py: {', '.join(table.SITES)} (default: "
                        f"{settings.variable('site')}, else local)")
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
    parser.add_argument("--on-cluster", action="store_true",
                        help="grade as jobs of the cluster's scheduler: the local cluster (`handson cluster up`) "
                             "when it runs, else the site's qsub; one node per job, each in the sandbox")
    parser.add_argument("--nodes", type=int, default=None,
                        help="nodes to spread the students over (default: the local cluster's nodes); with --plan, "
                             "the nodes to project onto (default 1)")
    parser.add_argument("--partition", default=None, help="the queue (partition) of the grading jobs (default: "
                        "the first of the site's queues whose walltime fits a job)")
    parser.add_argument("--plan", type=int, metavar="STUDENTS", default=None,
                        help="print how long a class of STUDENTS takes on --nodes N nodes, from the per-student "
                             "costs the last grading on this machine measured; grades nothing")
    parser.add_argument("--course", default=str(COURSE_ROOT / "course"))


def plan_main(args):
    """--plan: the projection from the costs of the assignment named, else of the last graded."""
    course = Path(args.course)
    found = ([costs_path(course, args.assignment)] if args.assignment
             else sorted(course.glob("autograde_*_costs.json"), key=lambda p: p.stat().st_mtime)[-1:])
    if args.plan < 1 or (args.nodes is not None and args.nodes < 1):
        print("handson autograde --plan: STUDENTS and --nodes must be at least 1", file=sys.stderr)
        return 2
    try:
        if not found:
            raise ValueError(f"no autograde_<assignment>_costs.json in {course}: grade a class on this machine "
                             "first (handson autograde ASSIGNMENT writes it)")
        print(grading_plan.plan_text(grading_plan.read_costs(found[0]), args.plan, args.nodes or 1))
    except ValueError as err:
        print(f"handson autograde --plan: {err}", file=sys.stderr)
        return 1
    return 0


def main(args):
    if args.plan is not None:
        return plan_main(args)
    if not args.assignment:
        print("handson autograde: name the assignment to grade (" + ", ".join(ASSIGNMENTS) + ")", file=sys.stderr)
        return 2
    try:
        if args.on_cluster:
            from handson_lib.autograder import cluster_grading, grading_scheduler
            if args.unsafe:
                print("handson autograde --on-cluster: every node grades in the sandbox; --unsafe is for one "
                      "machine only", file=sys.stderr)
                return 2
            try:
                cluster_grading.autograde_on_cluster(
                    args.assignment, Path(args.course), nodes=args.nodes, partition=args.partition, jobs=args.jobs,
                    timeout=args.timeout, cell_timeout=args.cell_timeout, site=args.site,
                    run_timeout=args.run_timeout, profile=args.profile, resume=args.resume)
            except grading_scheduler.SchedulerError as err:
                print(f"handson autograde --on-cluster: {err}", file=sys.stderr)
                return 1
        else:
            autograde(args.assignment, Path(args.course), jobs=args.jobs, timeout=args.timeout,
                      cell_timeout=args.cell_timeout, site=args.site, run_timeout=args.run_timeout,
                      profile=args.profile, resume=args.resume, unsafe=args.unsafe)
    except KeyboardInterrupt:
        return 130
    return 0
