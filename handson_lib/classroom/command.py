"""`handson classroom up|down|status` (root): see the package's docstring."""

import os
import shutil
import subprocess
from pathlib import Path
import sys
import time

import psutil

from handson_lib import COURSE_ROOT, tasks
from handson_lib.classroom import accounts, environments, grading_command, hub, limits, nbgrader_setup, tls
from handson_lib.classroom import collect as collect_plugin
from handson_lib.classroom.layout import ClassroomError, layout, load_settings, save_settings
from handson_lib.autograder import nbgrader_course
from handson_lib.authoring import translations
from handson_lib.launch import terminate_all
from handson_lib.sites import cluster

#: handed out at `up`: the setup notebook (quick) and Task #2 (handson_lib.tasks)
DEFAULT_ASSIGNMENTS = tuple(a.name for a in tasks.ASSIGNMENTS if a.handed_out_first)


def _check_machine(spawner):
    if os.geteuid() != 0:
        raise ClassroomError("`handson classroom` needs root: it makes Linux accounts and starts "
                             "JupyterHub, which starts every user's server as that user")
    environments.check_system_python()
    for tool in ("runuser", "useradd", "chpasswd", "npm", "make"):
        if not shutil.which(tool):
            raise ClassroomError(f"{tool} is missing (Debian: util-linux, passwd, npm, make)")
    if spawner == "local" and limits.why_not_available():
        raise ClassroomError(f"the limits of each user's server need cgroups: {limits.why_not_available()}")
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


def up(students=None, spawner=None, bind=None, assignments=None, due=None, out=print, adopt=False,
       ssl=(None, None), memory_gib=None, home_gib=None, lang=None, **grading):
    """Bring the classroom up, or in line with what is asked (`grading`: grading_command's); what is
    not given is kept from the last `up` (first time: 2 students, local servers, loopback, setup and task2)."""
    lay = layout()
    settings = load_settings(lay)
    students = students or settings.get("students", 2)
    spawner = spawner or settings.get("spawner", "local")
    bind = bind or settings.get("bind", hub.DEFAULT_BIND)
    user_limits = user_limits_of(settings, memory_gib, home_gib)
    lang = class_language(lay, settings, lang)
    assignments = tuple(assignments or settings.get("assignments", DEFAULT_ASSIGNMENTS))
    if spawner not in hub.SPAWNERS:
        raise ClassroomError(f"unknown spawner {spawner!r}; choose {' or '.join(hub.SPAWNERS)}")
    if students < 1:
        raise ClassroomError("--students must be at least 1")
    _check_machine(spawner)
    lay.root.mkdir(parents=True, exist_ok=True)
    os.chmod(lay.root, 0o755)
    tls_update = tls_settings(lay, settings, bind, ssl)
    started = time.monotonic()
    out("accounts ...")
    # Before any account is unlocked: nobody of the class writes the exchange while it moves.
    limits.mount_exchange(lay.root, lay.exchange, exchange_bytes(students),
                          class_running=bool(classroom_processes(lay)))
    nbgrader_setup.prepare_exchange(lay)
    nbgrader_setup.check_exchange(lay)
    new = accounts.ensure_accounts(lay.passwords, students, adopt)
    show_passwords(lay, new, out)
    names = accounts.student_names(students)
    homes_of_a_fixed_size(lay, names, user_limits, out)
    course_id = nbgrader_course.COURSE_ID
    out("environments (the first time: a few minutes) ...")
    proxy = environments.proxy(lay, out)
    environments.student_environment(lay, course_id, out, lang)
    environments.instructor_environment(lay, course_id, out, lang)
    protect_course_root(settings)
    out("nbgrader ...")
    new_assignments = [a for a in assignments if a not in nbgrader_setup.released(lay)]
    nbgrader_setup.check_exchange(lay)   # again, right before anything is released through it
    nbgrader_setup.write_course_config(lay)
    if new_assignments:
        nbgrader_setup.prepare_course(lay, new_assignments, lang)
        nbgrader_setup.release(lay, new_assignments, names, due=due, out=out)
    settings.update(students=students, spawner=spawner, bind=bind, lang=lang,
                    limits={"*": user_limits.as_dict(), accounts.INSTRUCTOR: instructor_limits(user_limits).as_dict()},
                    assignments=sorted(set(settings.get("assignments", [])) | set(assignments)))
    settings.update(tls_update, **grading_command.grading_settings(settings, **grading))
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


