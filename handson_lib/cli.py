"""`handson` command line: one entry point for students, instructors and site admins."""

import argparse
import sys


def _doctor(args):
    from handson_lib import doctor
    return doctor.main(as_json=args.json)


def _build(args):
    from handson_lib import build
    return build.main(check=args.check)


def _data_prepare(args):
    from handson_lib import data
    return data.prepare_main(args)


def _demo(args):
    from handson_lib import demo
    return demo.main(args)


def _check(args):
    from handson_lib import grading
    return grading.main(args)


def _bench(args):
    from handson_lib import bench
    return bench.main(args)


def _jobscript(args):
    from handson_lib import jobscript
    return jobscript.main(args)


def _cluster(args):
    from handson_lib import cluster
    return cluster.main(args)


def _course(args):
    from handson_lib import course
    return course.main(args)


def _lab(args):
    from handson_lib import lab
    return lab.main(args)


def _plug(parser, module_name):
    """A sub-command whose module gives `add_arguments(parser)` and `main(args)`."""
    import importlib
    module = importlib.import_module(f"handson_lib.{module_name}")
    module.add_arguments(parser)
    parser.set_defaults(func=lambda args: module.main(args))


def make_parser():
    parser = argparse.ArgumentParser(prog="handson", description=__doc__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("doctor", help="check the environment and say what each missing part disables")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_doctor)

    p = sub.add_parser("build", help="regenerate notebooks/ and exercises/ from solutions/")
    p.add_argument("--check", action="store_true",
                   help="do not write; exit 1 when the committed student copies are stale or leak")
    p.set_defaults(func=_build)

    p = sub.add_parser("data", help="datasets")
    data_sub = p.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    p = data_sub.add_parser("prepare", help="build the cifar10_<size>px_<pct>p.pickle.gz file from the "
                            "official cifar-10-python.tar.gz (run on the login node)")
    from handson_lib.data import add_prepare_arguments
    add_prepare_arguments(p)
    p.set_defaults(func=_data_prepare)

    p = sub.add_parser("demo", help="run the main job on embedded defaults and print throughput")
    p.add_argument("--quick", action="store_true", help="a few iterations only (tests)")
    p.set_defaults(func=_demo)

    p = sub.add_parser("check", help="run a task script under the grader and say what is still wrong")
    p.add_argument("task", help="multi-gpu, multi-node or mnist-multi-node")
    p.add_argument("file", help="your script, e.g. exercises/train_cifar_multi_gpu.py")
    p.add_argument("--timeout", type=float, default=300, help="seconds before the watchdog stops a run")
    p.add_argument("--site", default=None, help="thresholds of a site: local, reedbush, cluster")
    p.add_argument("--min-throughput-ratio", type=float, default=None,
                   help="throughput needed, as a fraction of the reference solution's")
    p.add_argument("--np", type=int, default=2, help="ranks for multi-node (also run on 1 for scaling)")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.set_defaults(func=_check)

    p = sub.add_parser("bench", help="benchmarks, reported as ratios to a reference in the same run")
    bench_sub = p.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    for name, text in (("multi-gpu", "Task #1: 2 workers vs 1 process"),
                       ("multi-node", "Task #2: 2 ranks vs 1")):
        q = bench_sub.add_parser(name, help=text)
        q.add_argument("--repeats", type=int, default=3)
        q.add_argument("--batchsize", type=int, default=32)
        q.add_argument("--out", default="results/bench", help="folder for the JSON results")
        q.set_defaults(func=_bench)
    q = bench_sub.add_parser("report", help="one page (summary.md) with every result's table and plot")
    q.add_argument("--out", default="results/bench", help="folder of the JSON results")
    q.set_defaults(func=_bench)
    for name, module, text in (
            ("allreduce", "allreduce_bench", "allreduce bus bandwidth: ChainerMN path vs raw MPI vs point-to-point"),
            ("tuning", "tuning", "the seed's speed-up levers, each switched on in turn"),
            ("large-batch", "large_batch", "accuracy vs total batch: fixed lr, linear scaling, warmup")):
        q = bench_sub.add_parser(name, help=text)
        _plug(q, module)

    p = sub.add_parser("profile", help="profiles: summarize nvprof / Nsight Systems files, CPU phase breakdown")
    prof_sub = p.add_subparsers(dest="profile_command", metavar="ACTION", required=True)
    q = prof_sub.add_parser("summarize", help="per device: busy fraction, top kernels, memcpy, NCCL share, "
                            "gaps, NVTX; --plot draws the timeline")
    _plug(q, "profiling")
    q = prof_sub.add_parser("breakdown", help="CPU: TimerHook table and compute / allreduce / update per "
                            "iteration on local MPI ranks")
    _plug(q, "breakdown")

    p = sub.add_parser("jobscript", help="lint a PBS job script for a site, or run it locally")
    job_sub = p.add_subparsers(dest="jobscript_command", metavar="ACTION", required=True)
    q = job_sub.add_parser("lint", help="refuse placeholders, impossible requests, missing mpiexec options")
    q.add_argument("file", nargs="+")
    q.add_argument("--site", default=None,
                   help="reedbush, miyabi, abci or cloud (default: the script's '# handson-site:' line, "
                        "its path jobscripts/<site>/, else reedbush)")
    q.add_argument("--template", action="store_true",
                   help="site templates: a group placeholder left in is a warning, not an error")
    q.set_defaults(func=_jobscript)
    q = job_sub.add_parser("run", help="run a job script here with the #PBS environment (no scheduler)")
    q.add_argument("file")
    q.add_argument("--site", default=None,
                   help="reedbush, miyabi, abci or cloud (default: the script's '# handson-site:' line, "
                        "its path jobscripts/<site>/, else reedbush)")
    q.add_argument("--timeout", type=float, default=None, help="seconds (default: the script's walltime)")
    q.set_defaults(func=_jobscript)

    p = sub.add_parser("cluster", help="a real single-machine Slurm cluster with PBS commands (root, apt)")
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--nodes", type=int, default=2, help="number of slurmd nodes (up)")
    p.set_defaults(func=_cluster)

    p = sub.add_parser("course", help="nbgrader course: assemble source/<assignment>/ from solutions/; "
                       "synthetic-class writes submissions with known scores to try the grading")
    p.add_argument("action", choices=["assemble", "synthetic-class"])
    p.add_argument("assignments", nargs="*", help="assignments (default: all; synthetic-class: setup or task2)")
    p.add_argument("--course", default=str(__import__("handson_lib").COURSE_ROOT / "course"))
    p.set_defaults(func=_course)

    p = sub.add_parser("autograde", help="autograde every submission of an assignment, in parallel")
    p.add_argument("assignment")
    p.add_argument("--jobs", type=int, default=None, help="students graded at once (default: cores)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per student before the watchdog")
    p.add_argument("--cell-timeout", type=float, default=None,
                   help="seconds per cell (default: course/nbgrader_config.py's Execute.timeout)")
    p.add_argument("--site", default=None, help="throughput thresholds and bands: local, reedbush, cluster "
                   "(default: HANDSON_SITE, else local)")
    p.add_argument("--run-timeout", type=float, default=300,
                   help="seconds one training run may take before the watchdog kills it (deadlocks)")
    p.add_argument("--course", default=str(__import__("handson_lib").COURSE_ROOT / "course"))
    p.set_defaults(func=_course)

    p = sub.add_parser("lab", help="start JupyterLab on the course")
    p.add_argument("--install-settings", action="store_true",
                   help="only write the lab settings (no news pop-up) into the environment")
    p.add_argument("--port", type=int, default=8888)
    p.add_argument("--ip", default="127.0.0.1")
    p.add_argument("--no-browser", action="store_true")
    p.set_defaults(func=_lab)
    return parser


def main(argv=None):
    args = make_parser().parse_args(argv)
    rc = args.func(args)
    return 0 if rc is None else int(rc)


if __name__ == "__main__":
    sys.exit(main())
