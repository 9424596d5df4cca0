"""Limits per user of the classroom, so that one student's fork bomb, memory bomb or full disk does
not stop the class (as The Littlest JupyterHub runs each user under systemd with limits):

- each user's server, and everything it starts (kernels, terminals, training runs), in cgroups of its
  own: memory (the kernel's OOM killer stops the biggest process of that user only), processes
  (a fork bomb hits the ceiling, the machine does not), CPU (an equal share under contention);
- each student's home a file system of its own with a fixed size (an ext4 image mounted on the
  home): a full home says "No space left on device" to that student alone.

The hub (root) makes the cgroups and puts each server in them before it drops to the user
(`LimitedSpawner`); stopping a server kills whatever is left in its cgroups.
"""

import asyncio
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Dict

from handson_lib.classroom.layout import ClassroomError

CGROUPS = Path("/sys/fs/cgroup")
#: The classroom's cgroups: <controller>/handson-classroom/<user> (v1) or handson-classroom/<user> (v2).
PARENT = "handson-classroom"


@dataclass(frozen=True)
class UserLimits:
    memory_bytes: int = 4 << 30     # a user's processes together
    processes: int = 512            # a user's processes and threads together
    cpu_weight: int = 100           # relative: every user the same share of the cores under contention
    home_bytes: int = 2 << 30       # a student's home

    def as_dict(self):
        return asdict(self)


def unified():
    """cgroup v2 only (one hierarchy), else v1 with a folder per controller."""
    return (CGROUPS / "cgroup.controllers").exists() and not (CGROUPS / "memory").is_dir()


def why_not_available():
    """None when the limits per user can be applied here, else what is missing."""
    if unified():
        controllers = (CGROUPS / "cgroup.controllers").read_text().split()
        missing = [c for c in ("memory", "pids", "cpu") if c not in controllers]
    else:
        missing = [c for c in ("memory", "pids", "cpu") if not os.access(CGROUPS / c, os.W_OK)]
    if missing:
        return f"no writable cgroup controller {', '.join(missing)} under {CGROUPS}"
    return None


def folders(user):
    """The user's cgroup folders."""
    if unified():
        return [CGROUPS / PARENT / user]
    return [CGROUPS / controller / PARENT / user for controller in ("memory", "pids", "cpu")]


def _write(folder, name, value, optional=False):
    try:
        (folder / name).write_text(str(value))
    except OSError:
        if not optional:   # swap accounting may be off
            raise


