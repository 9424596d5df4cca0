"""The script handed in, before any run: where it is (`locate`), the grader's seed for its runs,
its review as handed in (checking.source_review) and the parts not written yet (`still_unset`:
a skeleton fails at once, nothing run).
"""

import ast
import os
import secrets
from pathlib import Path

from handson_lib import COURSE_ROOT, settings
from handson_lib.checking import source_review
from handson_lib.verdicts.report import Report
from handson_lib.messages import tr


#: The file of a grading session's seed, in its reference cache (the grader's alone: no submission sees it).
SESSION_SEED = "session-seed"


def grader_seed():
    """The data's seed of a run the grader starts (synthetic data: its classes; every set: the split,
    the order and the first weights): under the autograder the grading session's own, drawn once and
    kept in its reference cache, so that every student is set beside one replay of the training
    (checking.replay); elsewhere drawn for each run. Never one a script can know before its run."""
    cache = settings.current().grader.reference_cache
    if not cache or not os.access(cache, os.W_OK):
        return _drawn_seed()
    return session_seed(cache)


def session_seed(cache):
    """The grading session's seed, kept in its reference cache `cache` (drawn by the first who asks)."""
    import fcntl
    path = Path(cache) / SESSION_SEED
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return int(path.read_text())
        except (OSError, ValueError):
            seed = _drawn_seed()
            path.write_text(str(seed))
            return seed


def _drawn_seed():
    return 1 + secrets.randbelow(2 ** 31 - 2)


def beside_the_script(script):
    """The modules `script` imports that lie beside it in its folder: not part of what is graded
    (only the assignment's files are: the grader runs the script alone), [] when it imports none or
    cannot be read."""
    script = Path(script)
    try:
        tree = ast.parse(script.read_bytes()[:source_review.LARGEST_SCRIPT])
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:   # from X import a, from .X import a
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom):                    # from . import a
            names |= {alias.name for alias in node.names}
    folder = script.parent
    return sorted(n for n in names if n != script.stem and
                  ((folder / f"{n}.py").is_file() or (folder / n / "__init__.py").is_file()))


def _beside_report(task, script, modules, names, against):
    """The report of a script that imports modules of its folder: every check failed, no run."""
    report = Report(task, str(script), observed={}, reference={}, output_tail="", against=against)
    report.add(names[0], False, tr("{script} imports {modules}, which lie(s) beside it: only the assignment's files "
                                   "are graded, and the grader runs {script} alone. Put that code into the script "
                                   "itself", script=Path(script).name, modules=", ".join(modules)))
    for name in names[1:]:
        report.add(name, False, tr("not checked: the script is not complete"))
    return report


def refused_before_running(task, script, names, against, unset_first=False):
    """The report of a script the checks refuse before any run (a part not written yet; a module
    beside it that it imports), or None."""
    unset = still_unset(script) if unset_first else []
    if unset:
        return _unfinished_report(task, script, unset, names, against)
    modules = beside_the_script(script)
    return _beside_report(task, script, modules, names, against) if modules else None


def locate(script_name):
    """Where a task script is: next to the notebook, else in ../exercises (student release).

    Under the autograder only the file handed in next to the notebook counts: HANDSON_GRADING is
    the submission's folder (the grader sets it per student, so that a cell changing
    the working directory cannot point the checks at other scripts), or 1 for the folder the
    kernel works in (nbgrader's own CLI)."""
    grading = settings.current().grader.submission
    if grading == settings.KERNEL_FOLDER:
        candidates = [Path.cwd() / script_name]
    elif grading:
        candidates = [Path(grading) / script_name]
    else:
        candidates = [Path.cwd() / script_name, Path.cwd().parent / "exercises" / script_name,
                      COURSE_ROOT / "exercises" / script_name]
    for candidate in candidates:
        if candidate.exists():
            return candidate
    if len(candidates) == 1:
        raise FileNotFoundError(tr("{script} was not handed in: submit it in the same folder as the "
                                   "notebook ({folder}/{script})", script=script_name, folder=candidates[0].parent.name))
    raise FileNotFoundError(tr("{script} not found next to this notebook nor in ../exercises",
                               script=script_name))


def _review(script):
    """The review of the script as handed in (checking.source_review), [] when it cannot be read."""
    try:
        with open(script, "rb") as f:
            return source_review.review(f.read(source_review.LARGEST_SCRIPT).decode(errors="replace"))
    except OSError:
        return []


#: Calls in a script that set names a reading cannot follow: the precheck then leaves it to the run.
_DYNAMIC_NAMES = {"exec", "eval", "globals", "locals", "vars", "setattr", "__dict__"}


def _bound_names(tree):
    """Every name `tree` binds to something other than a bare None (the skeleton's `x = None`)."""
    bound = set()

    def targets(node):
        if isinstance(node, ast.Name):
            bound.add(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                targets(element)
        elif isinstance(node, ast.Starred):
            targets(node.value)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                for target in node.targets:
                    targets(target)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets(node.target)
        elif isinstance(node, (ast.NamedExpr, ast.For, ast.AsyncFor, ast.comprehension)):
            targets(node.target)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets(node.optional_vars)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)   # set elsewhere: not for this reading to follow
    return bound


def still_unset(script):
    """The names a script hands to runtime.require_done(...) that nothing in it ever sets but to
    None: the `# PUT YOUR CODE HERE` parts not written yet, found before any run. [] where the
    reading cannot tell (no such call, a syntax error, names set by exec/globals/setattr): the run
    then says what is wrong."""
    try:
        with open(script, "rb") as f:
            tree = ast.parse(f.read(source_review.LARGEST_SCRIPT))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    if used & _DYNAMIC_NAMES:
        return []
    bound = _bound_names(tree)
    unset = []
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if isinstance(node, ast.Call) and getattr(func, "attr", getattr(func, "id", None)) == "require_done":
            unset += [kw.value.id for kw in node.keywords
                      if isinstance(kw.value, ast.Name) and kw.value.id not in bound and kw.value.id not in unset]
    return unset


def _unfinished_report(task, script, unset, names, against):
    """The report of a script whose parts `unset` (still_unset) are not written yet: every check
    failed at once, no run started."""
    from handson_lib.runtime.training import not_complete   # the words the run itself would stop with
    why = not_complete("Task #1" if task == "multi-gpu" else "Task #2", unset)
    report = Report(task, str(script), observed={}, reference={}, output_tail="", against=against)
    report.add(names[0], False, tr("not implemented yet: {what}", what=why) + " "
               + tr("(found by reading the script: nothing was run)"))
    for name in names[1:]:
        report.add(name, False, tr("not checked: the script is not complete"))
    return report
