"""nbgrader's collect for a class that may be hostile: the course's plug-in
(`c.ExchangeFactory.collect` in course/nbgrader_config.py), used by the Formgrader's Collect button,
by `nbgrader collect` and by `handson classroom collect`.

Students write `inbound/` of the exchange, and nbgrader's own collect copies what it finds there
with the instructor's rights: it follows links (a link to the instructor's notebook or to a solution
is collected as the student's work), only warns when a submission's owner is not the student it
names (a student replaces another's work with a later timestamp), and one FIFO or one folder over
the size limit stops the collect of the whole class. Here each submission is vetted on its own and
refused, with a line in the report, when it:

- is not a folder of the student it names (owner), or holds a file someone else owns;
- holds a link, a FIFO, a socket or a device;
- is over `MAX_BYTES` or `MAX_FILES`, or nested deeper than `MAX_DEPTH`;
- claims a time earlier than its files were written (a backdated name, to dodge the due date).

A student's newest acceptable submission is collected (of their `MAX_VETTED` newest); one bad
submission never stops the others. The copy itself opens every entry relative to its folder
without following links and checks it again, its time included, so a submission changed between
the check and the copy (a link swapped in, work written after the due date) is refused, not
followed. nbgrader's owner check is always on; its `before_duedate` is not offered.
"""

import datetime
import fnmatch
import os
import pwd
import shutil
import stat
from collections import defaultdict
from pathlib import Path

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import parse_utc

MAX_BYTES = 64 << 20
MAX_FILES = 2000            # files and folders
MAX_DEPTH = 16              # folders inside folders
#: Submissions of one student vetted, newest first (the rest are older and not collected anyway).
MAX_VETTED = 20
#: How much earlier than its files a submission's name may say it was made (nbgrader stamps it
#: when `submit` starts, then copies at most MAX_BYTES).
BACKDATE_TOLERANCE = datetime.timedelta(minutes=2)
REPORT_FOLDER = "collect_reports"
KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
         stat.S_IFBLK: "a block device", stat.S_IFLNK: "a link"}


class Refused(Exception):
    """A submission that is not collected; the message says why, for the instructor's report."""


def _owner(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _check_entry(info, rel, uid):
    kind = stat.S_IFMT(info.st_mode)
    if kind not in (stat.S_IFREG, stat.S_IFDIR):
        raise Refused(f"{rel} is {KINDS.get(kind, 'not a file')}")
    if info.st_uid != uid:
        raise Refused(f"{rel} belongs to {_owner(info.st_uid)}")


class Budget:
    def __init__(self):
        self.bytes = 0
        self.files = 0

    def add(self, size):
        self.bytes += size
        self.files += 1
        if self.bytes > MAX_BYTES:
            raise Refused(f"over {MAX_BYTES >> 20} MiB")
        if self.files > MAX_FILES:
            raise Refused(f"over {MAX_FILES} files")


def _open_folder(name, dir_fd=None):
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as error:
        raise Refused(f"{name} cannot be opened as a folder ({error.strerror})") from None


def walk(folder_fd, uid, ignored, dest=None, rel="", budget=None, newest=0.0, depth=0):
    """Every entry under the open folder, checked (owner, kind, size) without following links; copied
    into `dest` when given. The newest ctime seen (a student cannot set ctimes)."""
    budget = budget or Budget()
    if depth > MAX_DEPTH:
        raise Refused(f"{rel or 'it'} is nested over {MAX_DEPTH} folders deep")
    for entry in sorted(os.listdir(folder_fd)):
        path = f"{rel}{entry}"
        if any(fnmatch.fnmatch(entry, pattern) for pattern in ignored):
            continue
        info = os.stat(entry, dir_fd=folder_fd, follow_symlinks=False)
        _check_entry(info, path, uid)
        newest = max(newest, info.st_ctime)
        if stat.S_ISDIR(info.st_mode):
            budget.add(0)
            sub = _open_folder(entry, folder_fd)
            try:
                _check_entry(os.fstat(sub), path, uid)
                if dest is not None:
                    os.mkdir(dest / entry, 0o755)
                newest = walk(sub, uid, ignored, dest / entry if dest is not None else None,
                              f"{path}/", budget, newest, depth + 1)
            finally:
                os.close(sub)
            continue
        # O_NONBLOCK: a FIFO swapped in after the check does not hang the collect; fstat tells.
        fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder_fd)
        try:
            info = os.fstat(fd)
            _check_entry(info, path, uid)
            budget.add(info.st_size)
            if dest is not None:
                _copy_file(fd, dest / entry, budget, info.st_size)
                after = os.fstat(fd)
                if (after.st_size, after.st_ctime_ns) != (info.st_size, info.st_ctime_ns):
                    raise Refused(f"{path} changed while it was copied")
        finally:
            os.close(fd)
    return newest


def _copy_file(fd, target, budget, counted):
    written = 0
    with os.fdopen(os.dup(fd), "rb") as source, open(target, "wb") as out:
        while chunk := source.read(1 << 20):
            written += len(chunk)
            if written > counted:   # grew since it was counted
                budget.add(written - counted)
                counted = written
            out.write(chunk)
    os.chmod(target, 0o644)


def vet(path, student, ignored=(), dest=None):
    """Why the submission at `path` is refused (Refused), else the newest ctime of its entries;
    with `dest`, the checked files are copied there as they are read."""
    try:
        uid = pwd.getpwnam(student).pw_uid
    except KeyError:
        raise Refused(f"no account is named {student}") from None
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise Refused("the submission is a link, not a folder")
    if not stat.S_ISDIR(info.st_mode):
        raise Refused("the submission is not a folder")
    if info.st_uid != uid:
        raise Refused(f"it belongs to {_owner(info.st_uid)}, not to {student}: handed in under another's name")
    fd = _open_folder(str(path))
    try:
        _check_entry(os.fstat(fd), "the submission", uid)
        return walk(fd, uid, ignored, dest, newest=info.st_ctime)
    finally:
        os.close(fd)


