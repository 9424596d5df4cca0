"""The grading sandbox: what a submission runs (its notebook's kernel and every process the kernel
starts: mpiexec, the ranks, the stand-in's workers) runs in bubblewrap (Debian's `bubblewrap`):

  - as the grading account (`handson-grader`, made on first use): never the instructor, never root,
    with no capability and no way to gain one (no_new_privs);
  - with no network: a network namespace of its own, holding only its loopback (MPI's TCP and
    shared memory still work);
  - seeing the system's programs and libraries, the course's Python environment, exactly the
    student edition's library (handson_lib.boundary) and the reference scripts read-only, and its own folder as a copy in a size-capped tmpfs; not the
    course folder (source/ with the hidden tests, the gradebook, the other students' folders), not
    the instructor's home, not the other sessions' files;
  - within limits: memory and processes of the whole submission (a cgroup of its own), and per
    process CPU time, open files and file size;
  - all of it ending with the kernel: a pid namespace, whose processes die with its first.

Trusted side only: `handson autograde` prepares a session (`prepare`) and nbgrader starts each
kernel through this module's launcher (`python -m handson_lib.autograder.sandbox kernel SETTINGS
CONNECTION_FILE`, the kernelspec `handson-sandbox`), which runs as root outside the sandbox, before
bwrap. The kernel talks to nbgrader over Unix sockets in a folder of the student's own (ZeroMQ's
ipc transport), since the sandbox has no network to reach nbgrader's.
"""

import contextlib
import grp
import importlib.util
import json
import os
import pwd
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from handson_lib import COURSE_ROOT, boundary, launch, settings

ACCOUNT = "handson-grader"
KERNEL_NAME = "handson-sandbox"
CGROUPS = Path("/sys/fs/cgroup")
#: Processes (threads count) of every sandbox of the machine together, and of the grading account:
#: whatever one submission's limit lets through, the machine keeps room for everyone else.
ALL_SANDBOXES_PROCESSES = 4096
#: What the sandbox sees of the system (read-only; links where the system has links: merged /usr).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc")
#: The timing slot's lock file inside a sandbox (its own /tmp).
SANDBOX_TIMING_LOCK = "/tmp/handson-timing.lock"
#: Variables that cross into the sandbox (the grader's settings, locale, threads); the rest of the
#: grader's environment (tokens, its HOME) stays out.
KEPT_VARIABLES = ("PATH", "LANG", "LANGUAGE", "TERM", "MPLBACKEND", "PYTHONUNBUFFERED", "PYTHONHASHSEED",
                  "CHAINERMN_FORCE_ABORT_ON_EXCEPTION")
KEPT_PREFIXES = ("HANDSON_", "LC_", "OMP_", "OPENBLAS_", "MKL_", "OMPI_MCA_")


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 4 << 30     # the submission's processes together (cgroup)
    processes: int = 256            # the submission's processes together (cgroup)
    cpu_seconds: int = 3600         # each process
    open_files: int = 4096          # each process
    file_bytes: int = 1 << 30       # each file written
    address_bytes: int = 8 << 30    # each process's address space: a huge allocation fails in the
                                    # process that asks (MemoryError), before the cgroup kills the kernel
    folder_bytes: int = 512 << 20   # the submission's folder (a tmpfs copy)
    tmp_bytes: int = 1 << 30        # /tmp
    own_bytes: int = 256 << 20      # the student's own folder in the session (a tmpfs: not the host's disk)


@dataclass
class Settings:
    """What the launcher needs, written by the trusted side into the session's folder."""
    uid: int
    gid: int
    readable: list                  # paths seen read-only, at their own place
    limits: dict = field(default_factory=lambda: asdict(Limits()))
    cgroup_prefix: str = ""         # cgroups of this session: <controller>/handson/<prefix>-<student>
    graded: list = None             # the assignment's files (paths in its folder): all of the submission
                                    # that is copied in (None: every file)


