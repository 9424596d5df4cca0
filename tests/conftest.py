"""Shared test set-up: the test tiers, the session's reference measurements, and helpers.

Every test belongs to one tier (`tier_of`): a newcomer's `make test` runs `quick`; `make test-all`
(what CI runs) runs every tier. `--tier NAME` (repeatable) selects tiers; the tiers a run leaves
out are listed at its end with the command that runs them.

Under CI=true a skip is a failure unless the test is marked `gpu`: CI runs on a fresh
machine where every other prerequisite (scheduler, browser, MPI) is installed by .ci/run.
"""

import contextlib
import fcntl
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from handson_lib.runtime import devices

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
CHROMIUM_ARGS = [
    "--no-sandbox",  # tests run as root in CI
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # the CI machine is offline
    "--disable-component-update",
    "--disable-sync",
]

#: The tiers, in the order a test is sorted into them (the first that applies): name ->
#: (what its tests need or do, the command that runs it).
TIERS = {
    "gpu": ("need an NVIDIA GPU with CuPy and NCCL", "make test-gpu"),
    "system": ("need root, Debian's Slurm, munge, iproute2 or bubblewrap, or Chromium (what .ci/run "
               "installs), or grade the whole synthetic task2 class", "sudo make test-system"),
    "timed": ("assert a measured ratio, a time or cores standing free, so they run alone, after the rest",
              "make test-timed"),
    "slow": ("execute notebooks, build and set up the student edition, grade classes, run planted "
             "mistakes and benchmarks", "make test-slow"),
    "quick": ("check units, verdicts, lint, data, the build and its leaks, translations, and run each "
              "task's check once", "make test"),
}
#: The longest files, started first: xdist hands whole files to its workers in this order, so that
#: no long file starts last and leaves the other worker idle (the rest keep their order).
#: Notebooks to read, with no graded question: the course's ending.
READING_ONLY = {"07_ending.ipynb"}
#: The files that take the cluster's turn (turn_on_the_cluster) are spread between the others, so
#: that the two workers seldom wait for each other's turn.
LONGEST_FIRST = ("test_autograde.py", "test_classroom.py", "test_hostile.py", "test_cluster_grading.py",
                 "test_hostile_review.py", "test_release.py", "test_verdicts.py", "test_task2_multi_node.py",
                 "test_cluster.py", "test_network.py", "test_notebooks.py", "test_task1_multi_gpu.py",
                 "test_questions.py")
#: Markers that put a test in the system tier.
SYSTEM_MARKERS = ("system", "scheduler", "browser", "classroom", "whole_class")


def tier_of(item):
    """The one tier a collected test belongs to (TIERS' order decides between its markers)."""
    if "gpu" in item.keywords:
        return "gpu"
    if any(item.get_closest_marker(name) for name in SYSTEM_MARKERS):
        return "system"
    for name in ("timed", "slow"):
        if item.get_closest_marker(name):
            return name
    return "quick"


def pytest_addoption(parser):
    parser.addoption("--tier", action="append", choices=list(TIERS), default=[],
                     help="run only the tests of this tier (repeatable; default: every tier): "
                          + ", ".join(TIERS))
    parser.addoption("--grade-on-submit-class", type=int, default=4, metavar="N",
                     help="tests/test_grade_on_submit.py: the class's size (4, as CI runs it; 10: issue 50's "
                          "done-when run, 2 students in Chromium and 8 through nbgrader submit, timed against "
                          "`make demo`)")
    parser.addoption("--no-tier-summary", action="store_true",
                     help="do not end with the tiers left out (a pass of `make test-all`, which runs them all)")


def _is_xdist_worker(config):
    return hasattr(config, "workerinput")

def sandbox_missing():
    """Why the grading sandbox cannot start here (None: it can): root, bubblewrap, cgroups."""
    from handson_lib.autograder import sandbox
    return sandbox.why_not_available()


#: Grading tests run without the sandbox only where it cannot start (not root): they say so with
#: `unsafe=`; the sandbox's own tests (tests/test_hostile.py) are in the system tier.
UNSAFE = sandbox_missing() is not None


def gpu_available():
    return devices.gpu_count().count > 0


def pytest_collection_modifyitems(config, items):
    chosen = set(config.getoption("tier")) or set(TIERS)
    kept, left_out, replaced = [], [], []
    for item in items:
        if tier_of(item) not in chosen:
            left_out.append(item)
        elif "system" in chosen and item.get_closest_marker("replaced_in_system_tier"):
            replaced.append(item)   # the system tier runs the same thing in its fuller setting
        else:
            kept.append(item)
    if left_out or replaced:
        config.hook.pytest_deselected(items=left_out + replaced)
        items[:] = kept
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    config._handson_left_out = Counter(tier_of(item) for item in left_out)
    if _is_xdist_worker(config):
        config.workeroutput["handson_left_out"] = dict(config._handson_left_out)
    if "gpu" in chosen and not gpu_available():
        skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU with CuPy (none on this host)")
        for item in kept:
            if "gpu" in item.keywords:
                item.add_marker(skip_gpu)


def pytest_configure(config):
    config._handson_left_out = Counter()
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_WorkerReports(config), "handson-tier-reports")


class _WorkerReports:
    """The xdist controller collects nothing itself: its workers say which tiers they left out."""
    def __init__(self, config):
        self.config = config

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        left_out = getattr(node, "workeroutput", {}).get("handson_left_out")
        if left_out and not self.config._handson_left_out:
            self.config._handson_left_out = Counter(left_out)


