"""`handson doctor`'s rows for Python and its packages: the interpreter, the platform, setuptools,
NumPy, Chainer with the course's patches, ChainerMN, JupyterLab and nbgrader, the digits dataset,
a Japanese font for the Japanese edition's figures, and Chromium (the browser tests)."""

from __future__ import annotations

import platform
import re
import shutil
import sys
import warnings
from pathlib import Path

from handson_lib.messages import tr
from handson_lib.runtime import chainer_patches, devices
from handson_lib.tools.doctor_rows import (ERROR, MISSING, OK, WARN, Component, dist_version, expected,
                                           not_installed, not_on_path, shorten, vtuple)

#: The supported matrix (README "Supported stacks"): Python minor -> NumPy versions with wheels for it.
SUPPORTED_PYTHONS = {(3, 11): "1.23.5, 1.26-2.4", (3, 12): "1.26-2.5", (3, 13): "2.1-2.5"}


def check_python():
    v = sys.version_info
    found = f"{platform.python_version()} ({sys.executable})"
    in_venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    note = "" if in_venv else tr("not running inside a virtual environment; the course expects .venv "
                                 "(`make setup`)")
    if (v.major, v.minor) in SUPPORTED_PYTHONS:
        return Component("Python", OK, found, required_for_cpu_course=True, note=note)
    return Component("Python", WARN, expected(found, "3.11-3.13"),
                     tr("nothing known, but the course is only tested on Python 3.11, 3.12 and 3.13"),
                     True, note)


def check_platform():
    pretty = ""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    pretty = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    found = f"{platform.system()} {platform.release()} {platform.machine()}"
    return Component("platform", OK, found + (f" ({pretty})" if pretty else ""))


def check_setuptools():
    # Chainer's patched wheel needs no setuptools at run time; building it (`make setup`) does.
    v = dist_version("setuptools")
    if v is None:
        return Component("setuptools", WARN, not_installed(),
                         tr("rebuilding Chainer's wheel from its sdist (`make setup` installs 'setuptools<70')"))
    if vtuple(v) >= (70,):
        return Component("setuptools", WARN, expected(v, "<70"),
                         tr("building chainer 7.8.1 from source (setup.py needs an old pkg_resources); "
                            "`pip install 'setuptools<70'`"))
    return Component("setuptools", OK, v)


def check_numpy():
    try:
        import numpy
        v = str(numpy.__version__)
    except Exception as e:  # noqa: BLE001
        return Component("NumPy", MISSING, devices.describe_error(e),
                         tr("everything (Chainer needs NumPy)"), True)
    t = vtuple(v)
    if t < (1, 23):
        return Component("NumPy", WARN, expected(v, ">=1.23"),
                         tr("nothing known, but the course is only tested on NumPy 1.23.5 to 2.5"), True)
    note = ""
    if t >= (2,):
        note = tr("NumPy 2's promotion rules (NEP 50): Task #1's losses match NumPy 1's to float32 "
                  "rounding at batch 32; at batch 100 they drift by about 1 % over 200 steps")
    return Component("NumPy", OK, v, required_for_cpu_course=True, note=note)


def check_chainer_patches():
    """Which of the course's patches of Chainer 7.8.1 are in the installed Chainer, and whether this
    stack needs each (handson_lib/runtime/chainer_patches.py)."""
    state = chainer_patches.installed_state()
    needed = chainer_patches.needed_here()
    active = [p.name for p in chainer_patches.PATCHES if state[p.name] == "active"]
    lacking = [p for p in chainer_patches.PATCHES if state[p.name] != "active"]
    needed_lacking = [p for p in lacking if needed[p.name]]
    used = [name for name in active if needed[name]]
    found = tr("{n} of {total} active: {names}", n=len(active), total=len(chainer_patches.PATCHES),
               names=", ".join(active) or "-")
    note = (tr("needed on this stack: {names}", names=", ".join(f"{n} ({needed[n]})" for n in used))
            if used else tr("none is needed on this stack; they keep the course working on newer ones"))
    if needed_lacking:
        return Component("Chainer patches", ERROR, found,
                         "; ".join(f"{p.where}: {p.why}" for p in needed_lacking) + "; " +
                         tr("`make setup` installs Chainer built with them"), True, note)
    if lacking:
        return Component("Chainer patches", WARN, found,
                         tr("nothing on this stack; on newer ones: {why}",
                            why="; ".join(f"{p.where}: {p.why}" for p in lacking)), note=note)
    return Component("Chainer patches", OK, found, required_for_cpu_course=True, note=note)


