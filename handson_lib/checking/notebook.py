"""Helpers the notebooks call to run scripts and show results (kept here so tests reach them).

Ships in the student edition: it needs neither the reference solutions nor the cluster admin.
"""

import difflib
import json
import os
import re
import shutil
import tempfile
import unicodedata
from pathlib import Path

from handson_lib import launch, settings
from handson_lib.messages import tr
from handson_lib.checking import checks, runs
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


def _headline(label, obs):
    """`--- label (finished, 12.3 s)`: the first line of a run's output in a notebook."""
    if obs.finished:
        return tr("--- {label} (finished, {seconds:.1f} s)", label=label, seconds=obs.seconds)
    return tr("--- {label} (did NOT finish, {seconds:.1f} s)", label=label, seconds=obs.seconds)


def run_script(script, args, label=None, timeout=600, show=12):
    """Run a course script under the grader's launcher; print its last lines; return the Observation."""
    args = [str(a) for a in args]
    obs = runs.run_observed(script, args, timeout=timeout, part=f"notebook: {label or script}")
    lines = _readable(obs.output)
    print(_headline(label or script, obs))
    print("\n".join(lines[-show:]))
    if not obs.finished:
        print(f"!!! {checks.why_it_stopped(obs, timeout)}")
    return obs


def throughput_rows(observations, reference_label=None):
    """[(label, images/s or None, ratio to the reference or None)] for a dict label -> Observation."""
    rates = {label: obs.throughput if obs.finished else None for label, obs in observations.items()}
    base = rates.get(reference_label) if reference_label else None
    return [(label, rate, (rate / base) if rate and base else None) for label, rate in rates.items()]


def _padded(text, width, right=False):
    """`text` padded to `width` terminal columns: a Japanese character takes two."""
    pad = " " * max(width - sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text), 0)
    return pad + text if right else text + pad


def print_table(rows, headers=None):
    """The rows of throughput_rows as a table, its headers in the reader's language."""
    headers = headers or (tr("run"), "images/s", tr("ratio"))
    print(f"{_padded(headers[0], 40)} {_padded(headers[1], 10, right=True)} {_padded(headers[2], 8, right=True)}")
    for label, rate, ratio in rows:
        rate_s = f"{rate:10.1f}" if rate else f"{'-':>10s}"
        ratio_s = f"{ratio:7.2f}x" if ratio else f"{'-':>8s}"
        print(f"{_padded(label, 40)} {rate_s} {ratio_s}")
    # A run's two figures differ in the last digits (01: 502.93 above, 503.0 here): say why.
    print(tr("images/s as the course's observer timed each run; the script's own `Throughput:` line "
             "keeps a clock of its own, so the last digits may differ"))


def run_mpi_script(script, np, args, label=None, timeout=600, show=12):
    """Run a ChainerMN script on `np` local ranks under the launcher; print rank 0's last lines."""
    args = [str(a) for a in args]
    obs = runs.run_observed_mpi(script, np, args, timeout=timeout, part=f"notebook: {label or script}")
    rank0 = "\n".join(line.split(": ", 1)[-1] for line in obs.output.splitlines()
                      if line.startswith("[1,0]<stdout>"))
    print(_headline(label or script, obs))
    print("\n".join(_readable(rank0)[-show:]))
    if not obs.finished:
        print(f"!!! {checks.why_ranks_stopped(obs, timeout)}")
    return obs


_ANSWER_CALL = None


def set_answer_call(call):
    """The grader's judge (handson_lib.autograder.judge) runs `on_answers` calls itself while it
    runs a grade cell; None: a plain call."""
    global _ANSWER_CALL
    _ANSWER_CALL = call


#: Under the judge: what gives the source of the student's answer cells (autograder.judge).
_ANSWER_SOURCE = None


def set_answer_source(source):
    global _ANSWER_SOURCE
    _ANSWER_SOURCE = source


def answer_source(function):
    """The source that defines the student's `function`, for a run of it in processes of their own
    (02's stretch on 2 ranks): in a notebook, the cell that defined it; under the autograder, the
    notebook's imports and answer cells as handed in (nothing the kernel did), so that no student code
    runs where the grader starts those processes."""
    if _ANSWER_SOURCE is not None:
        return _ANSWER_SOURCE(function)
    import inspect
    import linecache
    lines = linecache.getlines(function.__code__.co_filename)
    return "".join(lines) if lines else inspect.getsource(function)


