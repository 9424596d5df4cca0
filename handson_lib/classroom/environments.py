"""The Python environments the users' servers run in, and the hub's proxy.

Users cannot run the course's own .venv: its Python lives under root's home. Both environments
are made from Debian's /usr/bin/python3.11 with the course's own `make setup`:

- students: the student edition (`handson release student STATE/edition`, then its `make setup`),
  plus what a server of the hub needs (`jupyterhub-singleuser`, nbgrader's Assignments tab, the
  JupyterLab Japanese language pack); nbgrader's instructor extensions are switched off there;
- the instructor: the whole course (`make setup VENV=STATE/venv-instructor`, editable), plus the
  same server packages: the Formgrader and `handson autograde` run there.

The proxy (configurable-http-proxy) comes from npm into STATE/node, not the system's node folders.
"""

import importlib.metadata
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from handson_lib import COURSE_ROOT
from handson_lib.classroom import accounts
from handson_lib.classroom.layout import ClassroomError, Layout
from handson_lib.authoring import release

SYSTEM_PYTHON = "/usr/bin/python3.11"
PROXY_PACKAGE = "configurable-http-proxy@^5"
#: nbgrader's parts for instructors only: a student's Lab shows the Assignments tab alone.
INSTRUCTOR_LAB_EXTENSIONS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                             "@jupyter/nbgrader:course-list")
INSTRUCTOR_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader",
                                "nbgrader.server_extensions.course_list")


def hub_version():
    """The JupyterHub of the hub (the course's venv): every server gets the same version."""
    return importlib.metadata.version("jupyterhub")


def server_packages():
    """What a server of the hub needs beside the course (whose requirements bring the Japanese
    language pack): the hub's own version of jupyterhub-singleuser, batchspawner's wrapper."""
    return [f"jupyterhub=={hub_version()}", f"batchspawner=={importlib.metadata.version('batchspawner')}"]


def _server_packages_current(venv, out, who):
    """Install the server packages into `venv` when they changed since the last `up`."""
    record = Path(venv) / ".classroom-server-packages"
    wanted = "\n".join(server_packages())
    if record.exists() and record.read_text() == wanted:
        return
    _pip(venv, server_packages(), out, f"jupyterhub-singleuser and batchspawner ({who})")
    record.write_text(wanted)


def _run(cmd, out, what, cwd=None, env=None):
    out(f"  {what} ...")
    result = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise ClassroomError(f"{what} failed (`{' '.join(map(str, cmd))}`):\n{tail}")
    return result


def check_system_python():
    if not Path(SYSTEM_PYTHON).exists():
        raise ClassroomError(f"{SYSTEM_PYTHON} is missing: `apt-get install python3.11 python3.11-venv` "
                                f"(the users' servers need a Python that every account may run)")


def _make_setup(folder, venv, out, what):
    _run(["make", "-C", folder, "setup", f"PYTHON={SYSTEM_PYTHON}", f"VENV={venv}"], out, what,
         env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})


def _pip(venv, packages, out, what):
    _run([Path(venv) / "bin" / "pip", "install", "-q", "-c", COURSE_ROOT / "constraints.txt", *packages],
         out, what)


def write_nbgrader_config(venv, lay: Layout, course_id, instructor=False):
    """nbgrader's settings for everyone using this environment (its sys.prefix config): the
    classroom's exchange; for the instructor the course folder's own configuration too, so that
    the Formgrader (started in the instructor's home) grades with the course's settings."""
    folder = Path(venv) / "etc" / "jupyter"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nbgrader_config.py").write_text(
        "# Written by `handson classroom up`: the classroom's nbgrader exchange.\n"
        "c = get_config()  # noqa: F821\n"
        f"c.Exchange.root = {str(lay.exchange)!r}\n"
        f"c.CourseDirectory.course_id = {course_id!r}\n"
        "# Submissions readable by their student and the instructor's group only.\n"
        "c.ExchangeFactory.submit = 'handson_lib.exchange.PrivateSubmit'\n"
        + (f"load_subconfig({str(lay.course / 'nbgrader_config.py')!r})  # noqa: F821\n"
           if instructor else ""))


def write_server_config(venv, instructor=False):
    """The Jupyter server's settings in this environment (sys.prefix jupyter_server_config.json):

    - terminals start a plain (not a login) shell: a login shell reads /etc/profile, whose PATH
      leaves out the environment, and `handson check` in a terminal would not be found;
    - the instructor's server allows frames of itself: JupyterHub's servers forbid being framed
      (`frame-ancestors 'none'`), and JupyterLab shows the Formgrader in a frame."""
    path = Path(venv) / "etc" / "jupyter" / "jupyter_server_config.json"
    config = json.loads(path.read_text()) if path.exists() else {}
    server = config.setdefault("ServerApp", {})
    server.setdefault("terminado_settings", {})["shell_command"] = ["/bin/bash"]
    if instructor:
        server.setdefault("tornado_settings", {}).setdefault("headers", {})[
            "Content-Security-Policy"] = "frame-ancestors 'self'"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=1))


def interface_language(venv, lang):
    """JupyterLab's interface in the class's language for everyone using this environment (a user
    may still switch in Settings > Language); English: the lab's own default."""
    from handson_lib.tools import lab
    path = lab.install_settings(venv, lang)
    if lab.LAB_LOCALES.get(lang) is None:
        settings = json.loads(path.read_text())
        settings.pop("@jupyterlab/translation-extension:plugin", None)
        path.write_text(json.dumps(settings, indent=2) + "\n")


