"""The paired timing, run and timed from outside (the grader's side): the reference's training step
and the student's, taken in turn, each on the grader's own clock.

Two launches of the stepper (handson_lib.harness.stepper), each on `np` MPI ranks (Task #2) or as
one process with its own workers (Task #1): the reference's script in one, the student's in the
other; under the course's grader, each in a sandbox of its own (each launch states its
launch.Confinement), so that the student's processes never see the reference's processes, files
or script. Both start up side by side and wait. This coordinator then tells one launch's ranks to
take one training step (forward, backward, allreduce, update), A B B A A B ...: the machine's
drift and a neighbour's burst weigh on both alike. A step's time runs from the order to the last
rank's answer. Start-up, evaluation and reports are not timed: correctness, reports only on rank
0 included, is judged before (handson_lib.checking.checks). Its limits: checking.timing.settings.

What the launches say is evidence, never a time. The coordinator weighs it against what it sees
itself, from outside the launches:
  - the CPU time of each launch's processes (/proc, `launch.tree_cpu`): a student's launch that
    works while the reference's step is timed (an answer before its work is done, a helper left
    computing), or whose steps take far less CPU than the reference's for as many images (a step
    that skips its work), is "tampering suspected", for the instructor to review;
  - the images of a step: the batch size the timing asks (--batchsize) times the ranks. A rank
    whose iterator says another batch size stops the timing, with what it said.
"""

import hmac
import json
import os
import secrets
import select
import socket
import statistics
import sys
import time
from pathlib import Path

from handson_lib import launch
from handson_lib import settings as course_settings
from handson_lib.checking.runs import (YIELD_WHEN_IDLE, defuse, log_part, read_snapshots, run_folder, run_limit,
                                       staged, transport)
from handson_lib.checking.timing.observation import WHO, PairedObservation, step_order
from handson_lib.checking.timing.settings import SCORED
from handson_lib.messages import tr


#: The launcher of each side (`python -m`); its first argument names the side. The sandbox lets
#: only the reference's side read the reference scripts: each Side states its launch.Confinement.
STEPPER_MODULE = "handson_lib.harness.stepper"


#: The socket each side's ranks connect to, in the side's folder (their working directory).
SOCKET_NAME = "control.sock"


#: The most a rank's introduction may hold.
HELLO_BYTES = 1024


def batch_size_of(args):
    """The --batchsize the timing asks of each rank, or None."""
    args = list(map(str, args))
    for i, arg in enumerate(args[:-1]):
        if arg in ("--batchsize", "-b"):
            return int(args[i + 1])
    return None


class TimingError(Exception):
    """The timing cannot go on; the message says why (the grader's words, never a launch's)."""