def runs_folder():
    """Where the grader keeps this student's runs under the autograder (a run there is one its sandbox
    may read and write), else None (the temporary folder)."""
    judge = settings.current().judge
    return json.loads(judge).get("runs") if judge else None


def on_answers(function, *args, **kwargs):
    """Call a course `function` on the student's code, the student's functions and classes among
    its arguments, and return its result: in a notebook, a plain call; under the autograder, the
    grader runs the call in a fresh sandboxed process that holds the notebook's imports and answer
    cells only, and takes the result back as data (numbers, strings, lists, dicts, arrays), so that
    a hidden test judges it in the grader's own process and nothing of the kernel takes part."""
    if _ANSWER_CALL is not None:
        return _ANSWER_CALL(function, *args, **kwargs)
    return function(*args, **kwargs)


def run_demo(np, argv, timeout=120):
    """Run a course demo (the course's code, no student's) on `np` local ranks; returns launch's
    MPIResult."""
    return launch.run_mpi(np, argv, timeout=runs.run_limit(timeout))


def show_diff(before, after):
    """The lines that changed between two scripts (unified diff)."""
    a, b = Path(before), Path(after)
    diff = difflib.unified_diff(a.read_text().splitlines(), b.read_text().splitlines(),
                                fromfile=a.name, tofile=b.name, lineterm="", n=1)
    text = "\n".join(diff)
    print(text)
    return text


def run_on_scheduler(job_script, extra_args="--epoch 1 --train-size 400 --test-size 100", timeout=600):
    """Lint a task job script as `handson jobscript lint` does (at the script's site), and submit it
    with `qsub -j oe` only where a scheduler answers and lint found no error (the placeholder group
    is one: jobscript_linter.PLACEHOLDER_RULE); show the job's output.

    Where none answers (no qsub, or Slurm's PBS commands with no controller to reach) it says so in
    one line and submits nothing. The job runs in a copy of the script's folder (the training
    scripts beside it). Returns the output text, or None when nothing was submitted or the job did
    not finish (a job it gave up on, after `timeout` s, a failed qstat or an interrupt, is cancelled
    with qdel)."""
    path = Path(job_script)
    _, findings = jobscript.lint_file(path)
    for finding in findings:
        print(finding.format(path.name))
    if not jobs.scheduler_answers():
        print(tr("no scheduler here: the script was linted, not submitted (to run it here as a job would run: "
                 "`handson jobscript run {name}`)", name=path.name))
        return None
    if jobscript.errors(findings):
        print(tr("Fix the errors above (`handson jobscript lint`) before submitting."))
        return None
    workdir = Path(tempfile.mkdtemp(prefix="qsub-"))
    for script in path.parent.glob("*.py"):
        shutil.copy2(script, workdir)
    shutil.copy2(path, workdir)
    try:
        jobid = jobs.qsub(path.name, workdir, "-j", "oe", env={**os.environ, "EXTRA_ARGS": extra_args})
    except jobs.JobError as err:
        print(tr("qsub refused the job: {error}", error=err))
        return None
    print(f"qsub -j oe {path.name}  ->  " + tr("job {jobid}; waiting ...", jobid=jobid))
    # The job is cancelled (and the notebook says so) when the wait ends without it done: the
    # timeout, a scheduler that stops answering, Ctrl-C or the kernel's interrupt.
    with jobs.cancelled_unless_done(jobid, say=print) as job:
        try:
            output = jobs.wait_for_output(workdir, jobid, timeout)
        except jobs.QueryError as err:
            print(tr("job {jobid}: the scheduler does not answer: {error}", jobid=jobid, error=err))
            return None
        if output is None:
            print(tr("job {jobid}: no output after {timeout:.0f} s (still queued? `qstat {jobid}`)",
                     jobid=jobid, timeout=timeout))
            return None
        job.done = True
    text = output.read_text()
    print(tr("job {jobid}: done; {output}", jobid=jobid, output=output.name))
    print("\n".join(_readable(text)[-15:]))
    return text