def pytest_unconfigure(config):
    """The last lines of a run: the tiers it left out, why, and the command that runs each."""
    left_out = getattr(config, "_handson_left_out", None)
    if _is_xdist_worker(config) or not left_out or config.getoption("no_tier_summary"):
        return
    out = sys.__stdout__
    out.write("\nTiers not run here (" + ", ".join(f"{n} {t}" for t, n in left_out.items()) + " tests):\n")
    for tier, (what, command) in TIERS.items():
        if left_out.get(tier):
            out.write(f"  {tier:7s} {left_out[tier]:4d} tests that {what}: {command}\n")
    out.write("  every tier, as CI runs them: make test-all\n")
    out.flush()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and "gpu" not in item.keywords and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped under CI=true, where only GPU tests may skip: {reason}"


@contextlib.contextmanager
def _machine_turn(name):
    """One test module at a time holds the machine-wide thing `name` (a lock file in the temporary
    folder: pytest-xdist runs files in parallel)."""
    with open(Path(tempfile.gettempdir()) / f"handson-{name}-tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def turn_on_the_cluster():
    """The machine's one local cluster, for one test at a time: the cluster, network and classroom
    tests each bring it up their own way."""
    return _machine_turn("cluster")


def turn_on_the_classroom():
    """The machine's one classroom (its accounts, ports and state folder), for one test module at
    a time: tests/test_classroom.py and tests/test_grade_on_submit.py each bring it up."""
    return _machine_turn("classroom")


@pytest.fixture(scope="module")
def cluster_turn():
    with turn_on_the_cluster():
        yield


@pytest.fixture(scope="session")
def chromium():
    """Debian's Chromium (checked before the server starts): a missing browser fails, not skips."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            break
    else:
        pytest.fail("Chromium not found: the browser tests need Debian's browser "
                    "(`apt-get install chromium`, as .ci/run does)", pytrace=False)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.fail("playwright is missing: .venv/bin/pip install -c constraints.txt -r "
                    "requirements.txt (never `playwright install`: Debian's chromium is used)",
                    pytrace=False)
    return path


@pytest.fixture
def run_handson():
    """Run the `handson` CLI of this venv; returns CompletedProcess (text)."""
    def run(*args, timeout=300, cwd=ROOT, env=None, check=False):
        full_env = dict(os.environ)
        full_env.update(env or {})
        return subprocess.run([str(VENV_BIN / "handson"), *map(str, args)], cwd=cwd, env=full_env,
                              capture_output=True, text=True, timeout=timeout, check=check)
    return run


def mutant(solution, tmp_path, old, new):
    """A copy of a reference solution with one planted mistake, under the same file name."""
    source = Path(solution).read_text()
    assert old in source, f"the solution no longer contains {old!r}"
    path = tmp_path / Path(solution).name
    path.write_text(source.replace(old, new))
    return path


def failed_checks(report):
    return {c.name: c.message for c in report.failed}


@pytest.fixture(scope="session")
def session_dir(tmp_path_factory):
    """A folder shared by the xdist workers of one pytest run (their base folders' parent)."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "handson-session"
    shared.mkdir(exist_ok=True)
    return shared


@pytest.fixture(scope="session")
def reference_cache(session_dir):
    """The grader's reference cache for the whole pytest run: each reference solution is measured
    once per session, by whichever test (or autograded class) needs it first."""
    path = session_dir / "references"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session", autouse=True)
def reference_solutions_handed_in():
    """The tests run in the instructor's checkout: they hand the checks its reference solutions,
    as the autograder's judge and `handson check` do (the checks import none: checking.against)."""
    from handson_lib.checking import against, reference
    with against.reference_solutions_from(reference):
        yield


#: The seed Task #2's checks draw in the tests that hand them a reference measured beforehand
#: (`graders_seed`), as a grading session draws one for all its students: the reference measured
#: with it trained what a correct run trains, so the accuracy it sets is that training's.
GRADED_SEED = 7919


@pytest.fixture
def graders_seed(monkeypatch):
    """The checks within draw GRADED_SEED (the autograder's session seed, fixed for the test)."""
    from handson_lib.checking import scripts
    monkeypatch.setattr(scripts, "_drawn_seed", lambda: GRADED_SEED)
    return GRADED_SEED


@pytest.fixture(scope="session")
def measure_reference(reference_cache):
    """measure_reference(name, args, np=None): the reference solution's observed run, from the
    session's cache (handson_lib.checking.reference)."""
    from handson_lib.checking import reference

    def measure(name, args, np=None, timeout=300):
        obs = reference.measure_reference(name, list(args), timeout, np=np, cache=reference_cache)
        assert obs.finished, f"the reference {name} did not finish:\n{obs.output[-3000:]}"
        return obs
    return measure


def once_per_run(session_dir, name, build):
    """build() once per pytest run; the xdist workers share its (pickled) result."""
    path = session_dir / f"{name}.pickle"
    with open(session_dir / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return pickle.loads(path.read_bytes())
        value = build()
        path.write_bytes(pickle.dumps(value))
        return value


@pytest.fixture(scope="session")
def skeleton_reports(session_dir):
    """The self-checks of the released skeletons (exercises/), by task: each script stops at its
    first unfinished step, so no measurement runs. Shared by the tests of the stubs and the tasks."""
    from handson_lib.checking import checks
    ex = ROOT / "exercises"

    def build():
        return {"multi-gpu": checks.check_multi_gpu(ex / "train_cifar_multi_gpu.py", against="self"),
                "multi-node": checks.check_multi_node(ex / "train_cifar_multi_node.py", against="self"),
                "mnist-multi-node": checks.check_mnist_multi_node(ex / "train_mnist_multi_node.py", against="self"),
                "jobscript-multi-gpu": checks.check_jobscript(ex / "run_multi_gpu_training.sh", "multi-gpu"),
                "jobscript-multi-node": checks.check_jobscript(ex / "run_multi_node_training.sh", "multi-node")}
    return once_per_run(session_dir, "skeleton-reports", build)