class Side:
    """One launch of the stepper and the grader's end of its ranks' sockets: `ranks` MPI ranks,
    or one process (None: a script that starts its own workers, Task #1's)."""

    def __init__(self, who, script, ranks, args, folder, env, isolated=None, name=None, cores=None):
        self.who, self.np, self.token = who, ranks or 1, secrets.token_hex(16)
        self.name = name or side_name(who)
        self.ranks, self.batch, self._pending = {}, {}, {}
        folder.mkdir()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Bound through the folder's descriptor: the folder's path may pass a socket path's 108 bytes.
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self.listener.bind(f"/proc/self/fd/{folder_fd}/{SOCKET_NAME}")
        finally:
            os.close(folder_fd)
        if launch.wrapped():   # the sandbox's ranks run as the grading account
            os.chmod(folder, 0o777)
            os.chmod(folder / SOCKET_NAME, 0o777)
        self.listener.listen(4 * self.np)
        self.listener.setblocking(False)
        # The reference's interpreter isolated (-I): neither its working directory nor a variable
        # puts a folder on its sys.path (a module planted there would run with the reference's reads).
        isolated = ["-I", "-u"] if (who == "reference" if isolated is None else isolated) else []
        # The script alone in the side's folder (only the assignment's files are graded: checking.runs.staged).
        argv = [*isolated, "-m", STEPPER_MODULE, who, SOCKET_NAME, self.token, str(staged(script, folder)), *args,
                "--out", str(folder / "result")]
        if ranks:
            cmd, env = launch.mpiexec_command(ranks, argv, extra_args=["--output", "tag"]), launch.local_mpi_env(env)
        else:
            cmd, env = [sys.executable, *argv], {**env, "PYTHONUNBUFFERED": "1"}
        # What the sandbox gives it, stated here: the reference's side reads the reference scripts
        # and no submission; each side writes its own folder only.
        confinement = launch.Confinement(role="reference" if who == "reference" else "runs", own_folder=True,
                                         cores=cores or self.np)
        self.launched = launch.Launched(cmd, env, cwd=str(folder), confinement=confinement)

    @property
    def ready(self):
        return len(self.ranks) == self.np

    def ended(self):
        return self.launched.proc.poll() is not None

    def cpu(self):
        return launch.tree_cpu(self.launched.proc.pid) or 0.0

    def waiting_on(self):
        return [self.listener, *self._pending]

    def take(self, ready):
        """Accept the connections and read the introductions that `ready` (select's) holds."""
        if self.listener in ready:
            try:
                while True:
                    conn, _ = self.listener.accept()
                    conn.setblocking(False)
                    self._pending[conn] = b""
            except BlockingIOError:
                pass
        for conn in [c for c in self._pending if c in ready]:
            try:
                data = conn.recv(HELLO_BYTES)
            except OSError:
                data = b""
            buffer = self._pending[conn] + data
            if not data or len(buffer) > HELLO_BYTES:
                self._drop(conn)
            elif b"\n" in buffer:
                del self._pending[conn]
                self._introduce(conn, buffer.split(b"\n", 1)[0])
            else:
                self._pending[conn] = buffer

    def _drop(self, conn):
        self._pending.pop(conn, None)
        conn.close()

    def _introduce(self, conn, line):
        """Keep a connection that knows this side's token and names a rank not yet seen."""
        try:
            hello = json.loads(line)
            known = hmac.compare_digest(str(hello["token"]).encode(), self.token.encode())
            rank = hello["rank"]
        except (ValueError, KeyError, TypeError, AttributeError):
            known, rank = False, None
        nonce = hello.get("nonce") if known else None
        if not known or not isinstance(rank, int) or not 0 <= rank < self.np or rank in self.ranks \
                or not isinstance(nonce, str) or len(nonce) > 64:
            conn.close()
            return
        conn.setblocking(True)
        # The coordinator proves it knows the token too: a rank obeys no one else.
        conn.sendall(proof(self.token, nonce).encode() + b"\n")
        self.ranks[rank], self.batch[rank] = conn, (hello.get("size"), hello.get("batch"))

    def step(self, limit):
        """One training step on every rank: the order, then every rank's answer (at most `limit`
        seconds)."""
        for conn in self.ranks.values():
            conn.sendall(b"s")
        waiting = set(self.ranks.values())
        deadline = time.monotonic() + limit
        while waiting:
            left = deadline - time.monotonic()
            ready = select.select(list(waiting), [], [], max(0.0, left))[0] if left > 0 else []
            if not ready:
                raise TimingError(tr("{side}: a training step took more than {limit:.0f} s", side=self.name,
                                     limit=limit))
            for conn in ready:
                if conn.recv(1) != b"d":
                    raise TimingError(tr("{side}: a rank stopped answering in the middle of its training steps",
                                         side=self.name))
                waiting.discard(conn)

    def close(self):
        for conn in [*self.ranks.values(), *self._pending]:
            try:
                conn.sendall(b"q")
            except OSError:
                pass
            conn.close()
        self.listener.close()


