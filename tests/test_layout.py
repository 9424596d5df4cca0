"""The trust boundary in the layout (declared once in handson_lib.boundary): what runs inside the
grading sandbox (the harness, the runtime the scripts import) reaches nothing of what decides (the
checks, the autograder) nor anything instructor-only, through any chain of imports; the checks
import nothing of the autograder; and the whole import graph runs down its layers (LAYERS)."""

import ast

import pytest

from handson_lib import boundary
from conftest import ROOT

LIBRARY = ROOT / "handson_lib"
#: What no module that runs inside may reach: the deciding side and the instructor-only modules.
DECIDING = tuple(n.removesuffix(".*") for n in (*boundary.DECIDING, *boundary.INSTRUCTOR_ONLY))
#: The folders of what runs inside.
INSIDE_FOLDERS = [n.removesuffix(".*").split(".", 1)[1] for n in boundary.RUNS_INSIDE]


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


@pytest.mark.parametrize("folder", INSIDE_FOLDERS)
def test_what_runs_inside_the_sandbox_imports_nothing_that_decides(folder):
    assert reaching(imports_of(folder), DECIDING) == {}


def test_the_checks_import_nothing_of_the_autograder():
    assert reaching(imports_of("checking"), ("handson_lib.autograder", "handson_lib.authoring")) == {}


def test_the_checks_import_nothing_instructor_only_but_the_command_finds_the_reference_solutions():
    """The reference solutions are handed to the checks (checking.against) by their caller: the
    autograder's judge, or `handson check` (checking.command) where they are installed."""
    graph = import_graph()
    instructor = boundary.expand_all(boundary.INSTRUCTOR_ONLY)
    checking = {m for m in graph if m.startswith("handson_lib.checking") and m not in instructor}
    assert {m: sorted(graph[m] & instructor) for m in checking if graph[m] & instructor} == {}
    named = {f for f, names in imports_of("checking").items() if "handson_lib.checking.reference" in names}
    assert {str(f) for f in named} == {"handson_lib/checking/command.py"}


def test_what_decides_imports_nothing_of_the_course_but_its_messages_and_reads_no_setting():
    """Issue 47: the verdicts take what the grader observed and its rules as arguments; they import
    nothing that runs in a kernel or a run (the runtime, the harness, the launcher), nothing that
    observes (the checks), and read no setting (the course's settings, the environment)."""
    imports = imports_of("verdicts")
    assert imports, "no handson_lib.verdicts package"
    allowed = ("handson_lib.verdicts", "handson_lib.messages.tr")
    assert {str(f): [n for n in names if not n.startswith(allowed)] for f, names in imports.items()
            if any(not n.startswith(allowed) for n in names)} == {}
    for path in sorted((LIBRARY / "verdicts").glob("*.py")):
        text = path.read_text()
        assert "settings.current" not in text and "os.environ" not in text and "import os" not in text, path


def test_the_old_grading_folder_is_gone():
    assert not (LIBRARY / "grading").exists()


def test_the_student_edition_ships_the_harness_and_the_checks_and_nothing_that_decides_a_grade():
    shipped, _ = boundary.shipped_modules()
    assert {m for m in shipped if m.startswith(("handson_lib.autograder", "handson_lib.authoring"))} == set()
    for package in ("harness", "checking"):
        modules = {f"handson_lib.{package}.{p.stem}" for p in (LIBRARY / package).glob("*.py") if p.stem != "__init__"}
        assert modules - set(boundary.INSTRUCTOR_ONLY) <= shipped, sorted(modules - shipped)


# ----------------------------------------------------------------------------- the import graph

#: The library's layers, lowest first; a module may import its own package and the layers below.
#: Packages (and top-level modules) of one layer are peers: they import nothing of each other.
#: `cli` sits low: its registry names command modules as strings, imported only when run.
LAYERS = (
    ("settings",),
    ("handson_lib", "messages_ja", "tasks"),
    ("messages", "plotting", "exchange", "cli"),
    ("launch", "boundary"),
    ("data",),
    ("runtime", "sites"),
    ("profiling", "harness"),
    ("verdicts",),
    ("checking",),
    ("experiments",),
    ("autograder",),
    ("tools",),
    ("authoring",),
    ("classroom",),
)


def module_of(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph():
    """{module: {handson_lib modules it imports}}: every import statement of the library, at the
    top or inside a function (`from pkg import mod` counts as pkg.mod)."""
    files = {module_of(p): p for p in LIBRARY.rglob("*.py")}

    def known(name):   # the module a dotted name falls in (`pkg.mod.attr` -> pkg.mod)
        while name not in files:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for module, path in files.items():
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names |= {f"{node.module}.{a.name}" for a in node.names}
        graph[module] = {known(n) for n in names if n.split(".")[0] == "handson_lib"} - {module}
    return graph


def layer_part(module):
    """The package (or top-level module) of `module`: the unit LAYERS orders."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def upward_imports(graph, layers=LAYERS):
    """["a -> b"] for each import of a module in a higher layer or of a peer package."""
    rank = {part: i for i, layer in enumerate(layers) for part in layer}
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                  if layer_part(a) != layer_part(b) and rank[layer_part(b)] >= rank[layer_part(a)])


def circles(graph):
    """The import circles: each strongly connected set of more than one module (Tarjan)."""
    index, low, stack, found = {}, {}, [], []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            members = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(members) > 1:
                found.append(sorted(members))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def test_every_package_has_a_layer():
    parts = {layer_part(m) for m in import_graph()}
    placed = [part for layer in LAYERS for part in layer]
    assert len(placed) == len(set(placed)), "a package in two layers"
    assert parts == set(placed), f"unplaced: {sorted(parts - set(placed))}; gone: {sorted(set(placed) - parts)}"


def test_no_import_runs_back_up_a_layer():
    assert upward_imports(import_graph()) == []


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_the_graph_checks_find_what_they_look_for():
    planted = {"handson_lib.runtime.a": {"handson_lib.checking.b"}, "handson_lib.checking.b": {"handson_lib.runtime.a"},
               "handson_lib.runtime.c": {"handson_lib.sites.d"}, "handson_lib.sites.d": set()}
    assert upward_imports(planted) == ["handson_lib.runtime.a -> handson_lib.checking.b",
                                       "handson_lib.runtime.c -> handson_lib.sites.d"]
    assert circles(planted) == [["handson_lib.checking.b", "handson_lib.runtime.a"]]


# ----------------------------------------------------------------------------- the boundary, transitively

def reached(graph, start):
    """Every module that `start`'s modules import, directly or through others."""
    seen, todo = set(), list(start)
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_what_runs_inside_reaches_nothing_that_decides_or_is_instructor_only_through_any_import():
    graph = import_graph()
    inside = boundary.expand_all(boundary.RUNS_INSIDE)
    assert inside <= set(graph)
    closed = reached(graph, inside) | inside
    assert sorted(m for m in closed if m.startswith(DECIDING)) == []
    shipped, _ = boundary.shipped_modules()
    assert sorted(closed - shipped) == []


def test_the_student_library_imports_only_itself_through_any_import():
    graph = import_graph()
    shipped, _ = boundary.shipped_modules()
    assert sorted(reached(graph, shipped) - shipped - boundary.OPTIONAL_IMPORTS) == []


def test_the_transitive_check_finds_a_chain():
    planted = {"handson_lib.harness.a": {"handson_lib.data.b"}, "handson_lib.data.b": {"handson_lib.checking.checks"}}
    assert "handson_lib.checking.checks" in reached(planted, {"handson_lib.harness.a"})