def student_environment(lay: Layout, course_id, out=print, lang="en"):
    """STATE/edition with its .venv: the student edition and a server of the hub (built once; the
    edition's files brought up to date with the course and the configuration written at every
    `up`). True when it was built now."""
    done = lay.student_venv / ".classroom-done"
    built = not done.exists()
    if built:
        _build_student_environment(lay, out, lang)
    else:
        changed = refresh_edition(lay, lang)
        if changed:
            out(f"  the student edition: {len(changed)} file(s) changed in the course, updated")
            _make_setup(lay.edition, lay.student_venv, out, "the student edition's `make setup`")
    _server_packages_current(lay.student_venv, out, "students")
    write_nbgrader_config(lay.student_venv, lay, course_id)
    write_server_config(lay.student_venv)
    interface_language(lay.student_venv, lang)
    _readable_by_all(lay.edition)
    done.touch()
    return built


def refresh_edition(lay: Layout, lang="en"):
    """Write the student edition afresh and copy what differs into STATE/edition (its .venv
    stays: the edition is installed editable, so the servers run the new files). The changed
    paths, relative to the edition."""
    changed = []
    with tempfile.TemporaryDirectory(prefix="edition-") as tmp:
        fresh = Path(tmp) / "edition"
        release.release_student(fresh, lang=lang)
        new = {p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file()}
        old = {p.relative_to(lay.edition) for p in lay.edition.rglob("*")
               if p.is_file() and not _kept_in_edition(p.relative_to(lay.edition))}
        for rel in sorted(new):
            target = lay.edition / rel
            if not target.exists() or target.read_bytes() != (fresh / rel).read_bytes():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(fresh / rel, target)
                changed.append(rel)
        for rel in sorted(old - new):
            (lay.edition / rel).unlink()
            changed.append(rel)
    return changed


def _kept_in_edition(rel):
    """What `make setup` made in the edition, not part of the edition itself."""
    return rel.parts[0] in (".venv",) or rel.parts[0].endswith(".egg-info") or "__pycache__" in rel.parts


def _build_student_environment(lay: Layout, out, lang="en"):
    if not (lay.edition / "Makefile").exists():
        out(f"  writing the student edition into {lay.edition} ...")
        if lay.edition.exists():
            shutil.rmtree(lay.edition)
        release.release_student(lay.edition, lang=lang)
    _make_setup(lay.edition, lay.student_venv, out, "the student edition's `make setup`")
    _pip(lay.student_venv, ["nbgrader>=0.9.6,<0.10"], out, "nbgrader's Assignments tab (students)")
    jupyter = lay.student_venv / "bin" / "jupyter"
    for name in INSTRUCTOR_LAB_EXTENSIONS:
        _run([jupyter, "labextension", "disable", "--level=sys_prefix", name], out,
             f"switching off {name} for students")
    for name in INSTRUCTOR_SERVER_EXTENSIONS:
        _run([jupyter, "server", "extension", "disable", "--sys-prefix", name], out,
             f"switching off {name} for students")


def installed_course(venv):
    """The folder of handson_lib that the environment imports (None when it imports none)."""
    found = subprocess.run([Path(venv) / "bin" / "python", "-c", "import handson_lib, os; "
                            "print(os.path.dirname(handson_lib.__file__))"], capture_output=True, text=True,
                           timeout=120, cwd="/")
    return Path(found.stdout.strip()).resolve() if found.returncode == 0 else None


def instructor_environment(lay: Layout, course_id, out=print, lang="en"):
    """STATE/venv-instructor: the whole course, editable, for the instructor's server only (built
    once; its configuration written at every `up`). True when it was built now."""
    done = lay.instructor_venv / ".classroom-done"
    built = not done.exists()
    if built:
        _make_setup(COURSE_ROOT, lay.instructor_venv, out, "the course's `make setup` (instructor)")
    elif installed_course(lay.instructor_venv) != COURSE_ROOT / "handson_lib":
        # Built from another checkout of the course (moved or removed since): this one's library.
        _pip(lay.instructor_venv, ["--no-deps", "-e", COURSE_ROOT], out, "the course's library (instructor)")
    _server_packages_current(lay.instructor_venv, out, "instructor")
    write_nbgrader_config(lay.instructor_venv, lay, course_id, instructor=True)
    write_server_config(lay.instructor_venv, instructor=True)
    interface_language(lay.instructor_venv, lang)
    # The course's answers are importable from here: the instructor's group only.
    os.chown(lay.instructor_venv, 0, accounts.gid_of_group(accounts.STAFF_GROUP))
    os.chmod(lay.instructor_venv, 0o750)
    done.touch()
    return built


def _readable_by_all(folder):
    for path in [Path(folder), *Path(folder).rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        os.chmod(path, mode | (0o555 if path.is_dir() or mode & 0o111 else 0o444))


def proxy(lay: Layout, out=print):
    """configurable-http-proxy from npm into STATE/node; its command."""
    if lay.proxy_command.exists():
        return lay.proxy_command
    if not shutil.which("npm"):
        raise ClassroomError("npm is missing (JupyterHub's proxy comes from npm): "
                             "`apt-get install nodejs npm`")
    lay.node.mkdir(parents=True, exist_ok=True)
    _run(["npm", "install", "--prefix", lay.node, "--no-audit", "--no-fund", PROXY_PACKAGE], out,
         f"npm install {PROXY_PACKAGE} into {lay.node}")
    return lay.proxy_command
