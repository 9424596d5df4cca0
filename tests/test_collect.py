"""The classroom's collect (handson_lib/classroom/collect.py) against what a hostile student leaves in
the exchange's inbound/: each attack is planted in a real exchange folder and collected with the
course's plug-in, as the Formgrader's Collect button does; nbgrader's own collect would follow the
link, copy the other's work, or stop at the FIFO for everyone.

The student is the account running the tests (the owner check needs a real account that owns the
files); a submission named after another account is one that account did not hand in.
"""

import datetime
import os
import pwd
import subprocess
import threading

import pytest
from nbgrader.coursedir import CourseDirectory

from handson_lib.classroom import collect

COURSE = "handson"
ASSIGNMENT = "setup"
ME = pwd.getpwuid(os.getuid()).pw_name
SOMEONE_ELSE = "nobody" if ME != "nobody" else "root"


def stamp(seconds_ago=0):
    when = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=seconds_ago)
    return when.strftime("%Y-%m-%d %H:%M:%S.%f UTC")


class Exchange:
    def __init__(self, tmp_path):
        self.root = tmp_path / "exchange"
        self.inbound = self.root / COURSE / "inbound"
        self.inbound.mkdir(parents=True)
        self.course = tmp_path / "course"
        self.course.mkdir()
        self.count = 0

    def hand_in(self, student=ME, when=None, files=None, name=None):
        """A submission folder as nbgrader's submit makes it (notebook and timestamp.txt)."""
        self.count += 1
        when = when or stamp()
        folder = self.inbound / (name or f"{student}+{ASSIGNMENT}+{when}+{self.count:04d}")
        folder.mkdir()
        (folder / "timestamp.txt").write_text(when)
        for rel, text in (files if files is not None else {"01_setup.ipynb": f"work {self.count}"}).items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text)
        return folder

    def collect(self):
        coursedir = CourseDirectory(root=str(self.course))
        coursedir.course_id = COURSE
        coursedir.assignment_id = ASSIGNMENT
        plugin = collect.SafeCollect(coursedir=coursedir, authenticator=None, root=str(self.root))
        plugin.start()
        return plugin

    def collected(self, student=ME):
        folder = self.course / "submitted" / student / ASSIGNMENT
        return {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()} \
            if folder.is_dir() else None

    def report(self):
        return collect.report_path(self.course, ASSIGNMENT).read_text()


@pytest.fixture
def exchange(tmp_path):
    return Exchange(tmp_path)


def test_a_plain_submission_is_collected_with_its_time(exchange):
    when = stamp(10)
    exchange.hand_in(when=when, files={"01_setup.ipynb": "mine", "scripts/train.py": "print()"})
    exchange.collect()
    assert exchange.collected() == {"01_setup.ipynb": "mine", "scripts/train.py": "print()", "timestamp.txt": when}
    assert f"collected: {ME}" in exchange.report() and "refused: 0" in exchange.report()


@pytest.mark.parametrize("target", ["instructor's notebook", "solution script"])
def test_a_link_is_refused_and_the_earlier_submission_collected(exchange, tmp_path, target):
    secret = tmp_path / "instructor-only" / ("source.ipynb" if target.endswith("notebook") else "train_solution.py")
    secret.parent.mkdir()
    secret.write_text("THE ANSWERS")
    exchange.hand_in(when=stamp(50), files={"01_setup.ipynb": "honest work"})
    bad = exchange.hand_in(when=stamp(10), files={})
    (bad / "01_setup.ipynb").symlink_to(secret)
    exchange.collect()
    assert exchange.collected()["01_setup.ipynb"] == "honest work"
    assert f"REFUSED {bad.name}: 01_setup.ipynb is a link" in exchange.report()


def test_the_submission_folder_itself_as_a_link_is_refused(exchange, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "01_setup.ipynb").write_text("THE ANSWERS")
    link = exchange.inbound / f"{ME}+{ASSIGNMENT}+{stamp()}+link"
    link.symlink_to(elsewhere)
    exchange.collect()
    assert exchange.collected() is None
    assert "the submission is a link" in exchange.report()


def test_a_submission_in_another_students_name_is_refused(exchange):
    forged = exchange.hand_in(student=SOMEONE_ELSE, files={"01_setup.ipynb": "forged"})
    exchange.hand_in(files={"01_setup.ipynb": "mine"})
    exchange.collect()
    assert exchange.collected(SOMEONE_ELSE) is None
    assert exchange.collected()["01_setup.ipynb"] == "mine"
    assert f"REFUSED {forged.name}: it belongs to {ME}, not to {SOMEONE_ELSE}" in exchange.report()


