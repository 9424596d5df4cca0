"""Every instructor notebook (the student notebook with the solution filled in) runs top to bottom."""

import nbformat
import pytest
from nbclient import NotebookClient

from handson_lib.grading import build
from conftest import ROOT

SOURCES = sorted(source for source, kind in build.plan(ROOT).values() if kind == "notebook")
#: Notebooks whose graded cells judge a measured throughput (Tasks #1 and #2).
TIMED = {"01_multi_gpu.ipynb", "02_multi_node.ipynb"}


def local_ranks_only(monkeypatch, tmp_path):
    """Notebook 04 puts its ranks on a shaped local cluster when one is up (tests/test_network.py
    brings one up, maybe while this runs): here the notebooks always take local ranks."""
    monkeypatch.setenv("HANDSON_CLUSTER_DIR", str(tmp_path / "no-cluster"))


@pytest.mark.parametrize("source", [pytest.param(s, marks=pytest.mark.timed) if s.name in TIMED else s
                                    for s in SOURCES], ids=[s.name for s in SOURCES])
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
    assert graded, "an instructor notebook without a graded cell"


@pytest.mark.parametrize("source", SOURCES, ids=[s.name for s in SOURCES])
def test_student_release_fails_its_graded_cells(source, tmp_path, monkeypatch):
    """The released stubs must not pass the tests by accident."""
    local_ranks_only(monkeypatch, tmp_path)
    rel = next(rel for rel, (src, _) in build.plan(ROOT).items() if src == source)
    nb = nbformat.read(str(ROOT / rel), as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str((ROOT / rel).parent)}})
    client.execute()
    failed = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
              if c.metadata.get("nbgrader", {}).get("grade")
              and any(o.output_type == "error" for o in c.get("outputs", []))]
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert len(failed) == len(graded), f"graded cells passing with the stub: {set(c.metadata['nbgrader']['grade_id'] for c in graded) - set(failed)}"


#: Japanese notebooks executed here (the rest are built and checked like these, tests/test_translations.py).
JAPANESE = ["00_setup.ipynb", "03_profiling.ipynb"]


@pytest.mark.parametrize("name", JAPANESE)
def test_japanese_solution_notebook_executes_on_cpu(name, tmp_path, monkeypatch):
    from handson_lib.grading import translations
    local_ranks_only(monkeypatch, tmp_path)
    monkeypatch.setenv("HANDSON_LANG", "ja")
    source = ROOT / "solutions" / name
    nb = translations.translated_notebook(source, "ja", ROOT)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(source.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.output_type == "error"]
    assert not errors
    assert any(c.metadata.get("nbgrader", {}).get("grade") for c in nb.cells)


@pytest.mark.parametrize("name", JAPANESE[:1])
def test_japanese_student_release_fails_its_graded_cells(name, tmp_path, monkeypatch):
    local_ranks_only(monkeypatch, tmp_path)
    monkeypatch.setenv("HANDSON_LANG", "ja")
    path = ROOT / "notebooks" / "ja" / name
    nb = nbformat.read(str(path), as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    failed = [c for c in graded if any(o.output_type == "error" for o in c.get("outputs", []))]
    assert graded and len(failed) == len(graded)


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
    """Cheap and early (the full runs of notebooks 01 and 02 are in the timed pass): a name of
    handson_lib that a notebook reads, and that the library lost, fails here."""
    missing = []
    for number, dotted in _course_names_used(source):
        try:
            _resolve(dotted)
        except (ImportError, AttributeError) as exc:
            missing.append(f"cell {number}: {dotted} ({exc})")
    assert not missing, missing
