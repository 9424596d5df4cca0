"""JupyterHub of the classroom: its configuration, its process, its REST API.

The hub runs as root from the course's venv (it starts every user's server as that user) and
listens on loopback only unless `--bind` says otherwise. Its cookie secret and the proxy's token
are made once per installation, root-only (0600). Users' servers:

- `local`: JupyterHub's LocalProcessSpawner, a process of the user on this machine, in cgroups of
  its own (limits.py);
- `batch`: batchspawner's SlurmSpawner, a job of the user on the local Slurm cluster
  (`handson cluster up`), as a centre starts notebook servers on its compute nodes.

Students' servers run in the student edition's environment, in their home; the instructor's in
the instructor's environment, in the nbgrader course folder, where the Formgrader finds it.
"""

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from handson_lib import settings as course_settings
from handson_lib.classroom import accounts
from handson_lib.classroom.layout import ClassroomError, Layout
from handson_lib.sites import cluster

DEFAULT_BIND = "127.0.0.1"
PORT = 8000
HUB_API_PORT = 8081
PROXY_API_PORT = 8001
#: The grading service (`up --grade-on-submit`): its name, hence its page at /services/grading/.
GRADING_SERVICE = "grading"
GRADING_PORT = 8002
SPAWNERS = ("local", "batch")


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def uses_tls(settings):
    """Bound beyond loopback, the hub serves TLS only (passwords and cookies cross the network)."""
    return settings.get("bind", DEFAULT_BIND) not in LOOPBACK


def url(settings):
    scheme = "https" if uses_tls(settings) else "http"
    return f"{scheme}://{settings.get('bind', DEFAULT_BIND)}:{PORT}"


def api_url():
    return f"http://127.0.0.1:{HUB_API_PORT}/hub/api"


def ensure_secret(path, nbytes=32):
    """A secret made once per installation, readable by root alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(secrets.token_hex(nbytes))
    os.chmod(path, 0o600)
    return path


def render_config(lay: Layout, settings, students, proxy_command):
    """jupyterhub_config.py for the classroom (written at every `up`)."""
    users = [accounts.INSTRUCTOR, *students]
    spawner = settings.get("spawner", "local")
    batch = ""
    if spawner == "batch":
        batch = f"""
# Users' servers as jobs of the local Slurm cluster (batchspawner), submitted for the user by root
# (sbatch --uid), in its shared partition; every node is this machine, so the hub reaches a
# server at 127.0.0.1 on the port the job reports.
c.JupyterHub.spawner_class = "batchspawner.SlurmSpawner"
c.SlurmSpawner.exec_prefix = ""
c.SlurmSpawner.batch_submit_cmd = "sbatch --parsable --uid={{username}}"
c.SlurmSpawner.req_partition = {cluster.JUPYTER_PARTITION!r}
c.SlurmSpawner.req_runtime = {cluster.slurm_time(cluster.JUPYTER_WALLTIME)!r}
c.SlurmSpawner.req_nprocs = "1"
c.SlurmSpawner.req_srun = ""
c.SlurmSpawner.state_exechost_exp = "127.0.0.1"
"""
    local = ""
    if spawner == "local":
        local = f"""
# Users' servers as local processes, each in cgroups of its own (memory, processes, CPU share;
# handson_lib/classroom/limits.py): one user's fork or memory bomb stays theirs.
c.JupyterHub.spawner_class = "handson_lib.classroom.limits.LimitedSpawner"
c.LimitedSpawner.limits = {settings.get("limits", {})!r}
"""
    tls = ""
    if uses_tls(settings):
        tls = f"""
# Bound beyond loopback: TLS only (PAM passwords and cookies cross the network).
c.JupyterHub.ssl_cert = {settings["ssl_cert"]!r}
c.JupyterHub.ssl_key = {settings["ssl_key"]!r}
"""
    grading = grading_config(lay, settings)
    return f"""# Written by `handson classroom up` (handson_lib/classroom/hub.py) at every start: edits are lost.
import os

c = get_config()  # noqa: F821

c.JupyterHub.bind_url = {url(settings)!r}
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{HUB_API_PORT}"
c.JupyterHub.db_url = {"sqlite:///" + str(lay.hub / "jupyterhub.sqlite")!r}
c.JupyterHub.cookie_secret_file = {str(lay.cookie_secret)!r}
c.JupyterHub.pid_file = {str(lay.hub_pid)!r}
c.JupyterHub.cleanup_servers = True
c.ConfigurableHTTPProxy.command = [{str(proxy_command)!r}]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{PROXY_API_PORT}"
c.ConfigurableHTTPProxy.pid_file = {str(lay.proxy_pid)!r}
with open({str(lay.proxy_token)!r}) as token:
    c.ConfigurableHTTPProxy.auth_token = token.read().strip()

# Local accounts, passwords checked through PAM.
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.open_sessions = False
c.Authenticator.allowed_users = set({sorted(users)!r})
c.Authenticator.admin_users = set()

# The course's own tools (`handson classroom status`, the tests) talk to the hub's REST API.
with open({str(lay.admin_token)!r}) as token:
    c.JupyterHub.services = [{{"name": "handson-classroom", "api_token": token.read().strip()}}]