def class_language(lay, settings, lang):
    """The class's language: asked now, else the last `up`'s, else English. Assignments already
    released stay in theirs: a class does not change language halfway."""
    before = settings.get("lang", "en")
    lang = lang or before
    if lang != before and nbgrader_setup.released(lay):
        raise ClassroomError(f"this class released its assignments in {before} ({', '.join(nbgrader_setup.released(lay))}): "
                             f"to start a class in {lang}, `handson classroom down --purge` (it exports the grades "
                             f"first), then `handson classroom up --lang {lang}`")
    return lang


def user_limits_of(settings, memory_gib=None, home_gib=None):
    """Each user's limits: what is asked now, else what the last `up` used, else the defaults."""
    kept = settings.get("limits", {}).get("*", {})
    defaults = limits.UserLimits(**kept)
    asked = {}
    if memory_gib is not None:
        asked["memory_bytes"] = int(memory_gib * (1 << 30))
    if home_gib is not None:
        asked["home_bytes"] = int(home_gib * (1 << 30))
    if any(value <= 0 for value in asked.values()):
        raise ClassroomError("--memory-per-user and --home-size must be more than 0")
    return limits.UserLimits(**{**defaults.as_dict(), **asked})


def exchange_bytes(students):
    """The exchange's size: room for a few full submissions of everyone, 2 GiB at least."""
    return max(2 << 30, students * 4 * collect_plugin.MAX_BYTES + (1 << 30))


