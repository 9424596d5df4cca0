"""The reference solutions, measured in the grading session (instructor-only).

`handson check --against reference` and the autograder run the solution from solutions/ once per
session: its run sets the watchdog of a student's run, and its record is shown beside the
student's (the throughput itself is timed step by step beside it: handson_lib.checking.timing.paired).
The student edition ships neither
solutions/ nor this module; there the checks compare a student's runs with each other
(`--against self`, handson_lib.checking.checks).
"""

import fcntl
import hashlib
import os
from pathlib import Path

from handson_lib import COURSE_ROOT, settings
from handson_lib.checking import runs

SOLUTIONS = COURSE_ROOT / "solutions"


def reference_script(name):
    return SOLUTIONS / name


def available(name):
    """Whether the reference solution `name` is here to be measured (the instructor's checkout)."""
    return reference_script(name).exists()


def measure_reference(name, args, timeout, np=None, cache=None):
    """The reference solution `name` run with `args` (one process, or `np` MPI ranks): once per
    grading session.

    `cache` (default: HANDSON_REFERENCE_CACHE, which `handson autograde` sets to a folder of its
    own) keeps the measurement, so every student of a session is compared with the same one and
    the reference is not re-run per student; without a cache it is measured afresh."""
    script = reference_script(name)
    if not script.exists():
        raise FileNotFoundError(f"no reference solution {script}: measuring against the reference needs "
                                "the instructor's checkout (use --against self in the student edition)")

    shown = " ".join(a for a in args if a != "--no-progress")
    part = f"reference {name} on {f'{np} rank(s)' if np else 'one process'}: {shown}"

    def run():  # alone on the machine: every student's ratio is taken against it
        if np is None:
            return runs.run_observed(script, args, timeout, timed=True, part=part)
        return runs.run_observed_mpi(script, np, args, timeout, timed=True, part=part)

    cache = cache or settings.current().grader.reference_cache
    if not cache:
        return run()
    key = hashlib.sha256(repr((script.read_bytes(), np, list(args))).encode()).hexdigest()[:16]
    path = Path(cache) / f"reference-{key}.json"
    kind = runs.Observation if np is None else runs.MPIObservation
    if not os.access(cache, os.W_OK):
        # In the grading sandbox the session's references are read-only (measured before the
        # students, `handson autograde`): one not measured there is measured for this run only.
        kept = runs.load_run(path, kind) if path.exists() else None
        return kept if kept is not None else run()
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # students graded in parallel wait for the first measurement
        kept = runs.load_run(path, kind) if path.exists() else None
        if kept is not None:
            return kept
        obs = run()
        if obs.finished:
            runs.save_run(obs, path)
        return obs
