"""The quick tier (`make test`, a newcomer's first command, often on a busy laptop) times
nothing: no test of it bounds how long something took by a reading of the wall clock. A hang is
caught by pytest's own timeout (pyproject.toml); a command that must stay fast says so in a test
of the timed tier, which runs alone on an idle machine (test_doctor_stays_fast).

Issue 49: `test_doctor_cli_table` asserted `elapsed < 15`; at a load of 10 doctor took 30.7 s and
`make test` failed.
"""

import ast
from pathlib import Path

from conftest import SYSTEM_MARKERS

TESTS = Path(__file__).resolve().parent
#: Markers that put a test in a tier other than quick (conftest.tier_of).
NOT_QUICK = {"gpu", "timed", "slow", *SYSTEM_MARKERS}
#: Functions of the `time` module that read the wall clock (process_time counts CPU, not waiting).
WALL_CLOCKS = {"time", "monotonic", "perf_counter", "monotonic_ns", "perf_counter_ns", "time_ns"}


def _reads_the_clock(node, clock_names):
    for n in ast.walk(node):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in WALL_CLOCKS
                and isinstance(n.func.value, ast.Name) and n.func.value.id == "time"):
            return True
        if isinstance(n, ast.Name) and n.id in clock_names:
            return True
    return False


def _has_a_number(node):
    """A number in `node`, but not an index (`spans[0][1]` holds no bound)."""
    if isinstance(node, ast.Subscript):
        return _has_a_number(node.value)
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    return any(_has_a_number(child) for child in ast.iter_child_nodes(node))


def _marks(nodes):
    return {n.attr for d in nodes for n in ast.walk(d)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and n.value.attr == "mark"}


def time_bounds(source):
    """[(line, test, assertion)] of each assert in a quick-tier test of `source` that bounds a
    reading of the wall clock from above: `elapsed < 15`, `time.monotonic() - start < 30`,
    `time.monotonic() < deadline` (a lower bound, `waited >= 1.5`, cannot fail on a busy machine)."""
    tree = ast.parse(source)
    module_marks = _marks(node.value for node in tree.body if isinstance(node, ast.Assign)
                          and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets))
    found = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")):
        if (_marks(fn.decorator_list) | module_marks) & NOT_QUICK:
            continue
        clock_names = set()
        for n in ast.walk(fn):       # start = time.monotonic(); elapsed = time.monotonic() - start
            if isinstance(n, ast.Assign) and _reads_the_clock(n.value, clock_names):
                clock_names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        for n in (n for n in ast.walk(fn) if isinstance(n, ast.Assert)):
            for compare in (c for c in ast.walk(n.test) if isinstance(c, ast.Compare)):
                sides = [compare.left, *compare.comparators]
                for op, low, high in zip(compare.ops, sides, sides[1:]):
                    if isinstance(op, (ast.Gt, ast.GtE)):
                        low, high = high, low
                    elif not isinstance(op, (ast.Lt, ast.LtE)):
                        continue
                    if _reads_the_clock(low, clock_names) and (_has_a_number(high)
                                                               or _reads_the_clock(high, clock_names)):
                        found.append((n.lineno, fn.name, ast.unparse(compare)))
    return found


def test_no_quick_test_bounds_the_wall_clock():
    found = [(path.name, *bound) for path in sorted(TESTS.glob("test_*.py"))
             for bound in time_bounds(path.read_text())]
    assert found == [], found


def test_the_scan_finds_the_bounds_that_failed_on_a_busy_laptop():
    """What issue 49 found, and the forms of it the suite had; what a quick test may do with a clock."""
    old_doctor_test = '''
def test_doctor_cli_table(run_handson):
    start = time.monotonic()
    proc = run_handson("doctor", timeout=120)
    elapsed = time.monotonic() - start
    assert elapsed < 15, f"doctor took {elapsed:.1f} s (must stay fast)"
'''
    assert [test for _, test, _ in time_bounds(old_doctor_test)] == ["test_doctor_cli_table"]
    other_forms = '''
def test_a(x):
    started = time.monotonic()
    assert time.monotonic() - started < 12
def test_b(x):
    deadline = time.monotonic() + 30
    assert x and time.monotonic() < deadline
def test_c(x):
    started = time.perf_counter()
    assert 1.5 <= time.perf_counter() - started < 15
def test_d(x):
    started = time.time()
    assert 20 > time.time() - started
'''
    assert [test for _, test, _ in time_bounds(other_forms)] == ["test_a", "test_b", "test_c", "test_d"]
    allowed = '''
@pytest.mark.timed
def test_timed(x):
    started = time.monotonic()
    assert time.monotonic() - started < 15
def test_lower_bound_and_order(spans):
    before = time.time()
    assert time.time() - before >= 1.5
    assert before - 1e-3 <= spans[0][1]
def test_cpu_time(x):
    started = time.process_time()
    assert time.process_time() - started < 5
'''
    assert time_bounds(allowed) == []
