"""`handson build` (its command: handson_lib.authoring.build_command): generate the student copies
from the single source in solutions/.

solutions/*.ipynb          -> notebooks/*.ipynb   (nbgrader's own release preprocessors)
solutions/**/*.py, *.sh    -> exercises/...        (the same nbgrader marker logic, one file = one cell)
solutions/figures/*        -> notebooks/figures/*  (the notebooks' images, copied as they are)
solutions/** other files   -> exercises/...        (copied as they are)
solutions/i18n/<lang>/     -> notebooks/<lang>/, exercises/<lang>/: the same files in another
                              language (handson_lib.authoring.translations; its README.md, the
                              glossary, to notebooks/<lang>/README.md; its figures/, the teaching
                              figures drawn in that language, to notebooks/<lang>/figures/)
site table + templates     -> jobscripts/<site>/*, jobscripts/README.md, solutions/run_*.sh
                              (handson_lib.sites.generate; written first: exercises/ derive from them)
settings' declarations     -> README.md's table of environment variables (handson_lib.settings)
teaching figure functions  -> solutions/figures/*.svg, solutions/i18n/<lang>/figures/*.svg
                              (handson_lib.authoring.teaching_figures; written before the copies)

The stub is `# PUT YOUR CODE HERE`, a comment in both Python and bash. `check_tree` is the
test's oracle: it rebuilds into a temporary folder and reports stale copies, leaked solution
lines, leftover markers and files that do not parse.
"""

import ast
import filecmp
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from handson_lib import COURSE_ROOT, settings
from handson_lib.authoring import i18n_check, recording, teaching_figures, translations
from handson_lib.sites import generate as jobscripts

STUB = "# PUT YOUR CODE HERE"
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
SCRIPT_SUFFIXES = (".py", ".sh")
#: Lines this short or this generic may legitimately appear in student copies.
GENERIC_LINES = {"pass", "else:", "try:", "finally:", "return", "break", "continue", "fi", "done",
                 "}", ")", "]", "return None"}
SKIP_NAMES = {"__pycache__", ".ipynb_checkpoints", ".DS_Store"}
#: Folder of solutions/ whose files the notebooks show (`![...](figures/x.svg)`): they go next to them.
NOTEBOOK_ASSETS = "figures"


def _preprocessors():
    """nbgrader generate_assignment's pipeline, less the database and header steps."""
    from nbgrader.preprocessors import (CheckCellMetadata, ClearHiddenTests, ClearMarkScheme,
                                        ClearOutput, ClearSolutions, ComputeChecksums, LockCells)
    stub = {"python": STUB, "bash": STUB}
    return [
        LockCells(),
        ClearSolutions(code_stub=stub),
        ClearOutput(),
        CheckCellMetadata(),
        ComputeChecksums(),
        ClearHiddenTests(),
        ClearMarkScheme(),
        ComputeChecksums(),
        CheckCellMetadata(),
    ]


def release_notebook(source: Path, nb=None) -> str:
    """The student version of an instructor notebook (`nb`, else read from `source`), as nbformat
    JSON text."""
    import nbformat
    nb = nb if nb is not None else nbformat.read(str(source), as_version=4)
    resources = {}
    for pp in _preprocessors():
        nb, resources = pp.preprocess(nb, resources)
    nb.metadata.pop("celltoolbar", None)
    return nbformat.writes(nb) + "\n"


def release_script(text: str) -> str:
    """Clear solution and hidden-test regions of a .py/.sh file (one file treated as one cell)."""
    from nbformat.v4 import new_code_cell
    from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions
    cell = new_code_cell(text)
    clear = ClearSolutions(code_stub={"python": STUB}, enforce_metadata=False)
    cell, _ = clear.preprocess_cell(cell, {"language": "python"}, 0)
    ClearHiddenTests(enforce_metadata=False)._remove_hidden_test_region(cell)
    return cell.source


def _source_files(src: Path):
    """The files of solutions/ that student files are made from (not the recorded outputs'
    records: the notebooks' ref cells are rendered from them)."""
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_file() and not (SKIP_NAMES & set(rel.parts)) and rel.parts[0] != recording.RECORDED:
            yield path


