"""`handson` command line: one registry of sub-commands.

Each command names the module that implements it; the module gives `add_arguments(parser)` and
`main(args)` (or the functions the entry names). A command whose module is not installed is left
out: the student edition ships only the student's modules, so it has no instructor commands.
"""

import argparse
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from handson_lib import settings


@dataclass(frozen=True)
class Command:
    words: str                 # "bench allreduce": the words typed after `handson`
    module: str                # the implementing module under handson_lib
    help: str
    audience: str = "student"  # "student" commands ship in the student edition
    add: str = "add_arguments"
    run: str = "main"

    @property
    def module_name(self):
        return f"handson_lib.{self.module}"


#: Help of the words that group several commands.
GROUPS = {
    "data": "datasets",
    "bench": "benchmarks, reported as ratios to a reference in the same run",
    "profile": "profiles: summarize nvprof / Nsight Systems files, CPU phase breakdown",
    "jobscript": "lint a PBS job script for a site, or run it locally",
    "release": "editions of the course to hand out",
    "i18n": "the course in other languages: translation catalogues",
}

COMMANDS = (
    Command("doctor", "tools.doctor", "check the environment and say what each missing part disables"),
    Command("lab", "tools.lab", "start JupyterLab on the course"),
    Command("check", "checking.command", "run a task script under the grader and say what is still wrong"),
    Command("data prepare", "data", "build the cifar10_<size>px_<pct>p.pickle.gz file from the official "
            "cifar-10-python.tar.gz (run on the login node)", add="add_prepare_arguments", run="prepare_main"),
    Command("jobscript lint", "sites.jobscript", "refuse placeholders, impossible requests, missing mpiexec "
            "options", add="add_lint_arguments", run="lint_command"),
    Command("jobscript run", "sites.jobscript", "run a job script here with the #PBS environment (no "
            "scheduler)", add="add_run_arguments", run="run_command"),
    Command("profile summarize", "profiling", "per device: busy fraction, top kernels, memcpy, NCCL share, "
            "gaps, NVTX; --plot draws the timeline"),
    Command("profile breakdown", "experiments.breakdown.command", "CPU: TimerHook table and compute / allreduce / "
            "update per iteration on local MPI ranks"),
    Command("bench allreduce", "autograder.answers", "allreduce bus bandwidth: ChainerMN path vs raw MPI "
            "vs point-to-point", audience="instructor", add="add_allreduce_arguments", run="bench_allreduce"),
    Command("bench tuning", "experiments.tuning.command", "the seed's speed-up levers, each switched on in turn"),
    Command("bench large-batch", "autograder.answers", "accuracy vs total batch: fixed lr, linear "
            "scaling, warmup", audience="instructor", add="add_large_batch_arguments", run="bench_large_batch"),
    Command("bench multi-gpu", "experiments.speedup", "Task #1: 2 workers vs 1 process",
            audience="instructor", add="add_multi_gpu_arguments", run="multi_gpu_main"),
    Command("bench multi-node", "experiments.speedup", "Task #2: 2 ranks vs 1",
            audience="instructor", add="add_multi_node_arguments", run="multi_node_main"),
    Command("bench self-check", "experiments.self_check", "the student's self-check of a solved task, several "
            "times in a row (optionally on a loaded machine): its time and the spread of its speed-up",
            audience="instructor"),
    Command("bench report", "experiments.report", "one page (summary.md) with every result's table and plot",
            audience="instructor", add="add_report_arguments", run="report_main"),
    Command("demo", "tools.demo", "run the main job on embedded defaults and print throughput",
            audience="instructor"),
    Command("build", "authoring.build_command", "regenerate notebooks/, exercises/ and jobscripts/ from the sources",
            audience="instructor"),
    Command("i18n template", "authoring.i18n_command", "add the missing entries to the catalogues of "
            "another language (English and hash filled in)", audience="instructor", run="template_main"),
    Command("i18n status", "authoring.i18n_command", "list what is untranslated or stale in another "
            "language (exit 1 if anything)", audience="instructor", run="status_main"),
    Command("release student", "authoring.release_command", "write the student edition (notebooks, exercises, job "
            "scripts, the student library; no solutions) into a new folder", audience="instructor"),
    Command("cluster", "sites.cluster", "a real single-machine Slurm cluster with PBS commands (root, apt)",
            audience="instructor"),
    Command("classroom", "classroom.command", "JupyterHub with local accounts, nbgrader's exchange and "
            "the released assignments, on this machine (root)", audience="instructor"),
    Command("course", "authoring.course_source", "nbgrader course: assemble source/<assignment>/ from "
            "solutions/; synthetic-class writes submissions with known scores to try the grading",
            audience="instructor", add="add_course_arguments", run="course_main"),
    Command("autograde", "autograder.autograde_command", "autograde every submission of an assignment, in "
            "parallel, on this machine or as jobs of the cluster (--on-cluster); --plan projects a class's time",
            audience="instructor"),
)


#: The folder of this library: a command's module must be in it (PYTHONPATH may put a student
#: edition's library first, in front of the installed course's: its modules and the course's never mix).
LIBRARY = Path(__file__).resolve().parent


def installed(command):
    try:
        spec = importlib.util.find_spec(command.module_name)
    except ModuleNotFoundError:  # its package is not installed either (a whole instructor package)
        return False
    return spec is not None and spec.origin is not None and Path(spec.origin).resolve().is_relative_to(LIBRARY)


def _not_here(argv):
    """Why the command `argv` names is not in this library (None: it is, or it names none)."""
    words = " ".join(a for a in argv if not a.startswith("-"))
    for command in COMMANDS:
        if (words + " ").startswith(command.words + " ") and not installed(command):
            return (f"handson {command.words}: not in the library at {LIBRARY.parent} (a student edition "
                    f"has no instructor commands); if PYTHONPATH puts it first (an env.sh sourced), run "
                    f"the command without it: env -u PYTHONPATH handson {command.words} ...")
    return None


def make_parser(commands=COMMANDS):
    parser = argparse.ArgumentParser(prog="handson", description=__doc__.splitlines()[0])
    subparsers = {(): parser.add_subparsers(dest="command", metavar="COMMAND", required=True)}
    for command in commands:
        if not installed(command):
            continue
        *group, last = command.words.split()
        for depth in range(len(group)):
            key = tuple(group[:depth + 1])
            if key not in subparsers:
                word = group[depth]
                p = subparsers[key[:-1]].add_parser(word, help=GROUPS.get(word))
                subparsers[key] = p.add_subparsers(dest=f"{word}_command", metavar="ACTION", required=True)
        p = subparsers[tuple(group)].add_parser(last, help=command.help, description=command.help)
        getattr(importlib.import_module(command.module_name), command.add)(p)
        p.set_defaults(_command=command)
    return parser


def main(argv=None):
    try:   # the settings read once here: a bad value stops every command with its variable named
        settings.current()
    except settings.SettingsError as error:
        print(f"handson: {error}", file=sys.stderr)
        return 2
    not_here = _not_here(sys.argv[1:] if argv is None else argv)
    if not_here:
        print(not_here, file=sys.stderr)
        return 2
    parser = make_parser()
    args, extra = parser.parse_known_args(argv)
    module = importlib.import_module(args._command.module_name)
    # A positional after the command's options (`classroom export --lms moodle FILE`): argparse has
    # given the optional positional its default already; the command may take it (`trailing`).
    if extra and not (hasattr(module, "trailing") and module.trailing(args, extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    rc = getattr(module, args._command.run)(args)
    return 0 if rc is None else int(rc)


if __name__ == "__main__":
    sys.exit(main())
