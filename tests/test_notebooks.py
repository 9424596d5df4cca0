"""Every instructor notebook (the student notebook with the solution filled in) runs top to bottom.

Each solution notebook runs at most twice in a whole test run: here or as the correct student of a
synthetic class (GRADED_AS_A_CLASS: the autograder runs the instructor's notebook with its hidden
tests), and once in the student edition (tests/test_release.py). The released stubs are judged
without a kernel (tests/test_questions.py), and the Japanese notebooks by their code, which is the
English code but for its words (below).
"""

import ast
import string

import nbformat
import pytest
from nbclient import NotebookClient

from handson_lib import tasks
from handson_lib.authoring import build
from handson_lib.autograder import nbgrader_course, synthetic_class
from conftest import READING_ONLY, ROOT

SOURCES = sorted(source for source, kind in build.plan(ROOT).values() if kind == "notebook")
#: Notebooks run as the `correct` student of a synthetic class (tests/test_autograde.py).
GRADED_AS_A_CLASS = {tasks.assignment(name).notebook: name for name in synthetic_class.CLASSES}
#: Notebook 04 runs on the shaped local cluster in the system tier (tests/test_network.py).
ON_THE_CLUSTER = {"04_scaling.ipynb"}


def local_ranks_only(monkeypatch, tmp_path):
    """Notebook 04 puts its ranks on a shaped local cluster when one is up (tests/test_network.py
    brings one up, maybe while this runs): here the notebooks always take local ranks."""
    monkeypatch.setenv("HANDSON_CLUSTER_DIR", str(tmp_path / "no-cluster"))


def test_every_solution_notebook_is_run_once_by_the_tests():
    assert {n: nbgrader_course.ASSIGNMENTS[a][0] for n, a in GRADED_AS_A_CLASS.items()} == \
        {n: n for n in GRADED_AS_A_CLASS}
    executed_here = {s.name for s in SOURCES} - set(GRADED_AS_A_CLASS)
    assert executed_here and {a.notebook for a in tasks.ASSIGNMENTS} - set(GRADED_AS_A_CLASS) <= executed_here


@pytest.mark.slow
@pytest.mark.parametrize("source", [
    pytest.param(s, marks=pytest.mark.replaced_in_system_tier("runs on the shaped cluster in tests/test_network.py"))
    if s.name in ON_THE_CLUSTER else s for s in SOURCES if s.name not in GRADED_AS_A_CLASS],
    ids=[s.name for s in SOURCES if s.name not in GRADED_AS_A_CLASS])
def test_solution_notebook_executes_on_cpu(source, tmp_path, monkeypatch):
    local_ranks_only(monkeypatch, tmp_path)
    nb = nbformat.read(str(source), as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(source.parent)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.output_type == "error"]
    assert not errors
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert bool(graded) == (source.name not in READING_ONLY), "graded cells where none belong, or none where they do"


def _shape(source):
    """A code cell with its words left out: the AST with every string constant blanked (an
    f-string keeps only its expressions: a translation may move them among its words), and the
    placeholders of every other string, in order (a `.format` template must keep them). Cells
    that do not parse (a magic) compare without their comments."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "\n".join(line.split("#")[0].rstrip() for line in source.splitlines() if line.strip()), []
    in_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
                   for inner in node.values for part in ast.walk(inner)}
    placeholders = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in in_fstrings:
                text = node.value.replace("{{", "").replace("}}", "")
                placeholders.append(sorted(f for _, f, _, _ in string.Formatter().parse(text) if f))
            node.value = ""
        elif isinstance(node, ast.JoinedStr):
            node.values = [v for v in node.values if isinstance(v, ast.FormattedValue)]
    return ast.dump(tree), placeholders


@pytest.mark.parametrize("folder", ["notebooks", "solutions"])
@pytest.mark.parametrize("source", SOURCES, ids=[s.name for s in SOURCES])
def test_japanese_code_is_the_english_code_but_for_its_words(source, folder):
    """The Japanese notebook runs what the English one runs: translation changes comments and the
    words of strings, never the code nor a string's placeholders. (The English notebook is run;
    the Japanese messages of the library are tested in tests/test_messages.py.)"""
    from handson_lib.authoring import translations
    if folder == "notebooks":
        english = nbformat.read(str(ROOT / "notebooks" / source.name), as_version=4)
        japanese = nbformat.read(str(ROOT / "notebooks" / "ja" / source.name), as_version=4)
    else:
        english = nbformat.read(str(source), as_version=4)
        japanese = translations.translated_notebook(source, "ja", ROOT)
    pairs = [(e.source, j.source) for e, j in zip(english.cells, japanese.cells) if e.cell_type == "code"]
    assert [c.cell_type for c in english.cells] == [c.cell_type for c in japanese.cells]
    assert pairs
    differ = [i for i, (e, j) in enumerate(pairs) if _shape(e) != _shape(j)]
    assert not differ, [(pairs[i][0][:200], pairs[i][1][:200]) for i in differ]
    assert any(e != j for e, j in pairs), "no code cell is translated at all"


def _course_names_used(source):
    """(cell number, dotted name) for every handson_lib name the notebook's code reaches:
    `from handson_lib.x import y` then `y.attr.attr`, and `import handson_lib.x as y`."""
    import ast
    nb = nbformat.read(str(source), as_version=4)
    used = []
    for number, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue   # a student's unfinished cell: executed by the tests above
        bound = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("handson_lib"):
                for alias in node.names:
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("handson_lib") and alias.asname:
                        bound[alias.asname] = alias.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                chain, inner = [node.attr], node.value
                while isinstance(inner, ast.Attribute):
                    chain.insert(0, inner.attr)
                    inner = inner.value
                if isinstance(inner, ast.Name) and inner.id in bound:
                    used.append((number, ".".join([bound[inner.id], *chain])))
        used += [(number, name) for name in bound.values()]
    return used


def _resolve(dotted):
    import importlib
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(dotted)


@pytest.mark.parametrize("source", SOURCES, ids=[s.name for s in SOURCES])
def test_every_course_name_a_notebook_uses_exists(source):
    """Cheap and early (the notebooks run in the slow and timed tiers): a name of handson_lib that
    a notebook reads, and that the library lost, fails here."""
    missing = []
    for number, dotted in _course_names_used(source):
        try:
            _resolve(dotted)
        except (ImportError, AttributeError) as exc:
            missing.append(f"cell {number}: {dotted} ({exc})")
    assert not missing, missing


def test_every_notebook_is_on_the_course_map_and_in_the_schedules():
    """00's course map (both languages) lists every notebook; the course README's full-day schedule
    has them all and the half-day one the ending too (07, which closes either session)."""
    from handson_lib.authoring import translations
    names = [s.stem for s in SOURCES]
    course_map = next(c.source for c in nbformat.read(str(ROOT / "solutions" / "00_setup.ipynb"), as_version=4).cells
                      if c.get("id") == "cell-01")
    ja_map = translations.translated_notebook(ROOT / "solutions" / "00_setup.ipynb", "ja", ROOT)
    ja_map = next(c.source for c in ja_map.cells if c.get("id") == "cell-01")
    for text in (course_map, ja_map):
        assert all(f"`{name}`" in text for name in names), [n for n in names if f"`{n}`" not in text]
    readme = (ROOT / "course" / "README.md").read_text()
    half = readme[readme.index("**Half day"):readme.index("**Full day")]
    full = readme[readme.index("**Full day"):readme.index("Troubleshooting (a hang")]
    assert all(f"`{name}`" in full or f"`{name[:2]}`" in full for name in names)
    assert "`07_ending`" in half and "`07_ending`" in full