def proof(token, nonce):
    """What the coordinator answers a rank's introduction: HMAC-SHA256 of the rank's nonce under
    the side's token (handson_lib.harness.stepper checks it)."""
    return hmac.new(token.encode(), nonce.encode(), "sha256").hexdigest()


def side_name(who):
    return tr("the reference's launch") if who == "reference" else tr("your launch")


def _connect(sides, images_per_rank, deadline, ticker=None, settings=SCORED):
    """Wait until every rank of both sides has introduced itself, then check what they said. Once
    the reference's launch is ready, the student's has `student_connect_factor` times its start-up."""
    started, reference_start_up = time.monotonic(), None
    while not all(side.ready for side in sides.values()):
        if ticker is not None:
            ticker.tick(lambda seconds: tr("  ... {seconds:.0f} s: both launches starting up", seconds=seconds))
        if sides["reference"].ready and not sides["student"].ready:
            if reference_start_up is None:
                reference_start_up = time.monotonic() - started
            allowed = max(settings.student_connect_floor, settings.student_connect_factor * reference_start_up)
            if time.monotonic() - started > allowed:
                raise TimingError(tr("your launch did not reach its training steps within {allowed:.0f} s ({factor:.0f} "
                                     "times the reference's start-up, at least {floor:.0f} s)", allowed=allowed,
                                     factor=settings.student_connect_factor,
                                     floor=settings.student_connect_floor))
        for side in sides.values():
            if side.ended() and not side.ready:
                raise TimingError(tr("{side} ended before its training steps (exit status {code})",
                                     side=side.name, code=side.launched.proc.returncode))
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimingError(tr("the launches did not reach their training steps in time"))
        waiting = [s for side in sides.values() for s in side.waiting_on()]
        ready = select.select(waiting, [], [], min(0.5, left))[0]
        for side in sides.values():
            side.take(ready)
    for side in sides.values():
        np = side.np
        for rank, (size, batch) in sorted(side.batch.items()):
            if size != np:
                raise TimingError(tr("{side}: rank {rank} sees {size} rank(s), not {np}", rank=rank,
                                     side=side.name, size=size, np=np))
            if images_per_rank is not None and batch != images_per_rank:
                raise TimingError(tr("{side}: rank {rank} trains on {batch} images per step; the timing runs it "
                                     "with --batchsize {asked}", rank=rank, side=side.name,
                                     batch=batch, asked=images_per_rank))


def student_limits(reference_steps, step_limit, settings=SCORED):
    """(the most seconds the student's next step may take, the most all its steps may take) after
    the reference's steps so far (with `connect_limit`: what bounds the slot's hold)."""
    if not reference_steps:
        return step_limit, float("inf")
    one = max(settings.student_step_floor, settings.student_step_factor * statistics.median(reference_steps))
    return min(step_limit, one), max(settings.student_total_floor, settings.student_total_factor * sum(reference_steps))


