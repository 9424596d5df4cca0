"""Local Linux accounts of the classroom: `instructor` and `student01..N`.

Each gets a home of its own that nobody else may enter (0700), a group that says its role, and a
generated password: printed once, when the account is made, and kept in secrets/passwords.txt
(root only, 0600). JupyterHub checks the passwords through PAM, as a centre's hub checks its
users' own.
"""

import grp
import os
import pwd
import secrets
import shutil
import subprocess
from pathlib import Path

from handson_lib.classroom.layout import ClassroomError

INSTRUCTOR = "instructor"
STUDENT_GROUP = "handson-students"
STAFF_GROUP = "handson-staff"


def student_names(count):
    return [f"student{i:02d}" for i in range(1, int(count) + 1)]


def exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def home_of(name):
    return pwd.getpwnam(name).pw_dir


def uid_of(name):
    return pwd.getpwnam(name).pw_uid


def gid_of_group(name):
    return grp.getgrnam(name).gr_gid


def groups_of(name):
    """The account's group ids, its primary group's and those that list it (as login gives them)."""
    entry = pwd.getpwnam(name)
    return {entry.pw_gid, *(g.gr_gid for g in grp.getgrall() if name in g.gr_mem)}


def group_names(name):
    return sorted(name_of(grp.getgrgid, g) for g in groups_of(name))


def blocked_on_the_way(name, path):
    """The folders from / down to `path` that the account may not enter (no search right for it
    as owner, group member or other), each as 'PATH (mode, owner:group)'; empty when none."""
    uid, gids = uid_of(name), groups_of(name)
    blocked = []
    for folder in [*reversed(Path(path).parents), Path(path)]:
        try:
            info = folder.stat()
        except OSError as error:
            blocked.append(f"{folder} ({error.strerror})")
            continue
        mode = info.st_mode
        right = (mode & 0o100 if info.st_uid == uid else mode & 0o010 if info.st_gid in gids else mode & 0o001)
        if not right:
            owner = name_of(pwd.getpwuid, info.st_uid)
            group = name_of(grp.getgrgid, info.st_gid)
            blocked.append(f"{folder} ({oct(mode & 0o7777)}, {owner}:{group})")
    return blocked


def name_of(lookup, number):
    """The name `lookup` (pwd.getpwuid, grp.getgrgid) gives `number`, else the number itself."""
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)


def _run(cmd, stdin=None):
    result = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise ClassroomError(f"`{' '.join(cmd)}` failed: {(result.stderr or result.stdout).strip()}")
    return result


def ensure_group(name):
    try:
        grp.getgrnam(name)
    except KeyError:
        _run(["groupadd", name])


def ensure_user(name, group):
    """Make the account (home 0700, in `group`) unless it exists; True when it was made."""
    ensure_group(group)
    made = not exists(name)
    if made:
        _run(["useradd", "--create-home", "--shell", "/bin/bash", "--groups", group, name])
    elif name not in grp.getgrnam(group).gr_mem:
        _run(["usermod", "--append", "--groups", group, name])
    os.chmod(home_of(name), 0o700)
    return made


def read_passwords(path):
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split(":", 1) for line in lines if ":" in line)


def write_passwords(path, passwords):
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    path.touch(mode=0o600, exist_ok=True)
    os.chmod(path, 0o600)
    path.write_text("".join(f"{name}:{pw}\n" for name, pw in sorted(passwords.items())))


def ensure_accounts(password_file, students, adopt=False):
    """The instructor and the students, unlocked (`down` locks them); {name: password} of the
    accounts given a new password (made now, or adopted). Existing accounts keep theirs."""
    stored = read_passwords(password_file)
    new = {}
    wanted = [(INSTRUCTOR, STAFF_GROUP)] + [(name, STUDENT_GROUP) for name in student_names(students)]
    # An account the classroom did not make (its name is not in the password file) is someone's own.
    strangers = [name for name, _ in wanted if exists(name) and name not in stored]
    if strangers and not adopt:
        raise ClassroomError(f"account(s) {', '.join(strangers)} exist and were not made by `handson classroom up`: "
                             f"they may be people's own. Rename them, or pass --adopt-accounts to take them over "
                             f"(their passwords are then replaced)")
    for name, group in wanted:
        made = ensure_user(name, group)
        if made or name not in stored:
            new[name] = secrets.token_urlsafe(9)
            _run(["chpasswd"], stdin=f"{name}:{new[name]}\n")
            # written at once: an `up` stopped halfway still knows the accounts it made
            write_passwords(password_file, {**stored, **new})
        _run(["usermod", "--unlock", "--expiredate", "", name])
    return new


def lock_accounts(password_file):
    """Lock every account the classroom made (`down`): its password locked and the account expired,
    so that no one logs in to the hub or the machine with it, nor by a key or a cron job planted
    while the class ran, until the next `up` unlocks it; the accounts' files stay."""
    locked = []
    for name in read_passwords(password_file):
        if exists(name):
            _run(["usermod", "--lock", "--expiredate", "1", name])
            locked.append(name)
    return locked


def is_locked(name):
    return _run(["passwd", "--status", name]).stdout.split()[1] == "L"


def classroom_users(password_file):
    """Every account the classroom made (the password file lists them)."""
    return sorted(read_passwords(password_file))


def remove_files_of(names):
    """The accounts' files in /tmp, /var/tmp and /dev/shm, which would outlive them or pass to the
    next account of the same uid (`down --purge`): one walk of each folder for all of them."""
    uids = [str(uid_of(name)) for name in names if exists(name)]
    if not uids:
        return
    owned = [arg for uid in uids for arg in ("-o", "-uid", uid)][1:]
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(folder):
            subprocess.run(["find", folder, "-xdev", "(", *owned, ")", "-delete"], capture_output=True, timeout=600)


def remove_user(name):
    """The account, its home, its crontab and its at jobs (`down --purge`, after remove_files_of)."""
    if shutil.which("crontab"):
        subprocess.run(["crontab", "-r", "-u", name], capture_output=True, timeout=60)
    if shutil.which("atq"):
        queued = subprocess.run(["atq"], capture_output=True, text=True, timeout=60).stdout.splitlines()
        jobs = [line.split()[0] for line in queued if line.split() and line.split()[-1] == name]
        if jobs:
            subprocess.run(["atrm", *jobs], capture_output=True, timeout=60)
    _run(["userdel", "--remove", name])


def remove_groups():
    for group in (STUDENT_GROUP, STAFF_GROUP):
        try:
            grp.getgrnam(group)
        except KeyError:
            continue
        _run(["groupdel", group])
