"""What every part of `handson doctor` shares: a row of its table (`Component`), the statuses,
the verdict's shape, the words several rows use, and the small never-raising helpers (running a
command, reading a version).

Helpers here return text in the student's language (handson_lib.messages.tr) where a student
reads it; a doctor never crashes, so each one turns a failure into text.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

from handson_lib.messages import tr
from handson_lib.runtime import devices

OK, WARN, MISSING, ERROR = "ok", "warn", "missing", "error"
STATUSES = (OK, WARN, MISSING, ERROR)
SYMBOLS = {OK: "[ ok ]", WARN: "[warn]", MISSING: "[miss]", ERROR: "[err!]"}

#: seconds for `cmd --version` style calls
COMMAND_TIMEOUT = 5

# words several rows use (functions: in the language of the moment they are shown)

def not_installed():
    return tr("not installed")


def not_on_path():
    return tr("not on PATH")


def expected(found, expected):
    return tr("{found}, {expected} expected", found=found, expected=expected)


@dataclasses.dataclass
class Component:
    name: str
    status: str               # one of STATUSES
    found: str = ""           # version, path or detail
    disables: str = ""        # what the course cannot do without it; empty when ok
    required_for_cpu_course: bool = False
    note: str = ""            # extra advice that does not disable anything

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"bad status {self.status!r}")
        if self.status == OK:
            self.disables = ""

    @property
    def blocking(self) -> bool:
        """True when this row alone prevents the CPU course from running."""
        return self.required_for_cpu_course and self.status in (MISSING, ERROR)


@dataclasses.dataclass
class Verdict:
    cpu_ready: bool
    cpu: str
    gpu_ready: bool
    gpu: str


# --------------------------------------------------------------------------- helpers

def shorten(text, limit=160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def vtuple(version) -> tuple:
    """'1.23.5' -> (1, 23, 5); '7.8.1rc1' -> (7, 8, 1); unparsable parts stop the tuple."""
    out = []
    for part in str(version).split(".")[:3]:
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group()))
    return tuple(out)


def run_command(cmd, timeout=COMMAND_TIMEOUT, env=None):
    """Run a command; returns (rc, combined output) or (None, error text). Never raises."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL, errors="replace")
        return proc.returncode, (proc.stdout or "") + (proc.stderr or "")
    except subprocess.TimeoutExpired as e:
        partial = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        if partial.strip():
            return None, tr("timed out after {seconds} s (output so far: {output})",
                            seconds=timeout, output=shorten(partial, 80))
        return None, tr("timed out after {seconds} s", seconds=timeout)
    except Exception as e:  # noqa: BLE001 - a doctor never crashes
        return None, devices.describe_error(e)


def first_line(text) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def dist_version(name):
    try:
        return importlib.metadata.version(name)
    except Exception:  # noqa: BLE001
        return None


def venv_bin() -> Path:
    # not resolved: a venv's python is a symlink to the system interpreter
    return Path(sys.executable).parent


def version_of(cmd):
    rc, out = run_command([cmd, "--version"])
    return rc, first_line(out)