def instructor_limits(student):
    """The instructor's server grades the class (`handson autograde` in its terminal runs every
    student's kernel and ranks): half the machine's memory or four students' share, many processes."""
    return limits.UserLimits(memory_bytes=max(4 * student.memory_bytes, psutil.virtual_memory().total // 2),
                             processes=8192, cpu_weight=student.cpu_weight, home_bytes=student.home_bytes)


def homes_of_a_fixed_size(lay, students, user_limits, out=print):
    """Each student's home on a file system of its own (user_limits.home_bytes)."""
    mounted = []
    for name in students:
        entry = accounts.pwd.getpwnam(name)
        if limits.mount_home(lay.root, name, entry.pw_dir, user_limits.home_bytes, entry.pw_uid, entry.pw_gid):
            mounted.append(name)
    if mounted:
        out(f"  homes of {user_limits.home_bytes / (1 << 30):g} GiB: {', '.join(mounted)}")


def tls_settings(lay, settings, bind, ssl):
    """Where the hub's certificate and key are: the instructor's, or a self-signed one made for the
    bound address; none on loopback."""
    if not hub.uses_tls({"bind": bind}):
        if any(ssl):
            raise ClassroomError("--ssl-cert/--ssl-key are for a hub bound beyond loopback (--bind ADDRESS)")
        return {"ssl_cert": None, "ssl_key": None}
    if any(ssl):
        cert, key = tls.check_given(*ssl)
        return {"ssl_cert": cert, "ssl_key": key, "ssl_self_signed": False}
    if settings.get("ssl_cert") and not settings.get("ssl_self_signed", True):
        return {}   # the instructor's certificate of the last `up` (a new one: --ssl-cert/--ssl-key again)
    cert, key = tls.ensure_self_signed(lay, bind)
    return {"ssl_cert": str(cert), "ssl_key": str(key), "ssl_self_signed": True}


def show_passwords(lay, new_passwords, out=print):
    """Which accounts got a password now, and where root reads them: never the passwords
    themselves (a terminal is scrolled back, logged and looked over)."""
    if new_passwords:
        out(f"  new accounts or passwords: {', '.join(sorted(new_passwords))}; their passwords are in "
            f"{lay.passwords} (root only: hand each person theirs)")


def summary(lay, settings, out=print):
    out(f"JupyterHub {hub.answers()} at {hub.url(settings)}/hub/login "
        f"({'loopback only' if settings.get('bind') == hub.DEFAULT_BIND else 'bound to ' + settings['bind']}; "
        f"servers: {settings.get('spawner')}; language: {settings.get('lang', 'en')})")
    if settings.get("ssl_cert") and hub.uses_tls(settings):
        out(f"  TLS only; certificate {settings['ssl_cert']}"
            f"{' (self-signed: students check this fingerprint against their browser)' if settings.get('ssl_self_signed') else ''}"
            f"\n  SHA-256 {tls.fingerprint(settings['ssl_cert'])}")
    if settings.get("spawner") == "local" and settings.get("limits"):
        each = limits.UserLimits(**settings["limits"]["*"])
        teacher = settings["limits"].get(accounts.INSTRUCTOR)
        out(f"  each student: {each.memory_bytes / (1 << 30):g} GiB of memory, {each.processes} processes, an equal "
            f"CPU share, a home of {each.home_bytes / (1 << 30):g} GiB"
            + (f"; the instructor: {teacher['memory_bytes'] / (1 << 30):.3g} GiB, {teacher['processes']} processes"
               if teacher else ""))
    out(f"  accounts: {accounts.INSTRUCTOR} (Formgrader), "
        f"{', '.join(accounts.student_names(settings.get('students', 0)))}")
    grading_command.summary(settings, out)
    out(f"  released through nbgrader's exchange ({lay.exchange}): "
        f"{', '.join(nbgrader_setup.released(lay)) or 'nothing'}")
    out(f"  state (hub database, exchange, gradebook): {lay.root}")


def classroom_processes(lay):
    """Processes of the classroom's accounts, the hub started from its folder, and the proxy: it
    runs as root from STATE/node with arguments that name neither, and outlives a hub killed
    with SIGKILL, so it is found by its path under STATE/node and by the pid the hub recorded."""
    users = set(accounts.classroom_users(lay.passwords))
    started_here = (str(lay.hub), str(lay.node), str(lay.grading), grading_command.SERVICE_MODULE)
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


def down(out=print, timeout=20, purge=False, export=None):
    lay = layout()
    settings = load_settings(lay)
    stopped = hub.stop(lay)
    grading_command.stop_jobs(lay, out)
    if settings.get("spawner") == "batch" and cluster.is_up():
        for name in accounts.classroom_users(lay.passwords):
            cluster.slurm(["scancel", "--user", name])
    locked = accounts.lock_accounts(lay.passwords)   # first: nothing logs in while the rest stops
    procs = terminate_all(classroom_processes(lay), timeout)
    users = accounts.classroom_users(lay.passwords)
    for name in users:
        limits.remove(name)   # kills what a user left in their cgroups
    for name in users:
        if accounts.exists(name) and name != accounts.INSTRUCTOR:
            limits.unmount(accounts.home_of(name))
    restore_course_root(settings)
    if lay.root.exists():
        save_settings(lay, settings)
    left = [p for p in classroom_processes(lay) if _alive(p)]
    if left:
        raise ClassroomError("still running after down: " + ", ".join(f"{p.pid} {p.name()}" for p in left))
    lay.proxy_pid.unlink(missing_ok=True)  # left behind when the hub was killed; its proxy is stopped
    if purge:
        out(f"classroom down: {'the hub and ' if stopped else ''}{len(procs)} process(es) stopped")
        return purge_class(lay, settings, export, out)
    out(f"classroom down: {'the hub and ' if stopped else ''}{len(procs)} process(es) stopped; "
        f"{len(locked)} account(s) locked until the next `up`; exchange, gradebook and hub database kept "
        f"in {lay.root}")
    return 0


#: What `down --purge` removes from the state folder: the class's data. The environments and the
#: proxy stay, so that the next class comes up in seconds.
CLASS_DATA = ("exchange", "exchange.ext4", "course", "hub", "secrets", "homes", "grading", "settings.json")


def purge_class(lay, settings, export, out=print):
    """After `down`: the class's grades and work exported to one archive (root only), then its
    accounts, their homes and the class's data removed. Nothing is removed when the export fails."""
    import datetime
    users = accounts.classroom_users(lay.passwords)
    folder = Path(export or Path.cwd())
    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / f"handson-classroom-{datetime.datetime.now():%Y%m%d-%H%M%S}.tar.gz"
    if lay.course.is_dir() and accounts.exists(accounts.INSTRUCTOR):
        result = nbgrader_setup.nbgrader_as_instructor(lay, "export", "--to", str(lay.course / "grades.csv"),
                                                       check=False)
        if result.returncode != 0:
            raise ClassroomError(f"the grades could not be exported, nothing was removed:\n{result.stderr[-2000:]}")
    # tar(1), not Python's tarfile: a student's folders nested thousands deep do not stop it
    present = [name for name in ("course", "exchange", "grading") if (lay.root / name).exists()]
    if present:
        descriptor = os.open(archive, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as raw:
            packed = subprocess.run(["tar", "-czf", "-", "-C", str(lay.root), *present], stdout=raw,
                                    stderr=subprocess.PIPE, text=True, timeout=3600)
        if packed.returncode not in (0, 1):   # 1: a file changed while read (a live file system)
            raise ClassroomError(f"the export to {archive} failed, nothing was removed: {packed.stderr[-1500:]}")
        out(f"  exported the gradebook, grades.csv, the submissions, the feedback and the grading service's queue "
            f"to {archive} (root only)")
    else:
        out(f"  no course or exchange in {lay.root}: nothing to export")
    accounts.remove_files_of(users)
    for name in users:
        if accounts.exists(name):
            limits.unmount(accounts.home_of(name))
            accounts.remove_user(name)
    accounts.remove_groups()
    limits.unmount(lay.exchange)
    for name in CLASS_DATA:
        path = lay.root / name
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=True, timeout=3600)
    out(f"  removed the accounts {', '.join(users) or '(none)'}, their homes, and the class's data in {lay.root} "
        f"(the environments stay for the next class)")
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
        hits = limits.events(user["name"]) if settings.get("spawner") == "local" else {}
        stopped = ", ".join(f"{what} limit hit {n} time(s)" for what, n in hits.items() if n)
        out(f"  {user['name']:<12s} {state}" + (f" ({stopped})" if stopped else ""))
    return 0


def collect(assignment, out=print):
    """nbgrader's collect as the instructor, with the course's vetting plug-in (collect.py), as the
    Formgrader's Collect button runs it; the report: what was collected, what was refused and why."""
    if os.geteuid() != 0:
        raise ClassroomError("`handson classroom collect` needs root (it runs as the instructor)")
    if not assignment:
        raise ClassroomError("name the assignment: `handson classroom collect setup`")
    lay = layout()
    if not lay.course.is_dir():
        raise ClassroomError(f"no classroom in {lay.root}: `handson classroom up` first")
    result = nbgrader_setup.nbgrader_as_instructor(lay, "collect", assignment, "--update", check=False)
    report = collect_plugin.report_path(lay.course, assignment)
    if result.returncode != 0 or not report.exists():
        raise ClassroomError(f"nbgrader collect {assignment} failed:\n{(result.stdout + result.stderr)[-3000:]}")
    out(report.read_text().rstrip())
    out(f"(the report: {report})")
    return 0


def add_arguments(parser):
    parser.add_argument("action", choices=["up", "down", "status", "collect", "regrade", "export"])
    parser.add_argument("target", nargs="?", metavar="ASSIGNMENT|FILE",
                        help="collect, regrade: the assignment (" + ", ".join(nbgrader_course.ASSIGNMENTS)
                             + "); export: the file to write")
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
    parser.add_argument("--ssl-cert", default=None, help="up: the hub's TLS certificate (PEM) when it is bound beyond "
                        "loopback; without it `up` makes a self-signed one and prints its fingerprint")
    parser.add_argument("--ssl-key", default=None, help="up: the key of --ssl-cert (PEM)")
    parser.add_argument("--memory-per-user", type=float, default=None, metavar="GIB",
                        help=f"up: memory of each user's server and what it starts (the first default: "
                             f"{limits.UserLimits().memory_bytes >> 30} GiB)")
    parser.add_argument("--home-size", type=float, default=None, metavar="GIB",
                        help=f"up: size of each student's home, a file system of its own (the first default: "
                             f"{limits.UserLimits().home_bytes >> 30} GiB; made larger, never smaller)")
    parser.add_argument("--lang", choices=("en", *translations.LANGUAGES), default=None,
                        help="up: the class's language: the assignments released, the student edition, "
                             "JupyterLab's interface, the grader's checks and feedback (the first default: en)")
    parser.add_argument("--purge", action="store_true",
                        help="down: export the grades and the class's work to one archive, then remove the "
                             "class's accounts, their homes and the class's data (the environments stay)")
    parser.add_argument("--export", default=None, metavar="FOLDER",
                        help="down --purge: where the archive goes (default: the current folder)")
    parser.add_argument("--due", default=None, help="up: due date of the released assignments "
                        "('2026-12-01 17:00:00 JST'); a later submission is marked late")
    grading_command.add_arguments(parser)


def trailing(args, extra):
    """The file of `export --lms moodle FILE`, given after the options: taken (True), else not."""
    if args.action == "export" and args.target is None and len(extra) == 1 and not extra[0].startswith("-"):
        args.target = extra[0]
        return True
    return False


def main(args):
    action = args.action
    try:
        if action == "up":
            return up(args.students, args.spawner, args.bind, args.assignments, args.due,
                      adopt=args.adopt_accounts, ssl=(args.ssl_cert, args.ssl_key),
                      memory_gib=args.memory_per_user, home_gib=args.home_size, lang=args.lang,
                      grade_on_submit=args.grade_on_submit, gradings_per_hour=args.gradings_per_hour,
                      grade_on=args.grade_on)
        if action == "collect":
            return collect(grading_command.assignment_named(args.target, "collect"))
        if action == "regrade":
            return grading_command.regrade(grading_command.assignment_named(args.target, "regrade"), args.student)
        if action == "export":
            return grading_command.export(args.lms, args.target, args.accounts, args.assignments)
        if action == "down":
            if os.geteuid() != 0:
                raise ClassroomError("`handson classroom down` needs root")
            return down(purge=args.purge, export=args.export)
        return status()
    except ClassroomError as err:
        print(f"handson classroom {action}: {err}", file=sys.stderr)
        return 1