def _time_steps(sides, steps, step_limit, ticker=None, settings=SCORED):
    """({who: [seconds of each timed step]}, {who: {"own": CPU s, "waiting": CPU s}}, the cores the
    rest of the machine kept busy meanwhile): each side's CPU read once between two steps, so every
    moment of the timed steps is counted for one of them.
    The student's steps are bounded by the reference's (student_limits)."""
    times = {who: [] for who in WHO}
    every = {who: [] for who in WHO}   # warm-up steps included: what bounds the student's
    cpu = {who: {"own": 0.0, "waiting": 0.0} for who in WHO}
    before = {w: sides[w].cpu() for w in WHO}
    machine = {}
    for step in range(settings.warmup_steps + steps):
        if ticker is not None:
            ticker.tick(lambda seconds: tr("  ... {seconds:.0f} s: {done} of {steps} steps of each launch timed",
                                           seconds=seconds, done=max(0, step - settings.warmup_steps), steps=steps))
        if step == settings.warmup_steps:
            machine = {"busy": launch.machine_busy_seconds(), "at": time.perf_counter(), "load": _load()}
        for who in step_order(step):
            other = WHO[1 - WHO.index(who)]
            limit, total = step_limit, float("inf")
            if who == "student":
                limit, total = student_limits(every["reference"], step_limit, settings)
                limit = min(limit, max(0.0, total - sum(every["student"])))
            started = time.perf_counter()
            try:
                sides[who].step(limit)
            except TimingError:
                if who == "student" and sum(every["student"]) + limit >= total:
                    raise TimingError(tr("your launch: its training steps took more than {total:.0f} s in all ({factor:.0f} "
                                         "times the reference's, at least {floor:.0f} s): the timing stops there",
                                         total=total, factor=settings.student_total_factor,
                                         floor=settings.student_total_floor)) from None
                raise
            seconds = time.perf_counter() - started
            every[who].append(seconds)
            after = {w: sides[w].cpu() for w in WHO}
            if step >= settings.warmup_steps:
                times[who].append(seconds)
                cpu[who]["own"] += after[who] - before[who]
                cpu[other]["waiting"] += after[other] - before[other]
            before = after
    busy, others = launch.machine_busy_seconds(), None
    if machine.get("busy") is not None and busy is not None:
        # The cores that everything else on the machine kept busy over the timed steps: its load.
        ours = sum(c["own"] + c["waiting"] for c in cpu.values())
        others = max(0.0, busy - machine["busy"] - ours) / max(1e-6, time.perf_counter() - machine["at"])
    load = [v for v in (machine.get("load"), _load()) if v is not None]
    return times, cpu, others, (max(load) if load else None)


def _load():
    """The machine's 1-minute load average, as `uptime` shows it (None where the system says none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def suspicions(times, cpu, np, settings=SCORED):
    """What the grader's own view of the student's launch contradicts ([] when nothing); `np`: the
    ranks or devices of a step (the cores it keeps busy)."""
    found = []
    allowed = settings.waiting_share * np * sum(times["reference"]) + settings.waiting_floor
    if cpu["student"]["waiting"] > allowed:
        found.append(tr("your processes used {used:.1f} CPU-seconds while the reference's steps were timed (at "
                        "most {allowed:.1f} expected; the reference's used {theirs:.1f} during yours): work done "
                        "outside your own timed steps", used=cpu["student"]["waiting"], allowed=allowed,
                        theirs=cpu["reference"]["waiting"]))
    per_step = {who: cpu[who]["own"] / max(1, len(times[who])) for who in WHO}
    if per_step["reference"] > 0 and per_step["student"] < settings.work_share * per_step["reference"]:
        found.append(tr("your training steps used {mine:.3f} CPU-seconds each, the reference's {theirs:.3f} for "
                        "as many images: a step that skips its work", mine=per_step["student"],
                        theirs=per_step["reference"]))
    return found


def run_paired_mpi(reference, script, np, args, steps=None, timeout=300, stall=None, part=None):
    """Time the training steps of `reference` and `script` in turn, each launched on `np` ranks,
    alone on the machine (the timing slot). `timeout` bounds the whole; `stall` one step."""
    return run_paired(reference, script, args, ranks=np, steps=steps, timeout=timeout, stall=stall, part=part)


def _launches(reference, script, args, ranks, devices, own_baseline):
    """({who: (script, ranks, args, isolated, name)}, {who: the cores a step keeps busy}) of the
    two sides: the reference's and the student's, or (self mode) the student's script on both."""
    width = ranks or devices   # the cores a step keeps busy, and the iterators it draws from
    if own_baseline is None:
        return {"reference": (reference, ranks, args, None, None), "student": (script, ranks, args, None, None)}, \
            {who: width for who in WHO}
    return {"reference": (script, own_baseline.ranks, own_baseline.args, False, own_baseline.name),
            "student": (script, ranks, args, False, None)}, \
        {"reference": own_baseline.ranks or own_baseline.devices, "student": width}