def plan(root: Path = COURSE_ROOT):
    """Map every student file to (source file, kind); kind "notebook:ja" is a notebook in Japanese."""
    src = root / "solutions"
    targets = {}
    for path in _source_files(src):
        rel = path.relative_to(src)
        if rel.parts[0] == translations.CATALOGUES:
            if rel.name == "README.md" and len(rel.parts) == 3:  # solutions/i18n/<lang>/README.md
                targets[Path("notebooks") / rel.parts[1] / rel.name] = (path, "copy")
            elif len(rel.parts) == 4 and rel.parts[2] == NOTEBOOK_ASSETS:  # a figure in that language
                targets[Path("notebooks") / rel.parts[1] / NOTEBOOK_ASSETS / rel.name] = (path, "copy")
            continue
        if path.suffix == ".ipynb":
            targets[Path("notebooks") / rel] = (path, "notebook")
        elif rel.parts[0] == NOTEBOOK_ASSETS:
            targets[Path("notebooks") / rel] = (path, "copy")
        elif path.suffix in SCRIPT_SUFFIXES:
            targets[Path("exercises") / rel] = (path, "script")
        else:
            targets[Path("exercises") / rel] = (path, "copy")
    for lang in translations.LANGUAGES:
        for rel, (path, kind) in list(targets.items()):
            if rel.parts[1] in translations.LANGUAGES:
                continue
            translated = Path(rel.parts[0], lang, *rel.parts[1:])
            if translated in targets:   # drawn in that language (solutions/i18n/<lang>/figures/)
                continue
            targets[translated] = (path, f"{kind}:{lang}" if kind in ("notebook", "script") else kind)
    return targets


def render(source: Path, kind: str, root: Path = COURSE_ROOT) -> bytes:
    kind, _, lang = kind.partition(":")
    if kind == "notebook":
        nb = translations.translated_notebook(source, lang, root) if lang else None
        return release_notebook(source, nb).encode()
    if kind == "script":
        text = translations.translated_script(source, lang, root) if lang else source.read_text()
        return release_script(text).encode()
    return source.read_bytes()


def build_into(out: Path, root: Path = COURSE_ROOT):
    """Write every student file under `out` (notebooks/ and exercises/); return the relative paths."""
    written = []
    for rel, (source, kind) in plan(root).items():
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        data = render(source, kind, root)
        if not dest.exists() or dest.read_bytes() != data:
            dest.write_bytes(data)
        shutil.copymode(source, dest)
        written.append(rel)
    return written


def _generated_dirs():
    return ("notebooks", "exercises")


#: Where README.md's table of variables starts and ends (the lines between are generated).
SETTINGS_TABLE = ("<!-- generated from handson_lib/settings.py by `handson build` -->",
                  "<!-- end of the generated table -->")


def readme_with_settings_table(text):
    """README text with the table of variables rewritten from the settings' declarations."""
    start, end = SETTINGS_TABLE
    if start not in text or end not in text:
        return text
    head, rest = text.split(start, 1)
    return head + start + "\n" + "\n".join(settings.table_rows()) + "\n" + end + rest.split(end, 1)[1]


def _write_settings_table(root):
    readme = root / "README.md"
    if readme.exists():
        text = readme.read_text()
        fresh = readme_with_settings_table(text)
        if fresh != text:
            readme.write_text(fresh)


def build(root: Path = COURSE_ROOT):
    """Regenerate the job scripts and the teaching figures, then notebooks/ and exercises/ in
    place; remove student files whose source is gone."""
    jobscripts.write(root)
    teaching_figures.write(root)
    _write_settings_table(root)
    expected = set(build_into(root, root))
    removed = []
    for top in _generated_dirs():
        for path in sorted((root / top).rglob("*")):
            rel = path.relative_to(root)
            if path.is_file() and rel not in expected and not (SKIP_NAMES & set(rel.parts)):
                path.unlink()
                removed.append(rel)
    return sorted(expected), removed


# ----------------------------------------------------------------------------- checks

@dataclass
class Problem:
    path: str
    what: str

    def __str__(self):
        return f"{self.path}: {self.what}"


@dataclass
class Report:
    problems: list = field(default_factory=list)

    @property
    def ok(self):
        return not self.problems


def _regions(text: str):
    """Lines inside solution / hidden-test regions, and lines outside them."""
    inside, outside, state = [], [], None
    for line in text.split("\n"):
        if "BEGIN SOLUTION" in line or "BEGIN HIDDEN TESTS" in line:
            state = "in"
        elif "END SOLUTION" in line or "END HIDDEN TESTS" in line:
            state = None
        elif state:
            inside.append(line)
        else:
            outside.append(line)
    return inside, outside


def texts_of(path: Path):
    """The text pieces a person or a kernel would see in a file (cell sources for notebooks)."""
    if path.suffix == ".ipynb":
        nb = json.loads(path.read_text())
        return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                for c in nb.get("cells", [])]
    try:
        return [path.read_text()]
    except UnicodeDecodeError:
        return []


#: A job-script exercise's queue line is no secret: its instruction names the queue ("the debug-g
#: queue"), and every ready-made script of the site asks for the same queue.
QUEUE_LINE = "#PBS -q "


def significant(line: str) -> str:
    s = line.strip()
    if (len(s) < 6 or s in GENERIC_LINES or s.startswith("#") and not s.startswith("#PBS")
            or s.startswith(QUEUE_LINE)):
        return ""
    return s