def why_not_available():
    """None when submissions can be graded in the sandbox here, else what is missing."""
    if os.geteuid() != 0:
        return ("it runs submissions as the grading account, which needs root: run handson autograde as root "
                "(sudo)")
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    probe = subprocess.run(["bwrap", *_namespaces(), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
                            "--", "true"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return f"bubblewrap cannot make its namespaces here ({probe.stderr.strip()[:300]})"
    missing = [c for c in ("memory", "pids") if not os.access(CGROUPS / c, os.W_OK)]
    if missing:
        return f"no writable cgroup controller {', '.join(missing)} under {CGROUPS} (the limits per submission)"
    return None


def account():
    """(uid, gid) of the grading account, made (a system account, no home, no login) when missing."""
    try:
        entry = pwd.getpwnam(ACCOUNT)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", "--user-group", ACCOUNT], check=True,
                       capture_output=True, text=True)
        entry = pwd.getpwnam(ACCOUNT)
    grp.getgrgid(entry.pw_gid)
    return entry.pw_uid, entry.pw_gid


def library_files(root=COURSE_ROOT):
    """The library a submission reads: exactly the student edition's (handson_lib.boundary), each
    file with its compiled copy where there is one. Not the autograder (the hidden tests' answer
    helpers, the judge, the synthetic classes' planted mistakes: the grader runs the grade cells in
    its own process), the authoring tools nor any other instructor-only module."""
    files = []
    for rel in boundary.student_library_files(root):
        path = Path(root) / rel
        files.append(path)
        if path.suffix == ".py" and Path(importlib.util.cache_from_source(path)).exists():
            files.append(Path(importlib.util.cache_from_source(path)))
    return files


def course_paths(root=COURSE_ROOT):
    """What of the course a submission needs read-only: the course's Python environment and its
    base interpreter, the student edition's library (`library_files`) and the data. Not
    solutions/ (the reference scripts, the notebooks' hidden tests), not the course folder, not
    the rest of the checkout."""
    paths = [Path(sys.prefix), Path(sys.base_prefix), *library_files(root)]
    data = Path(settings.current().data_dir or Path(root) / "data")
    if data.is_dir():
        paths.append(data)
    return [str(p) for p in paths]


def reference_scripts(root=COURSE_ROOT):
    """The reference solutions' scripts: seen by the paired timing alone (it runs the reference's
    steps beside the student's), never by a kernel or a student's run on its own."""
    return [str(p) for p in sorted((Path(root) / "solutions").glob("*.py"))]


def paired_settings_path(path):
    """The settings of the paired timing's sandbox, beside the session's (`path`)."""
    return Path(path).with_name("sandbox-paired.json")


def prepare(session, readable=(), limits=None, graded=None):
    """Make the session's sandbox: its settings (root-only; those of the paired timing beside
    them, with the reference scripts) and its kernelspec. `graded`: the assignment's files (paths
    in its folder), the only ones of a submission copied in (only the assignment's files are
    graded). Returns the settings."""
    uid, gid = account()
    session = Path(session)
    settings = Settings(uid, gid, [*course_paths(), *map(str, readable)],
                        asdict(limits or Limits()), cgroup_prefix=_cgroup_prefix(session),
                        graded=None if graded is None else sorted(map(str, graded)))
    path = session / "sandbox.json"
    path.write_text(json.dumps(asdict(settings)))
    paired = paired_settings_path(path)
    paired.write_text(json.dumps(asdict(replace(settings, readable=[*settings.readable, *reference_scripts()]))))
    for written in (path, paired):
        os.chmod(written, 0o600)
    spec = session / "jupyter" / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "handson_lib.autograder.sandbox", "kernel", str(path), "{connection_file}"],
        "display_name": "Python 3 (grading sandbox)", "language": "python",
        # A signal to the process nbgrader started (bwrap) would not reach the kernel inside: the
        # kernel interrupts itself on a message (a cell past its time limit).
        "interrupt_mode": "message"}))
    return settings


def _cgroup_prefix(session):
    """The prefix of a session's cgroups: its folder's name and a digest of its whole path, so that
    two sessions of the machine never share a cgroup (whose release kills what is in it)."""
    import hashlib
    return f"{Path(session).name}-{hashlib.sha256(str(Path(session).resolve()).encode()).hexdigest()[:8]}"


