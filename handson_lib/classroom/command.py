"""`handson classroom up|down|status` (root): see the package's docstring."""

import os
import shutil
import sys
import time

import psutil

from handson_lib import COURSE_ROOT
from handson_lib.classroom import accounts, environments, hub, nbgrader_setup
from handson_lib.classroom.layout import ClassroomError, layout, load_settings, save_settings
from handson_lib.autograder import nbgrader_course
from handson_lib.launch import terminate_all
from handson_lib.sites import cluster

#: handed out at `up`: the setup notebook (quick) and Task #2
DEFAULT_ASSIGNMENTS = ("setup", "task2")


def _check_machine(spawner):
    if os.geteuid() != 0:
        raise ClassroomError("`handson classroom` needs root: it makes Linux accounts and starts "
                             "JupyterHub, which starts every user's server as that user")
    environments.check_system_python()
    for tool in ("runuser", "useradd", "chpasswd", "npm", "make"):
        if not shutil.which(tool):
            raise ClassroomError(f"{tool} is missing (Debian: util-linux, passwd, npm, make)")
    if spawner == "batch":
        if not cluster.is_up():
            raise ClassroomError("--spawner batch starts users' servers as Slurm jobs: bring the local "
                                 "cluster up first (`handson cluster up`), or use --spawner local")
        if cluster.applied_link(cluster.paths()).rate_bps is not None:
            raise ClassroomError("--spawner batch needs the cluster's nodes on this machine's loopback, "
                                 "where the hub listens: `handson cluster up --link none`")


def protect_course_root(settings):
    """The course's own folder (solutions, hidden tests, answers) for root and the instructor's
    group only; the previous owner group and mode are kept in settings to give them back."""
    stat = COURSE_ROOT.stat()
    settings.setdefault("course_root", {"path": str(COURSE_ROOT), "gid": stat.st_gid,
                                        "mode": stat.st_mode & 0o7777})
    os.chown(COURSE_ROOT, -1, accounts.gid_of_group(accounts.STAFF_GROUP))
    os.chmod(COURSE_ROOT, 0o750)


def restore_course_root(settings):
    saved = settings.pop("course_root", None)
    if saved and os.path.isdir(saved["path"]):
        os.chown(saved["path"], -1, saved["gid"])
        os.chmod(saved["path"], saved["mode"])


def up(students=None, spawner=None, bind=None, assignments=None, due=None, out=print, adopt=False):
    """Bring the classroom up, or bring it in line with what is asked; what is not given is kept
    from the last `up` (first time: 2 students, local servers, loopback, setup and task2)."""
    lay = layout()
    settings = load_settings(lay)
    students = students or settings.get("students", 2)
    spawner = spawner or settings.get("spawner", "local")
    bind = bind or settings.get("bind", hub.DEFAULT_BIND)
    assignments = tuple(assignments or settings.get("assignments", DEFAULT_ASSIGNMENTS))
    if spawner not in hub.SPAWNERS:
        raise ClassroomError(f"unknown spawner {spawner!r}; choose {' or '.join(hub.SPAWNERS)}")
    if students < 1:
        raise ClassroomError("--students must be at least 1")
    _check_machine(spawner)
    lay.root.mkdir(parents=True, exist_ok=True)
    os.chmod(lay.root, 0o755)
    started = time.monotonic()
    out("accounts ...")
    nbgrader_setup.prepare_exchange(lay)
    nbgrader_setup.check_exchange(lay)
    new = accounts.ensure_accounts(lay.passwords, students, adopt)
    show_passwords(lay, new, out)
    names = accounts.student_names(students)
    course_id = nbgrader_course.COURSE_ID
    out("environments (the first time: a few minutes) ...")
    proxy = environments.proxy(lay, out)
    environments.student_environment(lay, course_id, out)
    environments.instructor_environment(lay, course_id, out)
    protect_course_root(settings)
    out("nbgrader ...")
    new_assignments = [a for a in assignments if a not in nbgrader_setup.released(lay)]
    nbgrader_setup.check_exchange(lay)   # again, right before anything is released through it
    if new_assignments:
        nbgrader_setup.prepare_course(lay, new_assignments)
        nbgrader_setup.release(lay, new_assignments, names, due=due, out=out)
    settings.update(students=students, spawner=spawner, bind=bind,
                    assignments=sorted(set(settings.get("assignments", [])) | set(assignments)))
    save_settings(lay, settings)
    old_config = lay.hub_config.read_text() if lay.hub_config.exists() else None
    hub.write_config(lay, settings, names, proxy)
    if old_config != lay.hub_config.read_text() and hub.running_pid(lay):
        out("the hub's configuration changed: restarting it ...")
        hub.stop(lay)
    fresh = hub.start(lay)
    out(f"classroom up in {time.monotonic() - started:.0f} s" if fresh or new or new_assignments
        else "the classroom is already up")
    summary(lay, settings, out)
    return 0