def check_chainer():
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import chainer
        v = str(chainer.__version__)
    except Exception as e:  # noqa: BLE001
        return Component("Chainer", MISSING if isinstance(e, ImportError) and "chainer" in str(e) else ERROR,
                         devices.describe_error(e), tr("everything: `import chainer` fails"), True)
    note = ""
    for w in caught:
        if issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning)):
            continue
        line = next((ln.strip() for ln in str(w.message).splitlines()
                     if ln.strip() and set(ln.strip()) != {"-"}), "")
        if line:
            note = tr("import warning: {warning}", warning=shorten(line, 140))
            if "may not be compatible" in line:
                note += tr(" (CuPy 13.6 is known to work; CHAINER_WARN_VERSION_MISMATCH=0 silences it)")
            break
    found = f"{v} ({Path(chainer.__file__).parent})"
    if v == "7.8.1":
        return Component("Chainer", OK, found, required_for_cpu_course=True, note=note)
    if vtuple(v)[:1] == (7,):
        return Component("Chainer", WARN, expected(found, "7.8.1"),
                         tr("nothing known, but the course is written and tested against 7.8.1"), True, note)
    return Component("Chainer", ERROR, expected(found, "7.8.1"),
                     tr("the exercises (written against the Chainer 7.8.1 API); "
                        "`pip install chainer==7.8.1`"), True, note)


def check_chainermn():
    try:
        import chainermn
        where = Path(getattr(chainermn, "__file__", "?")).parent
        return Component("ChainerMN", OK, tr("importable ({path})", path=where), required_for_cpu_course=True)
    except Exception as e:  # noqa: BLE001
        return Component("ChainerMN", MISSING if isinstance(e, ImportError) else ERROR,
                         devices.describe_error(e),
                         tr("Task #2 multi-node and everything ChainerMN (it ships with chainer 7.8.1)"),
                         True)


def instructors_copy():
    """Whether this is the course itself, not the student edition (which ships no autograder):
    the rows of the instructor's tools (nbgrader's release and autograding, the browser tests)
    mean nothing to a student, whose edition installs neither."""
    return (Path(__file__).resolve().parents[1] / "autograder" / "__init__.py").exists()


def check_jupyter():
    rows = []
    tools = [("JupyterLab", "jupyterlab", tr("the notebooks in JupyterLab (`make lab`); scripts still run"))]
    if instructors_copy():
        tools.append(("nbgrader", "nbgrader", tr("building the student release, autograding and feedback")))
    for label, dist, disables in tools:
        v = dist_version(dist)
        rows.append(Component(label, OK, v) if v else Component(label, MISSING, not_installed(), disables))
    return rows


def check_digits():
    try:
        from sklearn.datasets import load_digits
        data = load_digits()
        return Component("digits dataset", OK,
                         tr("sklearn load_digits: {n} real 8x8 images (offline)", n=data.data.shape[0]))
    except Exception as e:  # noqa: BLE001
        return Component("digits dataset", MISSING, devices.describe_error(e),
                         tr("the offline dataset for CPU runs; without it the exercises need the CIFAR-10 "
                            "files (`handson data prepare`); `pip install scikit-learn`"))


#: Font files with Japanese glyphs that the figures can use (plotting.CJK_FONTS), by file name, and
#: where fonts are installed: found without matplotlib, whose font list takes seconds to build.
JAPANESE_FONT_FILES = re.compile(r"NotoSansCJK|NotoSansJP|ipaexg|ipag|Takao", re.I)
FONT_FOLDERS = ("/usr/share/fonts", "/usr/local/share/fonts", "~/.local/share/fonts", "~/.fonts")


def check_japanese_font(folders=None):
    """A font that draws the Japanese edition's figure labels (checked in Japanese only)."""
    for folder in map(Path, folders or FONT_FOLDERS):
        folder = folder.expanduser()
        found = next((p for p in folder.rglob("*") if JAPANESE_FONT_FILES.search(p.name)), None) \
            if folder.is_dir() else None
        if found:
            return Component("Japanese font", OK, str(found))
    return Component("Japanese font", MISSING, tr("none found"),
                     tr("Japanese labels in figures (they show as empty boxes): install a Japanese font, e.g. "
                        "`sudo apt-get install fonts-noto-cjk` (Debian, Ubuntu)"))


def check_chromium(version):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        return Component("Chromium", MISSING, not_on_path(),
                         tr("only the JupyterLab screenshot test (headless browser)"))
    rc, ver = version if version else (None, "")
    return Component("Chromium", OK, f"{exe}" + (f" ({ver})" if rc == 0 and ver else ""))