def for_student(session, settings, student):
    """(environment, nbgrader options, the student's own folder) of one student's grading: the
    folder holds the kernel's sockets and what the student's runs keep; it is the only host
    folder the sandbox writes."""
    own = Path(session) / f"student-{student}"
    own.mkdir(mode=0o700)
    # A tmpfs of its own: what the kernel writes there fills that, never the disk of the gradebook.
    _mount_tmpfs(own, settings.limits.get("own_bytes", Limits().own_bytes), f"mode=0700,uid={settings.uid},"
                 f"gid={settings.gid}")
    jupyter_path = os.pathsep.join(filter(None, [str(Path(session) / "jupyter"), os.environ.get("JUPYTER_PATH")]))
    env = {"JUPYTER_PATH": jupyter_path, "TMPDIR": str(own),  # nbgrader writes the connection file in TMPDIR
           # ... which must not move the grader's timing slot into the student's folder: the
           # machine's one, named (inside the sandbox the kernel has its own, `command`).
           launch.TIMING_LOCK_ENV: str(launch.TIMING_LOCK)}
    options = [f"--Execute.kernel_name={KERNEL_NAME}", "--KernelManager.transport=ipc",
               f"--KernelManager.ip={own / 'kernel'}"]
    return env, options, own


#: The cgroups of one student: the kernel's (ROLES[0], frozen while the grader times anything of
#: this student's, nbgrader_ext._judged_runs), the checks' runs (the student's side of the paired
#: timing included) and the reference's side of the paired timing, each with the limits.
ROLES = ("", "runs", "reference")


def cgroup_name(settings, own, role=""):
    return f"{settings.cgroup_prefix}-{Path(own).name}" + (f"-{role}" if role else "")


def _cgroup(controller, settings, own, role=""):
    return CGROUPS / controller / "handson" / cgroup_name(settings, own, role)


@contextlib.contextmanager
def frozen_kernel(settings_path, own, wait=5.0):
    """While the grader runs a report cell (its checks' runs, the paired timing), the student's
    kernel and everything it started are stopped (cgroup freezer): nothing of the submission
    runs beside what is timed. Thawed afterwards, whatever happened."""
    settings = Settings(**json.loads(Path(settings_path).read_text()))
    state = _cgroup("freezer", settings, own) / "freezer.state"
    if not state.exists():
        yield False
        return
    state.write_text("FROZEN")
    deadline = time.monotonic() + wait
    while state.read_text().strip() != "FROZEN" and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield True
    finally:
        state.write_text("THAWED")


def thaw(procs):
    """Thaw the sandbox freezer cgroups of `procs` (psutil processes): a frozen process takes no
    SIGKILL, so whoever must stop a kernel frozen for a report cell (the grader killed half-way)
    thaws it first."""
    for proc in procs:
        try:
            lines = Path(f"/proc/{proc.pid}/cgroup").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if "freezer" in controllers.split(",") and path.startswith("/handson/"):
                try:
                    (CGROUPS / "freezer" / path.lstrip("/") / "freezer.state").write_text("THAWED")
                except OSError:
                    pass


def _mount_tmpfs(path, size, options):
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},{options},nosuid,nodev", "tmpfs", str(path)],
                   check=True, capture_output=True)


def release(settings, own, wait=10.0):
    """Stop what is left of a student's sandbox (the kernel's pid namespace ends it: this is for a
    kernel nbgrader could not stop), remove the student's cgroups and unmount the tmpfs of the
    report cells' runs and of the student's own folder."""
    runs = Path(own).parent / ("runs-" + Path(own).name.removeprefix("student-"))
    for folder in (runs, Path(own)):
        if os.path.ismount(folder):
            subprocess.run(["umount", "--lazy", str(folder)], capture_output=True)
    freezer = _cgroup("freezer", settings, own)
    if freezer.exists():   # a frozen process takes no SIGKILL until it is thawed
        try:
            (freezer / "freezer.state").write_text("THAWED")
        except OSError:
            pass
    for role in ROLES:
        pids = _cgroup("pids", settings, own, role)
        deadline = time.monotonic() + wait
        while pids.exists():
            try:
                left = [int(p) for p in (pids / "cgroup.procs").read_text().split()]
            except OSError:
                left = []
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                pids.rmdir()
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        for controller in ("memory", "freezer", "cpu"):
            try:
                _cgroup(controller, settings, own, role).rmdir()
            except OSError:
                pass


