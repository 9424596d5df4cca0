"""Shared test set-up.

Under CI=true a skip is a failure unless the test is marked `gpu`: CI runs on a fresh
machine where every other prerequisite (scheduler, browser, MPI) is installed by .ci/run.
"""

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
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


def gpu_available():
    return devices.gpu_count().count > 0


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU with CuPy (none on this host)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and "gpu" not in item.keywords and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped under CI=true, where only GPU tests may skip: {reason}"


@contextlib.contextmanager
def turn_on_the_cluster():
    """The machine's one local cluster, for one test at a time: pytest-xdist runs files in
    parallel, and the cluster, network and classroom tests each bring it up their own way."""
    with open(Path(tempfile.gettempdir()) / "handson-cluster-tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


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