def _stop(sides, error, settings):
    """Tell both sides to quit; give them a moment to end on their own (none after an error)."""
    for side in sides.values():
        side.close()
    for side in sides.values():
        if not error:
            try:
                side.launched.proc.wait(timeout=settings.goodbye_seconds)
            except Exception:
                pass
        side.launched.stop()


def _with_last_lines(error, sides):
    """The error with the student's launch's last lines (never the reference's under the autograder)."""
    student = sides.get("student")
    if error and student is not None:
        error += "\n" + tr("{side}, its last lines:", side=student.name) + "\n" + \
            student.launched.output()[-1500:].rstrip()
    if error and "reference" in sides and not course_settings.current().grader.autograding:
        error += "\n" + tr("{side}, its last lines:", side=sides["reference"].name) + "\n" + \
            sides["reference"].launched.output()[-1500:].rstrip()
    return error


def run_paired(reference, script, args, ranks=None, devices=1, steps=None, timeout=300, stall=None, part=None,
               own_baseline=None, say=None, settings=SCORED):
    """Time the training steps of `reference` and `script` in turn, alone on the machine (the
    timing slot): each launched on `ranks` MPI ranks, or (None) as one process training on
    `devices` devices (Task #1: its workers are its own processes). `timeout` bounds the whole;
    `stall` one step; `say` is told how far it got every 10 s; `settings` (a PairedTiming) the
    rest, `steps` (timed steps of each side) included unless given.

    `own_baseline` (self mode, the student's own check): a Baseline, the student's script itself
    on fewer ranks or devices in the reference's place; both launches are the student's own, so
    neither is isolated nor suspected of anything."""
    timeout, steps = run_limit(timeout), settings.steps if steps is None else steps
    images_per_rank = batch_size_of(args)
    launches, widths = _launches(reference, script, args, ranks, devices, own_baseline)
    error, times, cpu, sides, others, load = "", {}, {}, {}, None, None
    with run_folder("handson-paired-") as tmp, launch.timing_slot(True) as slot:
        # Its limits start now that the slot is held, not while it waited for it.
        started = time.monotonic()
        ticker = launch.Ticker(say)
        env = course_settings.child_env(changes={"slot_held": True}, MPLBACKEND="Agg", **YIELD_WHEN_IDLE, **transport())
        try:
            for who, (path, side_ranks, side_args, isolated, name) in launches.items():
                # Each side may use as many cores as its step keeps busy (its CPU quota in the sandbox).
                sides[who] = Side(who, path, side_ranks, side_args, Path(tmp) / who, env, isolated, name,
                                  cores=widths[who])
            _connect(sides, images_per_rank, started + min(timeout, settings.connect_limit), ticker, settings)
            times, cpu, others, load = _time_steps(sides, steps, stall or settings.step_limit, ticker, settings)
        except TimingError as exc:
            error = str(exc)
        except OSError as exc:
            error = tr("the timing's connection to a launch failed: {error}", error=exc)
        finally:
            _stop(sides, error, settings)
        defuse(tmp)
        kept = _kept(Path(tmp) / "student") if times and not error else {}
    seconds = time.monotonic() - started
    error = _with_last_lines(error, sides)
    found = suspicions(times, cpu, widths["student"], settings) if times and own_baseline is None else []
    obs = PairedObservation(
        widths["student"], times, {who: (images_per_rank or 0) * widths[who] for who in WHO}, error, seconds,
        {"waited": round(slot.waited, 2), "contended": slot.contended, "stalled": False, "stall": stall,
         "others_cores": None if others is None else round(others, 2), "cores": os.cpu_count(),
         "load": None if load is None else round(load, 1)},
        cpu, found, kept)
    log_part(part, seconds, waited=obs.progress["waited"], contended=slot.contended)
    return obs


def _kept(folder):
    """The parameters the student's launch kept after its steps (harness.stepper), read as untrusted."""
    try:
        return read_snapshots(folder)
    except Exception:   # whatever a launch left: no parameters, so its steps are not credited
        return {}