def _namespaces():
    # No user namespace: bwrap runs as root and the sandbox drops to the grading account itself.
    return ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session"]


def _parents(path, made=None):
    """bwrap makes missing parents of a mount point root-only: make them readable first (those
    not in `made` yet, which collects them)."""
    args, parts = [], []
    for part in Path(path).parent.parts[1:]:
        parts.append(part)
        folder = "/" + "/".join(parts)
        if made is None or folder not in made:
            args += ["--perms", "0755", "--dir", folder]
            if made is not None:
                made.add(folder)
    return args


def command(settings, argv, folder, own, fds, cwd=None):
    """The bwrap command that runs `argv` in the sandbox with `folder` (the notebook's; None: none)
    as a size-capped copy and `own` (the one folder it may write) writable, in `cwd` (default: the folder);
    `fds` collects the descriptors of the files copied in (the caller passes them to bwrap)."""
    limits = settings.limits
    args = ["bwrap", *_namespaces(), "--clearenv"]
    for name, value in os.environ.items():
        if name in KEPT_VARIABLES or name.startswith(KEPT_PREFIXES):
            args += ["--setenv", name, value]
    args += ["--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp", "--setenv", "USER", ACCOUNT,
             "--setenv", "MPLCONFIGDIR", "/tmp/matplotlib",
             # A timing slot of its own, in its own /tmp: a submission can neither hold the
             # machine's (the grader takes that one for its checks' runs) nor wait for it.
             "--setenv", launch.TIMING_LOCK_ENV, SANDBOX_TIMING_LOCK]
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    # /tmp and /dev/shm of its own, writable, capped (the stand-in's shared arrays, MPI's shared memory).
    args += ["--proc", "/proc", "--dev", "/dev"]
    for tmp in ("/tmp", "/dev/shm"):
        args += ["--size", str(limits["tmp_bytes"]), "--perms", "1777", "--tmpfs", tmp]
    made = set()   # the library is one mount a file: each parent folder made once
    for path in sorted(set(settings.readable)):
        if os.path.exists(path):
            args += _parents(path, made) + ["--ro-bind", path, path]
    args += _parents(own) + ["--bind", str(own), str(own)]
    folder = Path(folder) if folder is not None else None   # None: no copy of the submission (the reference's side)
    if folder is not None:
        args += _parents(folder) + ["--size", str(limits["folder_bytes"]), "--perms", "0777", "--tmpfs", str(folder)]
    for path in _copied(folder, settings.graded) if folder is not None else []:
        if path.is_dir():
            args += ["--perms", "0777", "--dir", str(path)]
        else:
            fd = _notebook_without_grade_cells(path) if path.suffix == ".ipynb" else os.open(path, os.O_RDONLY)
            fds.append(fd)
            args += ["--perms", "0666", "--file", str(fd), str(path)]
    args += ["--chdir", str(cwd or folder or own), "--", "/usr/bin/setpriv", f"--reuid={settings.uid}", f"--regid={settings.gid}",
             "--clear-groups", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--", *argv]
    return args


def _notebook_without_grade_cells(path):
    """A descriptor of `path`'s notebook with every grade cell's source left out: nbgrader writes the
    notebook it executes with the grade cells restored, hidden tests included, and the grader runs
    those cells itself (judge), so the kernel's copy needs none of them (a review's answer cell read
    the hidden tests' answers from it). A file that is not a notebook comes in empty."""
    try:
        notebook = json.loads(Path(path).read_text(encoding="utf-8"))
        for cell in notebook.get("cells", []):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade") and not meta.get("solution"):
                cell["source"] = ""
        text = json.dumps(notebook)
    except (OSError, ValueError, AttributeError, TypeError):
        text = ""
    fd = os.memfd_create("notebook", 0)
    os.write(fd, text.encode("utf-8"))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _copied(folder, graded=None):
    """What of a submission's `folder` the sandbox copies in: its plain files and folders (never a
    link: it would point outside the copy), only the assignment's files (`graded`, paths in the
    folder; None: all) and the folders that hold them."""
    wanted = None if graded is None else {Path(g) for g in graded}
    holding = None if wanted is None else {parent for g in wanted for parent in g.parents}
    copied = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if path.is_symlink() or not (path.is_dir() or path.is_file()):
            continue
        if wanted is None or relative in (holding if path.is_dir() else wanted):
            copied.append(path)
    return copied


#: What nbgrader's exchange puts in every submission's folder beside the student's files.
NBGRADER_FILES = ("timestamp.txt", "submission_secret.txt")


def left_out(folder, graded):
    """The files of a submission's `folder` the sandbox does not copy in: not the assignment's
    (nbgrader's own files of a collected submission aside)."""
    kept = set(_copied(Path(folder), graded))
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*")
                  if (p.is_file() or p.is_symlink()) and p not in kept and str(p.relative_to(folder)) not in NBGRADER_FILES)


