"""Helpers the notebooks call to run scripts and show results (kept here so tests reach them).

Ships in the student edition: it needs neither the reference solutions nor the cluster admin.
"""

import difflib
import fcntl
import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from handson_lib import launch
from handson_lib.messages import tr
from handson_lib.grading import checks, runs
from handson_lib.sites import jobs, jobscript

_NOISE = re.compile(r"DeprecationWarning|^\s*$|numpy.distutils|distutils_status_migration")


def _readable(output):
    """The output without library noise; a warning keeps its message, not its source line."""
    lines, after_warning = [], False
    for line in output.replace("\x1b[J", "").splitlines():
        if after_warning and line.startswith("  "):
            after_warning = False
            continue
        after_warning = "Warning:" in line
        if not _NOISE.search(line) or "Throughput" in line:
            lines.append(line)
    return lines


def _graded_limit(script, args, timeout, np=None):
    """(time limit, stall limit) of a run. Under `handson autograde` (a reference cache for the
    session), a student's run may take 5 times the reference's own run with the same arguments,
    and is stopped once no iteration has come for 4 times the reference's longest wait: a
    deadlock then costs well under a minute."""
    name = os.path.basename(str(script))
    if not os.environ.get("HANDSON_REFERENCE_CACHE") or checks.default_against(name) != "reference":
        return timeout, None
    from handson_lib.grading import reference  # instructor-only: the autograder has it
    basis_args, basis_np = _limit_basis(name, runs.without_out(args), np)
    measured = reference.measure_reference(name, basis_args, timeout, np=basis_np)
    return checks.student_limit(measured, timeout), checks.student_stall(measured)


def _flag(args, flag):
    """The value of the last `flag` in `args` (the one argparse keeps), True for a flag without
    a value (`--no-progress`), else None."""
    values = [args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else True
              for i, a in enumerate(args) if a == flag]
    return values[-1] if values else None


def _limit_basis(name, args, np):
    """The reference run whose time sets a student run's limits: the same script, arguments and
    ranks; or, for a Task #2 run that differs from the check's correctness run only by doing
    fewer images per rank (02's 1-rank run: one epoch), that run, which every session measures
    anyway: a bound from above, without one more run alone on the machine."""
    basis = checks.MULTI_NODE_ARGS
    if name != "train_cifar_multi_node.py" or not np:
        return args, np

    def images_per_rank(a, ranks):
        try:
            return int(_flag(a, "--epoch")) * int(_flag(a, "--train-size")) / ranks
        except (TypeError, ValueError):
            return None

    def rest(a):
        return {flag: _flag(a, flag) for flag in set(x for x in a + basis if x.startswith("--"))
                if flag not in ("--epoch", "--train-size")}
    ours, theirs = images_per_rank(args, np), images_per_rank(basis, 2)
    if ours is not None and theirs is not None and ours <= theirs and rest(args) == rest(basis):
        return list(basis), 2
    return args, np


def _headline(label, obs):
    """`--- label (finished, 12.3 s)`: the first line of a run's output in a notebook."""
    if obs.finished:
        return tr("--- {label} (finished, {seconds:.1f} s)", label=label, seconds=obs.seconds)
    return tr("--- {label} (did NOT finish, {seconds:.1f} s)", label=label, seconds=obs.seconds)


def run_script(script, args, label=None, timeout=600, show=12):
    """Run a course script under the grader's launcher; print its last lines; return the Observation."""
    args = [str(a) for a in args]
    timeout, stall = _graded_limit(script, args, timeout)
    obs = runs.run_observed(script, args, timeout=timeout, stall=stall, part=f"notebook: {label or script}")
    lines = _readable(obs.output)
    print(_headline(label or script, obs))
    print("\n".join(lines[-show:]))
    if not obs.finished:
        print(f"!!! {checks._why_it_stopped(obs, timeout)}")
    return obs


def throughput_rows(observations, reference_label=None):
    """[(label, images/s or None, ratio to the reference or None)] for a dict label -> Observation."""
    rates = {label: obs.throughput if obs.finished else None for label, obs in observations.items()}
    base = rates.get(reference_label) if reference_label else None
    return [(label, rate, (rate / base) if rate and base else None) for label, rate in rates.items()]


def print_table(rows, headers=("run", "images/s", "ratio")):
    print(f"{headers[0]:40s} {headers[1]:>10s} {headers[2]:>8s}")
    for label, rate, ratio in rows:
        rate_s = f"{rate:10.1f}" if rate else f"{'-':>10s}"
        ratio_s = f"{ratio:7.2f}x" if ratio else f"{'-':>8s}"
        print(f"{label:40s} {rate_s} {ratio_s}")


