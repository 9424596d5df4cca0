"""The classroom's state folder: everything `handson classroom up` makes lives here and persists.

    STATE/                       root 0755  ($HANDSON_CLASSROOM_DIR, default /var/lib/handson-classroom)
      settings.json              what `up` was asked for (students, spawner, bind), for `status`
      secrets/                   root 0700: passwords.txt, the hub's cookie secret, the proxy token
      hub/                       root 0700: jupyterhub_config.py, jupyterhub.sqlite, logs, pid files
      node/                      configurable-http-proxy (npm --prefix)
      edition/                   the student edition (`handson release student`), its .venv: the
                                 students' servers run there: no solutions, no hidden tests
      venv-instructor/           root:handson-staff 0750: the whole course (instructor servers)
      exchange/                  nbgrader's exchange, 1777 (sticky, as /tmp); nbgrader sets the
                                 permissions inside (students write inbound/, cannot list it)
      course/                    instructor 0700: nbgrader's course folder, gradebook.db
      grading/                   root 0700: the grading service (`up --grade-on-submit`): its queue
                                 (queue.sqlite), its jobs' folders, the references it measured
"""

import json
from dataclasses import dataclass
from pathlib import Path

from handson_lib import settings

DEFAULT_STATE_DIR = "/var/lib/handson-classroom"
ENV = settings.variable("classroom_dir")


class ClassroomError(RuntimeError):
    """A step of `handson classroom` failed; the message says what to do."""


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def settings(self):
        return self.root / "settings.json"

    @property
    def secrets(self):
        return self.root / "secrets"

    @property
    def passwords(self):
        return self.secrets / "passwords.txt"

    @property
    def cookie_secret(self):
        return self.secrets / "jupyterhub_cookie_secret"

    @property
    def proxy_token(self):
        return self.secrets / "proxy_auth_token"

    @property
    def admin_token(self):
        return self.secrets / "classroom_api_token"

    @property
    def hub(self):
        return self.root / "hub"

    @property
    def hub_config(self):
        return self.hub / "jupyterhub_config.py"

    @property
    def hub_log(self):
        return self.hub / "jupyterhub.log"

    @property
    def hub_pid(self):
        return self.hub / "jupyterhub.pid"

    @property
    def proxy_pid(self):
        return self.hub / "proxy.pid"

    @property
    def node(self):
        return self.root / "node"

    @property
    def proxy_command(self):
        return self.node / "node_modules" / ".bin" / "configurable-http-proxy"

    @property
    def edition(self):
        return self.root / "edition"

    @property
    def student_venv(self):
        return self.edition / ".venv"

    @property
    def instructor_venv(self):
        return self.root / "venv-instructor"

    @property
    def exchange(self):
        return self.root / "exchange"

    @property
    def course(self):
        return self.root / "course"

    @property
    def grading(self):
        return self.root / "grading"


def layout() -> Layout:
    return Layout(Path(settings.current().classroom_dir or DEFAULT_STATE_DIR))


def load_settings(lay: Layout):
    try:
        return json.loads(lay.settings.read_text())
    except (OSError, ValueError):
        return {}


def save_settings(lay: Layout, settings):
    lay.settings.write_text(json.dumps(settings, indent=1))