def test_a_fifo_is_refused_and_does_not_stop_the_collect(exchange):
    bad = exchange.hand_in(student=ME, when=stamp(10), files={})
    os.mkfifo(bad / "01_setup.ipynb")
    forged = exchange.hand_in(student=SOMEONE_ELSE)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (exchange.collect(), done.set()), daemon=True)
    worker.start()
    worker.join(30)
    assert done.is_set(), "the collect hung on a FIFO"
    assert f"REFUSED {bad.name}: 01_setup.ipynb is a FIFO" in exchange.report()
    assert f"REFUSED {forged.name}" in exchange.report()


def test_a_huge_file_is_refused(exchange):
    bad = exchange.hand_in(files={"01_setup.ipynb": "ok"})
    with open(bad / "data.bin", "wb") as big:   # sparse: no disk used
        big.truncate(collect.MAX_BYTES + 1)
    exchange.collect()
    assert exchange.collected() is None
    assert f"REFUSED {bad.name}: over {collect.MAX_BYTES >> 20} MiB" in exchange.report()


def test_a_backdated_submission_is_refused(exchange):
    bad = exchange.hand_in(when=stamp(seconds_ago=24 * 3600))
    exchange.collect()
    assert exchange.collected() is None
    assert f"REFUSED {bad.name}: its name says" in exchange.report() and "(backdated)" in exchange.report()


def test_a_name_nbgrader_does_not_make_is_refused_not_fatal(exchange):
    exchange.hand_in(name=f"{ME}+{ASSIGNMENT}+not-a-time+0001")
    exchange.hand_in(files={"01_setup.ipynb": "mine"})
    exchange.collect()
    assert exchange.collected()["01_setup.ipynb"] == "mine"
    assert "its name is not one nbgrader's submit makes" in exchange.report()


def test_the_timestamp_graded_is_the_names_not_the_students_file(exchange):
    when = stamp(20)
    folder = exchange.hand_in(when=when)
    (folder / "timestamp.txt").write_text("2000-01-01 00:00:00.000000 UTC")   # to dodge the late penalty
    exchange.collect()
    assert exchange.collected()["timestamp.txt"] == when


def test_a_file_swapped_for_a_link_after_the_check_is_refused(exchange, tmp_path, monkeypatch):
    secret = tmp_path / "secret.txt"
    secret.write_text("THE ANSWERS")
    folder = exchange.hand_in(files={"01_setup.ipynb": "mine"})
    checked = collect.SafeCollect.init_src

    def swap_after_check(self):
        checked(self)
        (folder / "01_setup.ipynb").unlink()
        (folder / "01_setup.ipynb").symlink_to(secret)

    monkeypatch.setattr(collect.SafeCollect, "init_src", swap_after_check)
    exchange.collect()
    assert exchange.collected() is None
    assert "changed while it was copied: 01_setup.ipynb" in exchange.report()
    assert not list((exchange.course / "submitted").rglob("*.collecting"))


def test_a_submission_nested_deeper_than_python_recurses_is_refused_not_fatal(exchange):
    exchange.hand_in(when=stamp(30), files={"01_setup.ipynb": "honest work"})
    deep = exchange.hand_in(files={})
    try:
        fd = os.open(deep, os.O_RDONLY)
        for _ in range(1100):   # deeper than Python's recursion limit
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(fd)
        exchange.collect()
        assert exchange.collected()["01_setup.ipynb"] == "honest work"
        assert f"REFUSED {deep.name}: " in exchange.report() and "deep" in exchange.report()
    finally:   # rm(1): pytest's own clean-up of tmp_path recurses, and this is too deep for it
        subprocess.run(["rm", "-rf", str(deep)], check=True)


def test_a_file_written_while_it_is_copied_is_refused(exchange, monkeypatch):
    folder = exchange.hand_in(files={"01_setup.ipynb": "first"})
    copy = collect._copy_file

    def write_meanwhile(fd, target, budget, counted):
        copy(fd, target, budget, counted)
        with open(folder / "01_setup.ipynb", "a") as late:
            late.write(" and more, after the check")

    monkeypatch.setattr(collect, "_copy_file", write_meanwhile)
    exchange.collect()
    assert exchange.collected() is None
    assert "changed while it was copied: 01_setup.ipynb changed while it was copied" in exchange.report()