def prepare(user, limits: UserLimits):
    """The user's cgroups with their limits (as root, in the hub); their folders."""
    if unified():
        parent = CGROUPS / PARENT
        parent.mkdir(exist_ok=True)
        _write(parent, "cgroup.subtree_control", "+memory +pids +cpu")
        folder = parent / user
        folder.mkdir(exist_ok=True)
        _write(folder, "memory.max", limits.memory_bytes)
        _write(folder, "memory.swap.max", 0, optional=True)
        _write(folder, "pids.max", limits.processes)
        _write(folder, "cpu.weight", limits.cpu_weight)
        return [folder]
    memory, pids, cpu = folders(user)
    for folder in (memory, pids, cpu):
        folder.mkdir(parents=True, exist_ok=True)
    # memsw may not be below the memory limit: raised first when the limit grows, set again after.
    _write(memory, "memory.memsw.limit_in_bytes", limits.memory_bytes, optional=True)
    _write(memory, "memory.limit_in_bytes", limits.memory_bytes)
    _write(memory, "memory.memsw.limit_in_bytes", limits.memory_bytes, optional=True)
    _write(pids, "pids.max", limits.processes)
    _write(cpu, "cpu.shares", max(2, limits.cpu_weight * 1024 // 100))
    return [memory, pids, cpu]


def enter(paths, pid=None):
    for folder in paths:
        (Path(folder) / "cgroup.procs").write_text(str(pid or os.getpid()))


def members(user):
    pids = set()
    for folder in folders(user):
        try:
            pids.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
        except OSError:
            pass
    return pids


def _pids_folder(user):
    return folders(user)[0] if unified() else folders(user)[1]


def kill_all(user, rounds=100):
    """SIGKILL everything in the user's cgroups; the number of processes killed. No new process may
    start there meanwhile (pids.max 0: a fork bomb cannot outrun the killing), then the limit is
    given back."""
    pids = _pids_folder(user)
    try:
        limit = (pids / "pids.max").read_text().strip()
        _write(pids, "pids.max", 0)
    except OSError:
        limit = None
    killed = 0
    for _ in range(rounds):
        left = members(user)
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    if limit is not None:
        _write(pids, "pids.max", limit, optional=True)
    return killed


def events(user):
    """What the limits stopped so far: {'memory': OOM kills or failures, 'processes': forks refused}."""
    found = {}
    if unified():
        folder = folders(user)[0]
        for name, key, out in (("memory.events", "oom_kill", "memory"), ("pids.events", "max", "processes")):
            try:
                lines = dict(line.split() for line in (folder / name).read_text().splitlines())
                found[out] = int(lines.get(key, 0))
            except (OSError, ValueError):
                found[out] = 0
        return found
    memory, pids, _ = folders(user)
    try:
        oom = dict(line.split() for line in (memory / "memory.oom_control").read_text().splitlines())
        found["memory"] = int(oom.get("oom_kill", 0)) or int((memory / "memory.failcnt").read_text())
    except (OSError, ValueError):
        found["memory"] = 0
    try:
        found["processes"] = int((pids / "pids.events").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        found["processes"] = 0
    return found


def remove(user):
    kill_all(user)
    for folder in reversed(folders(user)):
        try:
            folder.rmdir()
        except OSError:
            pass


class LimitedSpawner(LocalProcessSpawner):
    """JupyterHub's local spawner with the server in the user's cgroups (made by the hub, as root,
    before the server drops to the user), and whatever is left there killed when it stops."""

    limits = Dict(help="UserLimits' fields by user name; '*' for everyone else").tag(config=True)

    def user_limits(self):
        return UserLimits(**self.limits.get(self.user.name, self.limits.get("*", {})))

    def make_preexec_fn(self, name):
        drop_privileges = super().make_preexec_fn(name)
        paths = prepare(name, self.user_limits())

        def preexec():
            enter(paths)
            drop_privileges()

        return preexec

    async def stop(self, now=False):
        await super().stop(now)
        # in a thread: the killing waits between rounds, the hub's loop must not
        killed = await asyncio.get_running_loop().run_in_executor(None, kill_all, self.user.name)
        if killed:
            self.log.info("killed %d process(es) left in %s's cgroups", killed, self.user.name)


# ----------------------------------------------------------------------------- homes of a fixed size

def home_image(state_root, user):
    return Path(state_root) / "homes" / f"{user}.ext4"


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == path for line in mounts)


def _run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise ClassroomError(f"`{' '.join(map(str, cmd))}` failed: {(result.stderr or result.stdout).strip()}")


def make_image(image, size_bytes, uid, gid):
    """An ext4 image of `size_bytes`, its space taken from the disk now (fallocate: a full disk later
    does not break it), its root folder owned by uid:gid and empty."""
    image.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.posix_fallocate(descriptor, 0, size_bytes)
    except OSError as error:
        os.close(descriptor)
        image.unlink()
        raise ClassroomError(f"no room for {image} ({size_bytes >> 20} MiB): {error.strerror}") from None
    os.close(descriptor)
    _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E", f"root_owner={uid}:{gid}", str(image)])
    with tempfile.TemporaryDirectory(prefix="handson-image-") as where:
        _run(["mount", "-o", "loop,nosuid,nodev", str(image), where])
        try:
            (Path(where) / "lost+found").rmdir()   # a fresh file system: nothing of anyone's in it yet
        finally:
            _run(["umount", where])


def grow_image(image, size_bytes):
    if image.stat().st_size < size_bytes:
        with open(image, "r+b") as grown:
            os.posix_fallocate(grown.fileno(), 0, size_bytes)
        _run(["e2fsck", "-p", "-f", str(image)])
        _run(["resize2fs", str(image)])


def mount_home(state_root, user, home, size_bytes, uid, gid):
    """The user's home on an ext4 image of `size_bytes` (made the first time, with what the home
    held copied in by the user's own rights: root never reads through a link of theirs); already
    mounted: nothing. True when it was mounted now."""
    if is_mounted(home):
        return False
    image = home_image(state_root, user)
    fresh = not image.exists()
    if fresh:
        image.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(image.parent, 0o700)   # the images: root's alone
        make_image(image, size_bytes, uid, gid)
        with tempfile.TemporaryDirectory(prefix=f"handson-home-{user}-") as where:
            os.chmod(where, 0o711)
            _run(["mount", "-o", "loop,nosuid,nodev", str(image), where])
            try:
                subprocess.run(["runuser", "-u", user, "--", "cp", "-a", "--no-preserve=ownership",
                                f"{home}/.", where], capture_output=True, text=True, timeout=600)
            finally:
                _run(["umount", where])
    else:
        grow_image(image, size_bytes)
    _run(["mount", "-o", "loop,nosuid,nodev", str(image), str(home)])
    os.chown(home, uid, gid)
    os.chmod(home, 0o700)
    return True


def mount_exchange(state_root, exchange, size_bytes, class_running):
    """The exchange on a file system of its own (students write it: filling it never fills the
    machine's disk, the hub's database or the gradebook). A class whose exchange has files already
    gets them copied in while none of its processes runs. True when it was mounted now."""
    if is_mounted(exchange):
        return False
    image = Path(state_root) / "exchange.ext4"
    fresh = not image.exists()
    if fresh:
        make_image(image, size_bytes, 0, 0)
        exchange.mkdir(parents=True, exist_ok=True)
        if any(exchange.iterdir()):
            if class_running:
                raise ClassroomError("the exchange moves to a file system of its own: `handson classroom down` "
                                     "first, so that nobody writes it meanwhile")
            with tempfile.TemporaryDirectory(prefix="handson-exchange-") as where:
                _run(["mount", "-o", "loop,nosuid,nodev", str(image), where])
                try:
                    _run(["cp", "-a", f"{exchange}/.", where])
                finally:
                    _run(["umount", where])
    else:
        grow_image(image, size_bytes)
    exchange.mkdir(parents=True, exist_ok=True)
    _run(["mount", "-o", "loop,nosuid,nodev", str(image), str(exchange)])
    return True


def unmount(folder):
    if is_mounted(folder):
        _run(["umount", str(folder)])
        return True
    return False
