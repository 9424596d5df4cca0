"""The trust boundary, declared once: which modules a submission's processes may run (the student
edition's library), which run inside every observed run, which decide verdicts, and which are
instructor-only. Everything else derives from here:

  - the student edition's library (handson_lib.authoring.release copies `student_library_files`);
  - the grading sandbox's view of the library (handson_lib.autograder.sandbox mounts exactly
    `student_library_files`, so a kernel or a run reads what a student's copy holds, no more);
  - the layout tests (tests/test_layout.py: what runs inside reaches nothing that decides, nor
    anything instructor-only, through any chain of imports).

Names are module names; "PKG.*" is every module of the package.
"""

from pathlib import Path

from handson_lib import COURSE_ROOT, cli

#: Modules the student files need beyond the student commands' own modules (cli.COMMANDS whose
#: audience is "student"). A package named "PKG.*" ships less its INSTRUCTOR_ONLY modules.
STUDENT_SUPPORT = (
    "handson_lib",
    "handson_lib.cli",                 # the `handson` command (its registry skips unshipped modules)
    "handson_lib.tasks",               # the registry of tasks and assignments (the checks' run arguments)
    "handson_lib.launch.*",            # starting processes and MPI jobs with a watchdog, the timing slot
    "handson_lib.settings",            # the course's settings: every variable it reads, one object
    "handson_lib.plotting",            # matplotlib for the figures, with fonts for every language
    "handson_lib.messages",            # messages in the reader's language (HANDSON_LANG)
    "handson_lib.messages_ja",
    "handson_lib.runtime.*",           # what the training scripts import
    "handson_lib.harness.*",           # what runs inside every observed process (`handson check`'s runs)
    "handson_lib.checking.*",          # the checks, the observed runs and the notebooks' helpers
    "handson_lib.checking.timing.*",   # the scored timing (the self-check times the student's own steps)
    "handson_lib.verdicts.*",          # what decides (the self-check judges the student's own runs with it)
    "handson_lib.exchange",            # nbgrader submissions only the staff can read (classroom)
    "handson_lib.experiments",
    "handson_lib.experiments.figures",  # the notebooks' plots
    "handson_lib.experiments.stats",
    "handson_lib.experiments.allreduce.*",    # notebook 04's measurements
    "handson_lib.experiments.large_batch.*",  # notebook 06's training runs
    "handson_lib.experiments.tuning.*",       # notebook 05's levers (`handson bench tuning`)
    "handson_lib.experiments.breakdown.*",    # notebooks 03 and 04: the phases (`handson profile breakdown`)
    "handson_lib.experiments.rank_metric",  # notebook 02's stretch (run under mpiexec)
    "handson_lib.sites",
    "handson_lib.sites.table",         # the site table: the linter's rules and the grading thresholds
    "handson_lib.sites.jobs",          # qsub from the notebooks; experiments' ranks on the local cluster
    "handson_lib.sites.jobscript_parser",  # the parts of `handson jobscript` (a student command):
    "handson_lib.sites.jobscript_linter",  # reading a script, its rules, its run without a scheduler
    "handson_lib.sites.jobscript_local",
    "handson_lib.tools",
    # the parts of `handson doctor` (its command module, tools.doctor, ships as a student command)
    "handson_lib.tools.doctor_rows",
    "handson_lib.tools.doctor_packages",
    "handson_lib.tools.doctor_mpi",
    "handson_lib.tools.doctor_gpu",
)

#: Instructor-only modules that are no command's own module; they never ship and a submission
#: never reads them. The autograder and the authoring tools go whole: what decides a grade, and
#: what builds the course.
INSTRUCTOR_ONLY = ("handson_lib.autograder.*", "handson_lib.authoring.*",
                   "handson_lib.sites.network",              # the local cluster's namespaces (root)
                   "handson_lib.sites.cluster_config",       # the parts of `handson cluster` (an
                   "handson_lib.sites.cluster_daemons",      # instructor command): its configuration,
                   "handson_lib.sites.cluster_lifecycle",    # daemons, up / down / status, and jobs
                   "handson_lib.sites.cluster_jobs",
                   "handson_lib.checking.reference")         # measures the reference solutions