def backdated(record, newest):
    """Why a submission whose newest entry was written at `newest` (ctime) is refused for the time
    its name claims, else None."""
    written = datetime.datetime.fromtimestamp(newest, datetime.timezone.utc).replace(tzinfo=None)
    stamp = record["timestamp"]
    claimed = stamp.astimezone(datetime.timezone.utc).replace(tzinfo=None) if stamp.tzinfo else stamp
    if claimed < written - BACKDATE_TOLERANCE:
        return (f"its name says {claimed:%Y-%m-%d %H:%M:%S} UTC but its files were written at "
                f"{written:%Y-%m-%d %H:%M:%S} UTC (backdated)")
    return None


class SafeCollect(ExchangeCollect):
    """nbgrader's collect with every submission vetted (see the module's docstring)."""

    def _records(self):
        """(records by student, refusals) of inbound/ for this assignment, newest first."""
        by_student, refusals = defaultdict(list), []
        student = self.coursedir.student_id
        prefix = f"{student}+" if student and student != "*" else ""
        wanted = f"+{self.coursedir.assignment_id}+"
        for name in sorted(os.listdir(self.inbound_path)):
            if not name.startswith(prefix) or wanted not in name:
                continue
            parts = name.rsplit("+", 3)
            try:
                if len(parts) != 4 or parts[1] != self.coursedir.assignment_id:
                    raise ValueError(name)
                stamp = parse_utc(parts[2])
            except (ValueError, OverflowError, TypeError):
                refusals.append((name, "its name is not one nbgrader's submit makes (STUDENT+ASSIGNMENT+TIME+ID)"))
                continue
            by_student[parts[0]].append({"username": parts[0], "filename": name, "timestamp": stamp,
                                         "stamp": parts[2]})
        for records in by_student.values():
            records.sort(key=lambda record: record["timestamp"], reverse=True)
        return by_student, refusals

    def _acceptable(self, record):
        """None when the record may be collected, else why not."""
        path = os.path.join(self.inbound_path, record["filename"])
        try:
            return backdated(record, vet(path, record["username"], self.coursedir.ignore))
        except Refused as why:
            return str(why)
        except OSError as error:
            return f"cannot be read ({error.strerror})"
        except Exception as error:   # whatever a submission does to the checks, the others go on
            return f"could not be checked ({type(error).__name__})"

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        by_student, self.refusals = self._records()
        self.src_records = []
        for records in by_student.values():
            for record in records[MAX_VETTED:]:
                self.refusals.append((record["filename"], f"not checked: older than the student's {MAX_VETTED} newest"))
            for record in records[:MAX_VETTED]:   # newest first: the newest acceptable one is collected
                why = self._acceptable(record)
                if why is None:
                    self.src_records.append(record)
                    break
                self.refusals.append((record["filename"], why))

    def copy_files(self):
        collected, kept = [], []
        for record in self.src_records:
            student = record["username"]
            source = os.path.join(self.inbound_path, record["filename"])
            dest = Path(self.coursedir.format_path(self.coursedir.submitted_directory, student,
                                                   self.coursedir.assignment_id))
            try:
                existing = self.coursedir.get_existing_timestamp(str(dest)) if dest.is_dir() else None
            except (ValueError, OverflowError):
                existing = None
            if existing is not None and not (self.update and record["timestamp"] > existing):
                kept.append(student)
                continue
            staging = dest.with_name(dest.name + ".collecting")
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True, mode=0o755)
            try:
                # Checked again as it is copied: what changed since (a late edit, a link swapped in) is refused.
                why = backdated(record, vet(source, student, self.coursedir.ignore, dest=staging))
            except Exception as error:   # Refused, OSError, or whatever else a submission provokes
                why = str(error) if isinstance(error, (Refused, OSError)) else type(error).__name__
            if why:
                shutil.rmtree(staging, ignore_errors=True)
                self.refusals.append((record["filename"], f"changed while it was copied: {why}"))
                continue
            # The time the late penalty reads is the vetted one of the name, not the student's file.
            (staging / "timestamp.txt").write_text(record["stamp"])
            shutil.rmtree(dest, ignore_errors=True)
            staging.rename(dest)
            collected.append(student)
            self.log.info("Collecting submission: %s %s", student, self.coursedir.assignment_id)
        for name, why in self.refusals:
            self.log.warning("REFUSED %s: %s", name, why)
        self.write_report(collected, kept)

    def write_report(self, collected, kept):
        folder = Path(self.coursedir.root) / REPORT_FOLDER
        folder.mkdir(exist_ok=True)
        lines = [f"collect of {self.coursedir.assignment_id} at "
                 f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC",
                 f"collected: {', '.join(sorted(collected)) or 'none'}",
                 f"already collected, nothing newer: {', '.join(sorted(kept)) or 'none'}",
                 f"refused: {len(self.refusals)}"]
        lines += [f"  REFUSED {name}: {why}" for name, why in self.refusals]
        report = folder / f"{self.coursedir.assignment_id}.txt"
        report.write_text("\n".join(lines) + "\n")
        self.log.info("Collect report: %s", report)


def report_path(course_folder, assignment):
    return Path(course_folder) / REPORT_FOLDER / f"{assignment}.txt"
