"""The fresh process in which a grade cell calls the student's functions (`AnswerCalls`), and
what an answer may weigh: the grader's side of harness.answer_call (trusted side only)."""

import collections
import contextlib
import os
import select
import subprocess
import sys
import threading
import time

from handson_lib import settings
from handson_lib.harness.answer_call import HEADER, pack
from handson_lib.harness.codec import encode

#: The most a kernel answer may weigh (its JSON text).
MAX_ANSWER_CHARS = 32 << 20
#: The most lists and objects an answer may hold (an array's rows count one each): json.loads
#: builds them all before the codec checks anything.
MOST_ANSWER_CONTAINERS = 1 << 20
#: The fresh process of a hidden test's `on_answers` call and of a grade cell's calls of the
#: student's functions (`python -m`), and the seconds a call may take (the answer cells' run too).
ANSWER_CALL_MODULE = "handson_lib.harness.answer_call"
ANSWER_CALL_SECONDS = 120
#: How long a grade cell's process of the answer cells may take to end by itself at the cell's end.
STOP_SECONDS = 2


class KernelAnswerError(Exception):
    """The kernel did not answer a request (a name it lacks, a function that raised or hung)."""


class _NoAnswer(Exception):
    """The answer cells' process gave no answer: "time" (past its limit) or "ended"."""


class AnswerCalls:
    """The fresh process in which a grade cell calls the student's functions (harness.answer_call
    --serve; in the sandbox when the session has one): started at the cell's first call, it runs
    the notebook's imports and answer cells once (`answer_cells()`), then answers each call as
    data over its stdin and stdout. Stopped at the cell's end (Judge.run), and at a call past its
    time limit (the cell's next call starts a fresh one). The kernel sees none of it: neither the
    calls nor their arguments."""

    def __init__(self, answer_cells, folder=None, seconds=ANSWER_CALL_SECONDS):
        self.answer_cells, self.folder, self.seconds = answer_cells, folder, seconds
        self._proc, self._folders, self._output = None, None, collections.deque(maxlen=16)
        self._broken = None   # (why, limit): the answer cells did not run; every call of the cell says so

    def call(self, name, args, kwargs):
        """The answer to `name(*args, **kwargs)`: {"value": ...}, {"error": ...} or {"missing": name}."""
        from handson_lib.checking import runs
        limit = runs.run_limit(self.seconds)
        if self._broken is None and self._proc is None:
            try:
                self._start()
                ready = self._exchange({"cells": list(self.answer_cells())}, limit, name)
                if not isinstance(ready, dict) or ready.get("ready") is not True:
                    raise _NoAnswer("ended")
            except _NoAnswer as why:
                self._broken = (str(why), limit)
                self.stop(wait=0)
        if self._broken is not None:
            raise KernelAnswerError(self._why(name, *self._broken, starting=True))
        try:
            answer = self._exchange({"function": name, "args": encode(list(args)), "kwargs": encode(kwargs)},
                                    limit, name)
        except _NoAnswer as why:
            self.stop(wait=0)
            raise KernelAnswerError(self._why(name, str(why), limit, starting=False)) from None
        if not isinstance(answer, dict) or not {"value", "error", "missing"} & set(answer):
            self.stop()
            raise KernelAnswerError(f"{name}(...): no answer from the process that runs your answer cells")
        return answer

    def _why(self, name, why, limit, starting):
        from handson_lib.messages import tr
        if why == "time" and starting:
            return tr("{name}(...): stopped after {seconds:.0f} s: your answer cells did not finish running "
                      "(an infinite loop?)", name=name, seconds=limit)
        if why == "time":
            return tr("{name}(...): stopped after {seconds:.0f} s: your function did not return in time "
                      "(an infinite loop?)", name=name, seconds=limit)
        return tr("{name}(...): the process that runs your answer cells ended before it answered",
                  name=name)

    def _start(self):
        from handson_lib import launch
        from handson_lib.checking import runs
        self._folders = contextlib.ExitStack()
        folder = self._folders.enter_context(runs.run_folder("handson-calls-", dir=self.folder))
        self._proc = subprocess.Popen(
            launch.wrapped_command([sys.executable, "-m", ANSWER_CALL_MODULE, "--serve"], folder),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=folder,
            env=settings.child_env(MPLBACKEND="Agg"), start_new_session=True)
        for pipe in (self._proc.stdin, self._proc.stdout):
            os.set_blocking(pipe.fileno(), False)
        # What the student's code prints: drained (a full pipe would stall it), its end kept for
        # the grader's log, never for the feedback.
        threading.Thread(target=self._drain, args=(self._proc.stderr,), daemon=True).start()

    def _drain(self, pipe):
        for chunk in iter(lambda: pipe.read1(4096), b""):
            self._output.append(chunk)
        pipe.close()

    def _exchange(self, message, limit, name):
        deadline = time.monotonic() + limit
        data, fd = memoryview(pack(message)), self._proc.stdin.fileno()
        while data:
            if not self._ready(fd, select.POLLOUT, deadline):
                continue
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise self._ended() from None
        (length,) = HEADER.unpack(self._read(HEADER.size, deadline))
        if length > MAX_ANSWER_CHARS:
            self.stop()
            raise KernelAnswerError(f"{name}(...): an answer of {length} characters (at most {MAX_ANSWER_CHARS})")
        raw = self._read(length, deadline)
        try:
            from handson_lib.checking import evidence   # the containers capped, as every answer's
            return evidence.parse_record(raw, MOST_ANSWER_CONTAINERS, "an answer")
        except ValueError:
            raise self._ended() from None

    def _read(self, size, deadline):
        chunks, fd = [], self._proc.stdout.fileno()
        while size > 0:
            if not self._ready(fd, select.POLLIN, deadline):
                continue
            try:
                chunk = os.read(fd, min(size, 1 << 20))
            except BlockingIOError:
                continue
            if not chunk:
                raise self._ended()
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    @staticmethod
    def _ready(fd, event, deadline):
        """Whether `fd` is ready for `event` (or at its end) before the deadline; past it, _NoAnswer."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise _NoAnswer("time")
        poller = select.poll()   # not select(): the grader's descriptors may number over 1024
        poller.register(fd, event)
        return bool(poller.poll(max(1, int(left * 1000))))

    def _ended(self):
        try:
            status = self._proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            status = None
        said = b"".join(self._output).decode(errors="replace")[-2000:]
        print(f"[judge] the process of the answer cells ended (exit status {status}): {said}", file=sys.__stderr__)
        return _NoAnswer("ended")

    def stop(self, wait=STOP_SECONDS):
        """Stop the process (its whole tree) and remove its folder; nothing of it is left running.
        `wait`: seconds it may take to end by itself once its requests end (0: it is stuck)."""
        from handson_lib import launch
        proc, self._proc = self._proc, None
        if proc is not None:
            for pipe in (proc.stdin, proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
            try:   # the end of its requests ends it (a SIGTERM waits on the sandbox's init, which ignores it)
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass
            launch.kill_tree(proc, grace=0.2)   # what is left: a hung call, a process it started
        folders, self._folders = self._folders, None
        if folders is not None:
            folders.close()