def show_passwords(lay, new_passwords, out=print):
    """Which accounts got a password now, and where root reads them: never the passwords
    themselves (a terminal is scrolled back, logged and looked over)."""
    if new_passwords:
        out(f"  new accounts or passwords: {', '.join(sorted(new_passwords))}; their passwords are in "
            f"{lay.passwords} (root only: hand each person theirs)")


def summary(lay, settings, out=print):
    out(f"JupyterHub {hub.answers()} at {hub.url(settings)}/hub/login "
        f"({'loopback only' if settings.get('bind') == hub.DEFAULT_BIND else 'bound to ' + settings['bind']}; "
        f"servers: {settings.get('spawner')})")
    out(f"  accounts: {accounts.INSTRUCTOR} (Formgrader), "
        f"{', '.join(accounts.student_names(settings.get('students', 0)))}")
    out(f"  released through nbgrader's exchange ({lay.exchange}): "
        f"{', '.join(nbgrader_setup.released(lay)) or 'nothing'}")
    out(f"  state (hub database, exchange, gradebook): {lay.root}")


def classroom_processes(lay):
    """Processes of the classroom's accounts, the hub started from its folder, and the proxy: it
    runs as root from STATE/node with arguments that name neither, and outlives a hub killed
    with SIGKILL, so it is found by its path under STATE/node and by the pid the hub recorded."""
    users = set(accounts.classroom_users(lay.passwords))
    started_here = (str(lay.hub), str(lay.node))
    # JupyterHub records its proxy's pid (STATE/hub/proxy.pid).
    proxy = hub.recorded_pid(lay.proxy_pid, "configurable-http-proxy")
    found = []
    for proc in psutil.process_iter(["username", "cmdline"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            mine = (proc.info["username"] in users or proc.pid == proxy
                    or any(folder in cmdline for folder in started_here))
        except psutil.Error:
            continue
        if mine and proc.pid != os.getpid():
            found.append(proc)
    return found


def _alive(proc):
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def down(out=print, timeout=20):
    lay = layout()
    settings = load_settings(lay)
    stopped = hub.stop(lay)
    if settings.get("spawner") == "batch" and cluster.is_up():
        for name in accounts.classroom_users(lay.passwords):
            cluster.slurm(["scancel", "--user", name])
    locked = accounts.lock_accounts(lay.passwords)   # first: nothing logs in while the rest stops
    procs = terminate_all(classroom_processes(lay), timeout)
    restore_course_root(settings)
    if lay.root.exists():
        save_settings(lay, settings)
    left = [p for p in classroom_processes(lay) if _alive(p)]
    if left:
        raise ClassroomError("still running after down: " + ", ".join(f"{p.pid} {p.name()}" for p in left))
    lay.proxy_pid.unlink(missing_ok=True)  # left behind when the hub was killed; its proxy is stopped
    out(f"classroom down: {'the hub and ' if stopped else ''}{len(procs)} process(es) stopped; "
        f"{len(locked)} account(s) locked until the next `up`; exchange, gradebook and hub database kept "
        f"in {lay.root}")
    return 0


def status(out=print):
    lay = layout()
    settings = load_settings(lay)
    if not settings:
        out(f"no classroom in {lay.root}: `handson classroom up` (root)")
        return 1
    version = hub.answers()
    if not version:
        out(f"classroom down (state in {lay.root}): `handson classroom up`")
        return 1
    summary(lay, settings, out)
    token = lay.admin_token.read_text().strip()
    for user in hub.api("/users", token):
        server = user.get("servers", {}).get("", {})
        state = "server running" if server.get("ready") else ("starting" if server else "no server")
        out(f"  {user['name']:<12s} {state}")
    return 0


def add_arguments(parser):
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--students", type=int, default=None,
                        help="up: student accounts student01.. (default: as before, first 2)")
    parser.add_argument("--spawner", choices=hub.SPAWNERS, default=None,
                        help="up: users' servers as local processes (the first default), or as jobs "
                             "of the local Slurm cluster (batchspawner; `handson cluster up` first)")
    parser.add_argument("--bind", default=None,
                        help=f"up: the address the hub listens on (the first default: "
                             f"{hub.DEFAULT_BIND}, loopback only)")
    parser.add_argument("--assignments", nargs="+", default=None,
                        choices=list(nbgrader_course.ASSIGNMENTS),
                        help=f"up: assignments to release (the first default: {' '.join(DEFAULT_ASSIGNMENTS)})")
    parser.add_argument("--adopt-accounts", action="store_true",
                        help="up: take over existing accounts named instructor or studentNN that the classroom "
                             "did not make (their passwords are replaced); without it `up` refuses them")
    parser.add_argument("--due", default=None, help="up: due date of the released assignments "
                        "('2026-12-01 17:00:00 JST'); a later submission is marked late")


def main(args):
    action = args.action
    try:
        if action == "up":
            return up(args.students, args.spawner, args.bind, args.assignments, args.due,
                      adopt=args.adopt_accounts)
        if action == "down":
            if os.geteuid() != 0:
                raise ClassroomError("`handson classroom down` needs root")
            return down()
        return status()
    except ClassroomError as err:
        print(f"handson classroom {action}: {err}", file=sys.stderr)
        return 1