def run_mpi_script(script, np, args, label=None, timeout=600, show=12):
    """Run a ChainerMN script on `np` local ranks under the launcher; print rank 0's last lines."""
    args = [str(a) for a in args]
    timeout, stall = _graded_limit(script, args, timeout, np=np)
    obs = runs.run_observed_mpi(script, np, args, timeout=timeout, stall=stall,
                                part=f"notebook: {label or script}")
    rank0 = "\n".join(line.split(": ", 1)[-1] for line in obs.output.splitlines()
                      if line.startswith("[1,0]<stdout>"))
    print(_headline(label or script, obs))
    print("\n".join(_readable(rank0)[-show:]))
    if not obs.finished:
        print(f"!!! {checks._why_ranks_stopped(obs, timeout)}")
    return obs


def _demo_key(np, argv):
    """A course demo run's identity: its ranks and arguments, a file argument by its content."""
    parts = [str(np)]
    for a in map(str, argv):
        path = Path(a)
        parts.append(path.read_text(errors="replace") if path.is_file() else a)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def run_demo(np, argv, timeout=120):
    """Run a course demo (the course's code, no student's) on `np` local ranks; returns launch's
    MPIResult. Under `handson autograde` (HANDSON_DEMO_MEMO, one folder per grading session) the
    same demo run for an earlier student stands for it, and says so: its output is the same."""
    memo = os.environ.get("HANDSON_DEMO_MEMO")
    if not memo:
        return launch.run_mpi(np, argv, timeout=runs.run_limit(timeout))
    path = Path(memo) / f"demo-{_demo_key(np, argv)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    # Students graded side by side reach the demo together: the first runs it, the others wait for it.
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = runs.load_run(path, launch.MPIResult) if path.exists() else None
        if result is not None:
            runs.log_part(f"notebook: course demo on {np} rank(s) (the same run as an earlier student's, reused)", 0.0)
            print(tr("(the autograder reused this demo's run from an earlier student: the same code on {np} ranks)",
                     np=np))
            return result
        result = launch.run_mpi(np, argv, timeout=runs.run_limit(timeout))
        runs.log_part(f"notebook: course demo on {np} rank(s)", result.seconds, waited=result.waited)
        if result.ok:
            runs.save_run(result, path)
    return result


def show_diff(before, after):
    """The lines that changed between two scripts (unified diff)."""
    a, b = Path(before), Path(after)
    diff = difflib.unified_diff(a.read_text().splitlines(), b.read_text().splitlines(),
                                fromfile=a.name, tofile=b.name, lineterm="", n=1)
    text = "\n".join(diff)
    print(text)
    return text


def run_on_scheduler(job_script, extra_args="--epoch 1 --train-size 400 --test-size 100", timeout=600):
    """Submit a task job script with `qsub -j oe` where a scheduler answers; show the output.

    The job runs in a copy of the script's folder (the training scripts beside it). A group
    placeholder left in only warns here: the local scheduler does not check groups, a real one does.
    Returns the output text, or None when there is no scheduler or the job did not finish."""
    findings = jobscript.lint(Path(job_script).read_text(), "reedbush", template=True)
    for finding in findings:
        print(f"lint: {finding}")
    if any(f.is_error for f in findings):
        print(tr("Fix the errors above (`handson jobscript lint`) before submitting."))
        return None
    if not jobs.scheduler_found():
        print(tr("No scheduler here (no qsub): run the script without one: `handson jobscript run {name}`, "
                 "or submit it on the cluster's login node.", name=Path(job_script).name))
        return None
    workdir = Path(tempfile.mkdtemp(prefix="qsub-"))
    for path in Path(job_script).parent.glob("*.py"):
        shutil.copy2(path, workdir)
    shutil.copy2(job_script, workdir)
    try:
        jobid = jobs.qsub(Path(job_script).name, workdir, "-j", "oe",
                          env={**os.environ, "EXTRA_ARGS": extra_args})
    except jobs.JobError as err:
        print(tr("qsub refused the job: {error}", error=err))
        return None
    print(f"qsub -j oe {Path(job_script).name}  ->  " + tr("job {jobid}; waiting ...", jobid=jobid))
    output = jobs.wait_for_output(workdir, jobid, timeout)
    if output is None:
        print(tr("job {jobid}: no output after {timeout:.0f} s (still queued? `qstat {jobid}`)",
                 jobid=jobid, timeout=timeout))
        return None
    text = output.read_text()
    print(tr("job {jobid}: done; {output}", jobid=jobid, output=output.name))
    print("\n".join(_readable(text)[-15:]))
    return text