c.JupyterHub.load_roles = [{{"name": "handson-classroom", "services": ["handson-classroom"],
                            "scopes": ["admin:users", "admin:servers", "tokens", "list:users",
                                       "read:users"]}}]

c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 300
c.Spawner.http_timeout = 180
c.Spawner.poll_interval = 10

STUDENT_VENV = {str(lay.student_venv)!r}
INSTRUCTOR_VENV = {str(lay.instructor_venv)!r}
COURSE_FOLDER = {str(lay.course)!r}


def choose_environment(spawner):
    # The instructor's server runs the whole course in the nbgrader course folder (Formgrader);
    # a student's the student edition in the student's home.
    instructor = spawner.user.name == {accounts.INSTRUCTOR!r}
    venv = INSTRUCTOR_VENV if instructor else STUDENT_VENV
    spawner.cmd = [os.path.join(venv, "bin", "jupyterhub-singleuser")]
    if hasattr(spawner, "batchspawner_singleuser_cmd"):  # a job: its wrapper from the same venv
        spawner.batchspawner_singleuser_cmd = os.path.join(venv, "bin", "batchspawner-singleuser")
    spawner.environment = {{"PATH": os.path.join(venv, "bin") + ":/usr/local/bin:/usr/bin:/bin",
                           **{course_settings.Settings(lang=settings.get("lang", "en"),
                                                       grader=course_settings.GraderSettings(site="local")).to_env()!r},
                           "LANG": "C.UTF-8"}}
    if instructor:
        spawner.notebook_dir = COURSE_FOLDER


c.Spawner.pre_spawn_hook = choose_environment
{local}{batch}{tls}{grading}"""


def grading_config(lay: Layout, settings):
    """The grading service (`up --grade-on-submit`, classroom.grading_service): a managed service of
    the hub, as root (it grades in the sandbox), restarted by the hub when it dies; every user may
    open its page (which shows each student their own submissions only)."""
    if not settings.get("grade_on_submit"):
        return ""
    env = course_settings.Settings(lang=settings.get("lang", "en"), classroom_dir=str(lay.root),
                                   gradings_per_hour=settings.get("gradings_per_hour")).to_env()
    service = {"name": GRADING_SERVICE, "url": f"http://127.0.0.1:{GRADING_PORT}",
               "command": [sys.executable, "-m", "handson_lib.classroom.grading_service"],
               "environment": {**env, "LANG": "C.UTF-8"}, "cwd": str(lay.root), "oauth_no_confirm": True,
               "display": True}
    return f"""
# Grading as students submit (`up --grade-on-submit`): handson_lib/classroom/grading_service.py.
c.JupyterHub.services.append({service!r})
c.JupyterHub.load_roles.append({{"name": "user", "scopes": ["self", "access:services!service={GRADING_SERVICE}"]}})
"""


def write_config(lay: Layout, settings, students, proxy_command):
    lay.hub.mkdir(parents=True, exist_ok=True)
    os.chmod(lay.hub, 0o700)
    ensure_secret(lay.cookie_secret)
    ensure_secret(lay.proxy_token)
    ensure_secret(lay.admin_token)
    lay.hub_config.write_text(render_config(lay, settings, students, proxy_command))


# ----------------------------------------------------------------------------- process

def recorded_pid(path: Path, program):
    """The pid written in `path` while that process still runs `program` (not a pid reused since)."""
    import psutil
    pid = cluster.read_pid(path)
    try:
        if pid and program in " ".join(psutil.Process(pid).cmdline()):
            return pid
    except psutil.Error:
        pass
    return None


def running_pid(lay: Layout):
    return recorded_pid(lay.hub_pid, "jupyterhub")


def answers(timeout=2):
    """The hub's version when its API answers, else None."""
    try:
        with urllib.request.urlopen(f"{api_url()}/", timeout=timeout) as response:
            return json.loads(response.read()).get("version")
    except (urllib.error.URLError, OSError, ValueError):
        return None


def start(lay: Layout, wait=60):
    """Start the hub (from the course's venv, as root) unless it runs; wait until its API answers."""
    if running_pid(lay) and answers():
        return False
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    with open(lay.hub_log, "ab") as log:
        subprocess.Popen([str(Path(sys.executable).parent / "jupyterhub"), "-f", str(lay.hub_config)],
                         cwd=lay.hub, env=env, stdin=subprocess.DEVNULL, stdout=log,
                         stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if answers():
            return True
        time.sleep(0.5)
    tail = "\n".join(lay.hub_log.read_text(errors="replace").strip().splitlines()[-20:])
    raise ClassroomError(f"JupyterHub did not answer within {wait} s; its log ({lay.hub_log}):\n{tail}")


def stop(lay: Layout, timeout=30):
    """SIGTERM to the hub (it stops the proxy and, with cleanup_servers, every user's server)."""
    pid = running_pid(lay)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while running_pid(lay) and time.monotonic() < deadline:
        time.sleep(0.3)
    if running_pid(lay):
        os.kill(pid, signal.SIGKILL)
    return True


# ----------------------------------------------------------------------------- REST API (tests, status)

def api(path, token, method="GET", body=None, timeout=30):
    """A call of the hub's REST API with `token`; the decoded JSON (None when empty)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{api_url()}{path}", data=data, method=method,
                                     headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        payload = response.read()
    return json.loads(payload) if payload else None