#: Instructor-only modules that a shipped file may import only after finding them installed
#: (importlib.util.find_spec): the file still works without them. (`handson check`, checking.command,
#: hands the reference solutions to the checks where they are installed; the checks import none.)
OPTIONAL_IMPORTS = {"handson_lib.checking.reference"}

#: What runs inside every process of an observed run (the student's script, the stand-in's
#: workers, the ranks): the runtime the scripts import and the harness the checks start there.
RUNS_INSIDE = ("handson_lib.runtime.*", "handson_lib.harness.*")

#: What decides verdicts, or serves what does (the checks, their observed runs and evidence, the
#: paired timing, the autograder's judge): its results earn points, so nothing that runs inside
#: imports it. (`checking` ships: a student's self-check is the same code, judged on their side.)
DECIDING = ("handson_lib.verdicts.*", "handson_lib.checking.*", "handson_lib.checking.timing.*",
            "handson_lib.autograder.*")

#: Folder names never part of the library's files.
SKIP = {"__pycache__", ".ipynb_checkpoints", ".DS_Store"}
#: Data folders of shipped packages that the edition leaves out: the job-script templates (the
#: edition gets the rendered scripts in jobscripts/; no shipped module reads the templates).
NOT_SHIPPED_DATA = {Path("handson_lib/sites/templates")}


class BoundaryError(Exception):
    """The declaration contradicts itself or the tree (a module both shipped and instructor-only)."""


def module_file(name, root=COURSE_ROOT):
    """The file of module `name` under `root` (a package's __init__.py), or None."""
    path = Path(root).joinpath(*name.split("."))
    if (path / "__init__.py").exists():
        return path / "__init__.py"
    if path.with_suffix(".py").exists():
        return path.with_suffix(".py")
    return None


def expand(name, root=COURSE_ROOT):
    """The module names `name` stands for ("PKG.*": the package and each of its modules)."""
    if not name.endswith(".*"):
        return {name}
    package = name[:-2]
    folder = Path(root).joinpath(*package.split("."))
    return {package} | {f"{package}.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__"}


def expand_all(names, root=COURSE_ROOT):
    return set().union(*(expand(n, root) for n in names))


def shipped_modules(root=COURSE_ROOT, commands=cli.COMMANDS):
    """The handson_lib modules of the student edition (names), and the instructor-only ones."""
    student = {c.module_name for c in commands if c.audience == "student"}
    # A student command implemented by a package (data, profiling) ships with the whole package.
    student = {f"{n}.*" if (module_file(n, root) or Path()).name == "__init__.py" else n for n in student}
    instructor = ({c.module_name for c in commands if c.audience == "instructor"}
                  | expand_all(INSTRUCTOR_ONLY, root))
    # A package shipped whole ("PKG.*") leaves out the instructor-only modules named in it.
    named = {n for n in INSTRUCTOR_ONLY if not n.endswith(".*")}
    shipped = set().union(*(expand(n, root) - (named if n.endswith(".*") else set())
                            for n in (*student, *STUDENT_SUPPORT)))
    both = shipped & instructor
    if both:
        raise BoundaryError(f"modules both shipped and instructor-only: {', '.join(sorted(both))} "
                            "(a student command's module or STUDENT_SUPPORT names an instructor module)")
    missing = sorted(n for n in shipped if module_file(n, root) is None)
    if missing:
        raise BoundaryError(f"shipped modules with no file: {', '.join(missing)}")
    return shipped, instructor


def student_library_files(root=COURSE_ROOT, shipped=None):
    """The files of the student edition's library (relative to `root`): each shipped module, and
    the data files of each shipped package (profiling's sample profiles), less NOT_SHIPPED_DATA."""
    root = Path(root)
    shipped = shipped_modules(root)[0] if shipped is None else shipped
    files = set()
    for name in shipped:
        source = module_file(name, root)
        files.add(source.relative_to(root))
        if source.name != "__init__.py":
            continue
        for data in source.parent.rglob("*"):
            rel = data.relative_to(source.parent)
            if data.is_file() and data.suffix not in (".py", ".pyc") and not SKIP & set(rel.parts) \
                    and not (source.parent / rel.parts[0] / "__init__.py").exists() \
                    and not any(p in NOT_SHIPPED_DATA for p in data.relative_to(root).parents):
                files.add(data.relative_to(root))
    return sorted(files)