#: The period of a CPU quota (cgroup v1 cpu.cfs_period_us): the quota is that many cores of it.
CPU_PERIOD_US = 100_000


def _enter_cgroups(settings, own, role="", cores=0):
    """Put this process (and so everything it starts) in the student's memory and pids cgroups of
    `role` (ROLES: the kernel's, the checks' runs, the reference's side), below one that holds
    every sandbox of the machine; the kernel's in a freezer cgroup too; a run's in a cpu cgroup
    whose quota is `cores` cores (0: none), so that a side of the paired timing uses no more cores
    than the reference's side may."""
    limits = settings.limits
    (CGROUPS / "pids" / "handson").mkdir(exist_ok=True)
    (CGROUPS / "pids" / "handson" / "pids.max").write_text(str(ALL_SANDBOXES_PROCESSES))
    controllers = [("memory", {"memory.limit_in_bytes": limits["memory_bytes"],
                               "memory.memsw.limit_in_bytes": limits["memory_bytes"]}),
                   ("pids", {"pids.max": limits["processes"]})]
    if not role and (CGROUPS / "freezer").is_dir():
        controllers.append(("freezer", {}))
    if role and (CGROUPS / "cpu").is_dir():
        controllers.append(("cpu", {"cpu.cfs_period_us": CPU_PERIOD_US,
                                    "cpu.cfs_quota_us": int(cores) * CPU_PERIOD_US if cores else -1}))
    for controller, files in controllers:
        path = _cgroup(controller, settings, own, role)
        path.mkdir(parents=True, exist_ok=True)
        for name, value in files.items():
            try:
                (path / name).write_text(str(value))
            except OSError:
                if name != "memory.memsw.limit_in_bytes":   # swap accounting may be off
                    raise
        (path / "cgroup.procs").write_text(str(os.getpid()))


def _set_rlimits(limits):
    # RLIMIT_NPROC counts the grading account's processes on the whole machine (every sandbox):
    # a second fence behind the cgroups.
    for which, value in ((resource.RLIMIT_CPU, limits["cpu_seconds"]), (resource.RLIMIT_NOFILE, limits["open_files"]),
                         (resource.RLIMIT_FSIZE, limits["file_bytes"]), (resource.RLIMIT_AS, limits["address_bytes"]),
                         (resource.RLIMIT_NPROC, ALL_SANDBOXES_PROCESSES)):
        resource.setrlimit(which, (value, value))