def secret_lines(root: Path = COURSE_ROOT):
    """Solution / hidden-test lines that must never reach a student file.

    A line that also appears outside every region of the source is public and not counted."""
    secret, public = {}, set()
    for source in _source_files(root / "solutions"):
        for text, whole_cell_is_solution in _source_pieces(source):
            inside, outside = _regions(text)
            if whole_cell_is_solution and not inside:
                inside, outside = outside, []
            public.update(s for s in map(significant, outside) if s)
            for line in inside:
                s = significant(line)
                if s:
                    secret.setdefault(s, source.relative_to(root).as_posix())
    return {s: where for s, where in secret.items() if s not in public}


def _source_pieces(path: Path):
    """(text, whole_cell_is_solution) for each cell of a notebook, or the whole script."""
    if path.suffix != ".ipynb":
        return [(t, False) for t in texts_of(path)]
    nb = json.loads(path.read_text())
    return [("".join(c["source"]) if isinstance(c["source"], list) else c["source"],
             bool(c.get("metadata", {}).get("nbgrader", {}).get("solution")))
            for c in nb.get("cells", [])]


def _ipython_to_python(cell_source: str) -> str:
    from IPython.core.inputtransformer2 import TransformerManager
    return TransformerManager().transform_cell(cell_source)


def parse_problem(path: Path):
    """Why `path` does not parse, or None."""
    try:
        if path.suffix == ".py":
            ast.parse(path.read_text(), filename=str(path))
        elif path.suffix == ".sh":
            res = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
            if res.returncode:
                return res.stderr.strip()
        elif path.suffix == ".ipynb":
            import nbformat
            nb = nbformat.read(str(path), as_version=4)
            nbformat.validate(nb)
            for i, cell in enumerate(nb.cells):
                if cell.cell_type == "code":
                    try:
                        ast.parse(_ipython_to_python(cell.source))
                    except SyntaxError as err:
                        return f"code cell {i}: {err}"
    except SyntaxError as err:
        return f"line {err.lineno}: {err.msg}"
    except Exception as err:  # nbformat validation and friends
        return f"{type(err).__name__}: {err}"
    return None


def student_files(root: Path = COURSE_ROOT):
    for top in _generated_dirs():
        base = root / top
        if base.exists():
            for path in sorted(base.rglob("*")):
                if path.is_file() and not (SKIP_NAMES & set(path.relative_to(root).parts)):
                    yield path


def check_leaks(root: Path = COURSE_ROOT, report: Report = None):
    """Markers, solution lines and hidden tests in student files; files that do not parse."""
    report = report or Report()
    secrets = secret_lines(root)
    for path in student_files(root):
        rel = path.relative_to(root).as_posix()
        for text in texts_of(path):
            for number, line in enumerate(text.split("\n"), 1):
                marker = next((m for m in MARKERS if m in line), None)
                if marker:
                    report.problems.append(Problem(rel, f"marker '{marker}' left in: {line.strip()!r}"))
                s = significant(line)
                if s in secrets:
                    report.problems.append(
                        Problem(rel, f"solution/hidden-test line from {secrets[s]} leaked: {s!r}"))
        why = parse_problem(path)
        if why:
            report.problems.append(Problem(rel, f"does not parse: {why}"))
    return report


def check_tree(root: Path = COURSE_ROOT) -> Report:
    """Rebuild into a temporary folder and compare with the committed student copies."""
    report = Report()
    with tempfile.TemporaryDirectory(prefix="handson-build-") as tmp:
        fresh = Path(tmp)
        expected = set(build_into(fresh, root))
        for rel in sorted(expected):
            committed = root / rel
            if not committed.exists():
                report.problems.append(Problem(rel.as_posix(), "missing: run `handson build`"))
            elif not filecmp.cmp(committed, fresh / rel, shallow=False):
                report.problems.append(Problem(rel.as_posix(), "differs from a rebuild of solutions/: "
                                               "run `handson build` (never edit student copies by hand)"))
        for path in student_files(root):
            rel = path.relative_to(root)
            if rel not in expected:
                report.problems.append(Problem(rel.as_posix(), "has no source in solutions/"))
    for rel, why in [*jobscripts.stale(root), *teaching_figures.stale(root)]:
        report.problems.append(Problem(rel.as_posix(), why))
    readme = root / "README.md"
    if readme.exists() and readme_with_settings_table(readme.read_text()) != readme.read_text():
        report.problems.append(Problem("README.md", "its table of variables differs from "
                                       "handson_lib/settings.py: run `handson build`"))
    for where, why in recording.problems(root):
        report.problems.append(Problem(where, why))
    for problem in i18n_check.problems(root):
        path, _, what = problem.partition(": ")
        where = path if path.startswith("handson_lib/") else f"solutions/{path}"
        report.problems.append(Problem(where, what))
    check_leaks(root, report)
    return report
