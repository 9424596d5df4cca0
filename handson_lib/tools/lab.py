"""JupyterLab for the course: settings without the news pop-up, started on the course folder."""

import json
import os
import shutil
import sys
from pathlib import Path

from handson_lib import COURSE_ROOT

#: Lab-wide defaults (JupyterLab reads <prefix>/share/jupyter/lab/settings/overrides.json).
LAB_OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}


def overrides_path(prefix=sys.prefix):
    return Path(prefix) / "share" / "jupyter" / "lab" / "settings" / "overrides.json"


#: JupyterLab's interface language for the course's languages (the language packs' locale names).
LAB_LOCALES = {"ja": "ja_JP"}


def lab_overrides(lang=None):
    """LAB_OVERRIDES, and the interface in the reader's language (HANDSON_LANG / the locale) where
    the course has it: a user can still switch in Settings > Language."""
    from handson_lib.messages import language
    overrides = {plugin: dict(values) for plugin, values in LAB_OVERRIDES.items()}
    locale = LAB_LOCALES.get(lang or language())
    if locale:
        overrides["@jupyterlab/translation-extension:plugin"] = {"locale": locale}
    return overrides


def install_settings(prefix=sys.prefix, lang=None):
    path = overrides_path(prefix)
    path.parent.mkdir(parents=True, exist_ok=True)
    current = {}
    if path.exists():
        try:
            current = json.loads(path.read_text())
        except ValueError:
            current = {}
    for plugin, values in lab_overrides(lang).items():
        current.setdefault(plugin, {}).update(values)
    path.write_text(json.dumps(current, indent=2) + "\n")
    return path


def lab_command(port=8888, ip="127.0.0.1", open_browser=True, token=None, root=COURSE_ROOT):
    jupyter = shutil.which("jupyter", path=str(Path(sys.executable).parent)) or "jupyter"
    cmd = [jupyter, "lab", f"--ip={ip}", f"--port={port}", f"--ServerApp.root_dir={root}",
           "--ServerApp.port_retries=0"]
    if not open_browser:
        cmd.append("--no-browser")
    if token is not None:
        cmd.append(f"--IdentityProvider.token={token}")
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd


def lab_environment(environ=None, bin_dir=None):
    """The server's environment, which its terminals inherit: the course's venv first on PATH (and
    VIRTUAL_ENV set), as `source .venv/bin/activate` would, so that a terminal of `make lab` finds
    `handson` and the venv's `mpiexec` (not a scheduler's /usr/bin/mpiexec) without activating."""
    env = dict(os.environ if environ is None else environ)
    bin_dir = str(Path(sys.executable).parent if bin_dir is None else bin_dir)
    rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != bin_dir]
    env["PATH"] = os.pathsep.join([bin_dir, *rest])
    env["VIRTUAL_ENV"] = str(Path(bin_dir).parent)
    return env


def add_arguments(parser):
    parser.add_argument("--install-settings", action="store_true",
                        help="only write the lab settings (no news pop-up) into the environment")
    parser.add_argument("--port", type=int, default=8888)
    parser.add_argument("--ip", default="127.0.0.1")
    parser.add_argument("--no-browser", action="store_true")


def main(args):
    path = install_settings()
    if args.install_settings:
        print(f"JupyterLab settings written to {path}")
        return 0
    cmd = lab_command(port=args.port, ip=args.ip, open_browser=not args.no_browser)
    print("Starting:", " ".join(cmd), flush=True)
    os.chdir(COURSE_ROOT)
    os.execve(cmd[0], cmd, lab_environment())