def kernel_main(settings_path, connection_file):
    """nbgrader's kernel, in the sandbox: runs as root in the notebook's folder, then execs bwrap."""
    settings = Settings(**json.loads(Path(settings_path).read_text()))
    own = Path(connection_file).parent
    os.chown(connection_file, settings.uid, settings.gid)   # the kernel reads it as the grading account
    _enter_cgroups(settings, own)
    _set_rlimits(settings.limits)
    fds = []
    args = command(settings, [sys.executable, "-m", "ipykernel_launcher", "-f", connection_file],
                   Path.cwd(), own, fds)
    for fd in fds:
        os.set_inheritable(fd, True)
    os.execvp(args[0], args)


def judged_runs(session, student):
    """The folder where the report cells' checks keep this student's runs (written by the runs,
    in their sandbox, never seen by the kernel's), and the grader's own memo of them."""
    runs = Path(session) / f"runs-{student}"
    runs.mkdir(mode=0o755)   # the grader's: a run writes only in the folder made for it (runs.run_folder)
    # A tmpfs of its own: what the runs write fills that, never the machine's disk.
    _mount_tmpfs(runs, Limits().tmp_bytes, "mode=0755")
    memo = Path(session) / f"memo-{student}"
    memo.mkdir(mode=0o700)
    return runs, memo


def mounts_below(folder):
    """The mount points below `folder` (deepest first), from /proc/self/mountinfo."""
    folder = os.path.realpath(folder).rstrip("/") + "/"
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            # The mount point is the fifth field, with space, tab, newline and backslash as octal escapes.
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split(" ")[4])
            if point.startswith(folder):
                points.append(point)
    return sorted(points, key=len, reverse=True)


def remove_session(folder, print_fn=print):
    """Remove a grading session's folder whatever a submission left there: first every mount below
    it (a student's tmpfs), then the rest with `rm -rf --one-file-system` (a tree of any depth:
    shutil.rmtree recurses, and 3000 nested folders made it raise). Never raises: a failure is
    said, and the grading's result stands."""
    try:
        for point in mounts_below(folder):
            subprocess.run(["umount", "--lazy", point], capture_output=True)
        res = subprocess.run(["rm", "-rf", "--one-file-system", "--", str(folder)], capture_output=True, text=True)
        if os.path.lexists(folder):
            print_fn(f"The grading session's folder {folder} could not be removed (remove it by hand): "
                     f"{res.stderr.strip()[-300:]}")
    except Exception as error:   # the cleanup's, never the grading's
        print_fn(f"The grading session's folder {folder} could not be removed (remove it by hand): "
                 f"{type(error).__name__}: {error}")



#: What `run` gets for FOLDER when the run sees no copy of the submission (the reference's side).
NO_FOLDER = "-"


def run_main(settings_path, own, role, writable, folder, cwd, cores, argv):
    """A run started by a check of the grader (a report cell): in the student's cgroups of `role`
    (a CPU quota of `cores` cores, 0: none), the submission's folder copied in (none: NO_FOLDER),
    one folder writable (the run's own), nothing of the kernel's."""
    settings = Settings(**json.loads(Path(settings_path).read_text()))
    if role not in ROLES[1:]:
        raise SystemExit(f"unknown role {role!r}")
    _enter_cgroups(settings, own, role, int(cores))
    _set_rlimits(settings.limits)
    fds = []
    inside = cwd if Path(cwd).resolve().is_relative_to(Path(writable).resolve()) else folder
    if folder == NO_FOLDER:
        folder = None
        inside = cwd if inside == NO_FOLDER else inside
    args = command(settings, argv, folder, writable, fds, cwd=inside)
    for fd in fds:
        os.set_inheritable(fd, True)
    os.execvp(args[0], args)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "kernel":
        kernel_main(sys.argv[2], sys.argv[3])
    elif len(sys.argv) > 10 and sys.argv[1] == "run" and sys.argv[9] == "--":
        run_main(*sys.argv[2:9], sys.argv[10:])
    else:
        sys.exit("usage: python -m handson_lib.autograder.sandbox kernel SETTINGS CONNECTION_FILE\n"
                 "       python -m handson_lib.autograder.sandbox run SETTINGS OWN ROLE WRITABLE FOLDER CWD CORES -- "
                 "COMMAND...")
