"""nbgrader in the classroom: the exchange, the instructor's course folder, released assignments.

The exchange is a folder every account may write (1777: nbgrader asks for 0777; sticky keeps the
course's folder the instructor's); inside it nbgrader sets the permissions itself: `outbound/` readable by all, `inbound/` and `feedback/`
writable but not listable, submissions named with the student, a timestamp and a random part.
The course folder (source/, release/, submitted/, autograded/, feedback/, gradebook.db) belongs to
the instructor alone (0700). Its nbgrader_config.py loads the course's own (course/nbgrader_config.py:
timeouts, the hidden-test-free feedback, the files handed in) and adds the classroom's folders.
"""

import os
import pwd
import subprocess

from handson_lib import COURSE_ROOT
from handson_lib.classroom import accounts
from handson_lib.classroom.layout import ClassroomError, Layout
from handson_lib.authoring import course_source
from handson_lib.autograder import nbgrader_course


def user_env(name, venv, extra=None):
    """The environment of a command run as `name` with `venv` first on PATH."""
    home = accounts.home_of(name)
    return {"HOME": home, "USER": name, "LOGNAME": name, "SHELL": "/bin/bash", "LANG": "C.UTF-8",
            "PATH": f"{venv}/bin:/usr/local/bin:/usr/bin:/bin", **(extra or {})}


def run_as(name, venv, cmd, cwd, timeout=1800, check=True):
    """`cmd` as the account `name` (runuser), in `cwd`; CompletedProcess (text)."""
    env = user_env(name, venv)
    full = ["runuser", "-u", name, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
            *map(str, cmd)]
    result = subprocess.run(full, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise ClassroomError(f"`{' '.join(map(str, cmd))}` as {name} failed:\n"
                             + "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
                             + course_access(name))
    return result


def course_access(name):
    """What keeps the account from the course's library, said after a failure (an import of
    handson_lib fails as 'could not be imported' when a folder on the way is closed to it)."""
    blocked = accounts.blocked_on_the_way(name, COURSE_ROOT / "handson_lib")
    if not blocked:
        return ""
    return (f"\n{name} cannot enter {', '.join(blocked)} on the way to the course's library "
            f"(its groups: {', '.join(accounts.group_names(name))})")


def prepare_exchange(lay: Layout):
    """The exchange root: every account may create in it, sticky (1777, as /tmp) so that no one
    renames or removes what another made there: the course's folder is the instructor's."""
    lay.exchange.mkdir(parents=True, exist_ok=True)
    os.chmod(lay.exchange, 0o1777)


def check_exchange(lay: Layout):
    """Refuse a course folder in the exchange that the instructor does not own: someone put it
    there (before the root was sticky, a student could rename the course's folder and put their
    own in its place, nbgrader issue 1225), and releasing or collecting through it would hand
    the class a student's files or the submissions to a student."""
    folder = lay.exchange / nbgrader_course.COURSE_ID
    if not folder.exists() and not folder.is_symlink():
        return
    info = os.lstat(folder)
    owner = accounts.uid_of(accounts.INSTRUCTOR) if accounts.exists(accounts.INSTRUCTOR) else None
    if folder.is_symlink() or info.st_uid not in (owner, 0):
        who = accounts.name_of(pwd.getpwuid, info.st_uid)
        raise ClassroomError(f"the exchange's course folder {folder} belongs to {who}, not to the instructor"
                             f"{' (it is a link)' if folder.is_symlink() else ''}: someone replaced it. Move it "
                             f"aside (the class's submissions may be inside), then run `handson classroom up` again")


def course_config(lay: Layout):
    return ("# Written by `handson classroom up`: the course's own settings, then the classroom's folders.\n"
            "c = get_config()  # noqa: F821\n"
            f"load_subconfig({str(COURSE_ROOT / 'course' / 'nbgrader_config.py')!r})  # noqa: F821\n"
            f"c.CourseDirectory.root = {str(lay.course)!r}\n"
            f"c.Exchange.root = {str(lay.exchange)!r}\n"
            "# The class's language for whatever nbgrader runs here (the Formgrader's feedback too).\n"
            "import os\n"
            "from handson_lib.autograder import nbgrader_course\n"
            "for variable, value in nbgrader_course.grading_env(c.CourseDirectory.root).items():\n"
            "    os.environ.setdefault(variable, value)\n")


def write_course_config(lay: Layout):
    """The course folder's nbgrader_config.py, at every `up`: it names this checkout's course
    settings (a state folder made from another checkout would load that one's)."""
    if lay.course.is_dir():
        path = lay.course / "nbgrader_config.py"
        path.write_text(course_config(lay))
        os.chown(path, accounts.uid_of(accounts.INSTRUCTOR), accounts.gid_of_group(accounts.INSTRUCTOR))


def prepare_course(lay: Layout, assignments, lang="en"):
    """The instructor's course folder with source/<assignment>/ assembled from solutions/, in the
    class's language (the grader reads it there too: its checks and feedback speak it)."""
    lay.course.mkdir(parents=True, exist_ok=True)
    course_source.assemble(lay.course, assignments=assignments, lang=lang)
    write_course_config(lay)
    uid, gid = accounts.uid_of(accounts.INSTRUCTOR), accounts.gid_of_group(accounts.INSTRUCTOR)
    for path in [lay.course, *lay.course.rglob("*")]:
        os.chown(path, uid, gid, follow_symlinks=False)
    os.chmod(lay.course, 0o700)


def nbgrader_as_instructor(lay: Layout, *args, check=True):
    return run_as(accounts.INSTRUCTOR, lay.instructor_venv, ["nbgrader", *args], lay.course, check=check)


def release(lay: Layout, assignments, students, due=None, out=print):
    """Students into the gradebook; each assignment generated and released to the exchange."""
    for name in students:
        nbgrader_as_instructor(lay, "db", "student", "add", name)
    for assignment in assignments:
        nbgrader_as_instructor(lay, "db", "assignment", "add", assignment,
                               *([f"--duedate={due}"] if due else []))
        nbgrader_as_instructor(lay, "generate_assignment", assignment, "--force")
        nbgrader_as_instructor(lay, "release_assignment", assignment, "--force")
        out(f"  released {assignment} to {lay.exchange / nbgrader_course.COURSE_ID / 'outbound' / assignment}"
            + (f" (due {due})" if due else ""))


def released(lay: Layout):
    outbound = lay.exchange / nbgrader_course.COURSE_ID / "outbound"
    return sorted(p.name for p in outbound.iterdir()) if outbound.is_dir() else []

