"""The trust boundary in the layout: what runs inside the grading sandbox (the harness, the
runtime the scripts import) imports nothing of what decides (the checks, the autograder), and the
checks import nothing of the autograder but the optional reference measurement."""

import ast

import pytest

from handson_lib.authoring import release
from conftest import ROOT

LIBRARY = ROOT / "handson_lib"
DECIDING = ("handson_lib.checking", "handson_lib.autograder", "handson_lib.authoring")


def imports_of(folder):
    """{file: [handson_lib modules it imports, a `from X import y` as X.y]} for every .py in folder."""
    found = {}
    for path in sorted((LIBRARY / folder).rglob("*.py")):
        names = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names += [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("handson_lib."):
                names.append(node.value)   # `python -m handson_lib.x` and importlib's names count too
        found[path.relative_to(ROOT)] = [n for n in names if n.startswith("handson_lib")]
    return found


def reaching(imports, prefixes):
    return {str(f): [n for n in names if n.startswith(prefixes)] for f, names in imports.items()
            if any(n.startswith(prefixes) for n in names)}


@pytest.mark.parametrize("folder", ["harness", "runtime"])
def test_what_runs_inside_the_sandbox_imports_nothing_that_decides(folder):
    assert reaching(imports_of(folder), DECIDING) == {}


def test_the_checks_import_nothing_of_the_autograder_but_the_optional_reference():
    allowed = release.OPTIONAL_IMPORTS
    found = {f: [n for n in names if n not in allowed]
             for f, names in reaching(imports_of("checking"), DECIDING[1:]).items()}
    assert {f: names for f, names in found.items() if names} == {}


def test_the_old_grading_folder_is_gone():
    assert not (LIBRARY / "grading").exists()


def test_the_student_edition_ships_the_harness_and_the_checks_and_nothing_that_decides_a_grade():
    shipped, _ = release.shipped_modules()
    assert {m for m in shipped if m.startswith(("handson_lib.autograder", "handson_lib.authoring"))} == set()
    for package in ("harness", "checking"):
        modules = {f"handson_lib.{package}.{p.stem}" for p in (LIBRARY / package).glob("*.py") if p.stem != "__init__"}
        assert modules <= shipped, sorted(modules - shipped)
