"""The course's settings: one typed object, declared here with each variable that carries it.

Every setting the library reads from the environment is a field below, with the variable that
carries it to other processes, who sets it and what it does (the README's table of variables is
generated from these declarations: `handson build` writes it, tests/test_settings.py compares).

    from handson_lib import settings
    settings.current().lang              # this process's settings, read from its environment
    settings.current().grader.run_timeout
    with settings.override(observe_phases=True):   # within this process, and its children:
        subprocess.run(cmd, env=settings.child_env())   # carried by this one function

Within a process a setting changes by `override` (never by writing os.environ); other processes
get the settings by `child_env()`, which writes every variable from the object. This module
imports nothing of the course (handson_lib/__init__ reads the course root from it).
"""

import contextlib
import os
from dataclasses import dataclass, field, fields, replace

#: The course's languages, English first (the messages' templates).
LANGUAGES = ("en", "ja")
#: `GraderSettings.submission` for nbgrader's own CLI: the folder the kernel starts in.
KERNEL_FOLDER = "1"

_TRUE = ("1", "on", "yes", "true")
_FALSE = ("0", "off", "no", "false")


class SettingsError(ValueError):
    pass


def setting(variable, set_by, does, default=None, kind="text"):
    """A field carried by `variable`; kind: text, seconds (a positive number), count (a whole
    number, 0 or more), flag or iterations (whole numbers, comma-separated: a sorted tuple)."""
    return field(default=default, metadata={"variable": variable, "set_by": set_by, "does": does,
                                            "kind": kind})


def _parse(f, text):
    kind, variable = f.metadata["kind"], f.metadata["variable"]
    if kind == "seconds":
        try:
            value = float(text)
        except ValueError:
            raise SettingsError(f"{variable}={text!r}: a number of seconds expected") from None
        if value <= 0:
            raise SettingsError(f"{variable}={text!r}: a positive number of seconds expected")
        return value
    if kind == "flag":
        word = text.strip().lower()
        return True if word in _TRUE else False if word in _FALSE else f.default
    if kind == "count":
        try:
            value = int(text)
        except ValueError:
            raise SettingsError(f"{variable}={text!r}: a whole number expected") from None
        if value < 0:
            raise SettingsError(f"{variable}={text!r}: a whole number, 0 or more, expected")
        return value
    if kind == "iterations":
        try:
            return tuple(sorted({int(k) for k in text.split(",") if k.strip()}))
        except ValueError:
            raise SettingsError(f"{variable}={text!r}: iterations (whole numbers, comma-separated) expected") from None
    return text


def _text(f, value):
    """The variable's text for `value`, or None where the variable is left unset."""
    if f.metadata["kind"] == "flag":
        return None if value == f.default else ("1" if value else "0")
    if value is None:
        return None
    if f.metadata["kind"] == "iterations":
        return ",".join(str(int(k)) for k in value) or None
    return f"{value:g}" if isinstance(value, float) else str(value)


class _Carried:
    """Reading from and writing to the variables declared by a dataclass's fields."""

    @classmethod
    def _declared(cls):
        return [f for f in fields(cls) if "variable" in f.metadata]

    @classmethod
    def from_env(cls, environ=None):
        environ = os.environ if environ is None else environ
        values = {f.name: _parse(f, environ[f.metadata["variable"]])
                  for f in cls._declared() if environ.get(f.metadata["variable"])}
        return cls(**values)

    def to_env(self):
        """The variables that carry these settings to other processes (unset fields: none)."""
        env = {}
        for f in self._declared():
            text = _text(f, getattr(self, f.name))
            if text is not None:
                env[f.metadata["variable"]] = text
        return env

    def but(self, **changes):
        return replace(self, **changes)


@dataclass(frozen=True)
class GraderSettings(_Carried):
    """The grader's part: written by `handson autograde` and `course/nbgrader_config.py`, unset
    outside the autograder (a student's `handson check` runs as in the student edition)."""
    submission: str = setting(
        "HANDSON_GRADING", "`handson autograde` (per student), `course/nbgrader_config.py`",
        "the submission's folder: only the files handed in there count, wherever a cell moves the "
        "working directory; `1` (nbgrader's own CLI): the folder the kernel starts in")
    site: str = setting(
        "HANDSON_SITE", "`course/nbgrader_config.py`, `--site`, you",
        "the site whose table applies (queues, limits, grading thresholds and bands); default `local`")
    run_timeout: float = setting(
        "HANDSON_RUN_TIMEOUT", "`handson autograde --run-timeout`",
        "the most seconds one training run may take before the watchdog kills it", kind="seconds")
    cell_timeout: float = setting(
        "HANDSON_CELL_TIMEOUT", "`handson autograde --cell-timeout`",
        "seconds per notebook cell under the autograder", kind="seconds")
    reference_cache: str = setting(
        "HANDSON_REFERENCE_CACHE", "`handson autograde`",
        "folder that keeps the reference measured once per grading session, its seed and the paths the grader's "
        "replays share (the grader's alone: the grading sandbox does not see it)")
    session: str = setting(
        "HANDSON_AUTOGRADE_SESSION", "`handson autograde`",
        "the grading session's folder, in every process of the session: what a submission leaves "
        "running outside its kernel's process tree is found by it and stopped when the session ends; "
        "\"under the autograder\" means it is set")
    profile_log: str = setting(
        "HANDSON_PROFILE_LOG", "`handson autograde` (per student)",
        "file where every observed run appends its part and seconds (`autograde_<assignment>_profile.csv`)")
    grading_job: str = setting(
        "HANDSON_GRADING_JOB", "the classroom's grading service (internal)",
        "in every process of a grading job that the service runs on the hub's machine: the job's folder, by "
        "which its processes are found and stopped (as `SLURM_JOB_ID` or `PBS_JOBID` on a cluster)")
    plot_reports: bool = setting(
        "HANDSON_PLOT_REPORTS", "`course/nbgrader_config.py`",
        "`0`: under the autograder a script's `PlotReport`s are registered (the rank-0 check sees "
        "them) but draw nothing (graded runs' PNGs are not looked at; drawing them cost rank 0 about "
        "1.7 s of CPU per Task #2 correctness run)", default=True, kind="flag")

    @property
    def autograding(self):
        """Whether this process belongs to a session of the course's autograding."""
        return self.session is not None


@dataclass(frozen=True)
class Settings(_Carried):
    """The course's settings; `grader` is the grader's part."""
    lang: str = setting(
        "HANDSON_LANG", "you, the Japanese edition's Makefile, `handson autograde` (the course's language)",
        "`ja`: messages of `handson check`, the graders, lint and data errors in Japanese, and "
        "JupyterLab's interface in Japanese (`handson lab --install-settings`); else the locale's "
        "(`LANG=ja_JP.UTF-8`), else English; an unknown language falls back to English with a note")
    phases: str = setting(
        "HANDSON_PHASES", "the profiling job scripts (`PROFILE=1`)",
        "`1`: forward / backward / allreduce / update times and NVTX ranges; `nvtx`: NVTX ranges only")
    dataset: str = setting(
        "HANDSON_DATASET", "you", "the dataset when a script gets no `--dataset` (default `synthetic`)")
    data_dir: str = setting(
        "HANDSON_DATA_DIR", "site admin", "where the data files are (default `<course>/data`)")
    root: str = setting(
        "HANDSON_ROOT", "site admin, tests", "the course folder (the one holding `notebooks/` and `exercises/`)")
    malloc: str = setting(
        "HANDSON_MALLOC", "you (to measure the difference)",
        "`0`: glibc's default allocator settings in the training scripts (else freed memory is kept "
        "for the next iteration: `runtime/memory.py`)")
    timing_lock: str = setting(
        "HANDSON_TIMING_LOCK", "site admin, the grading sandbox",
        "the lock file of the timing slot: a run whose time is scored holds it alone. Default: "
        "`timing.lock` in `/tmp/handson-timing-<uid>/`, a folder of the account's own (0700; one "
        "planted there by another account, a link or one open to others is refused), so no other "
        "account (a student in a classroom) can take or hold the grader's slot; a file named here is "
        "shared by every account that names it; inside the grading sandbox, a file of the sandbox's "
        "own `/tmp`")
    slot_held: bool = setting(
        "HANDSON_TIMING_SLOT_HELD", "the launcher (internal)",
        "`1` in the processes of a run that holds the timing slot: runs they start do not wait for it",
        default=False, kind="flag")
    observe_dir: str = setting(
        "HANDSON_OBSERVE_DIR", "the grader's launcher (internal)",
        "where an observed run writes what the workers did")
    observe_snapshots: tuple = setting(
        "HANDSON_OBSERVE_SNAPSHOTS", "the grader's runs (internal)",
        "iterations (comma-separated) at which an observed run keeps every worker's and rank's parameters, "
        "for the grader to set beside its own replay of the training", default=(), kind="iterations")
    observe_phases: bool = setting(
        "HANDSON_OBSERVE_PHASES", "`handson bench speedup` (internal)",
        "`1`: every observed run also records its phases (forward / backward / allreduce / update)",
        default=False, kind="flag")
    judge: str = setting(
        "GRADER_JUDGE", "`handson autograde`, for nbgrader (internal; never enters the sandbox)",
        "where the report cells' checks keep their runs, and the sandbox they start them in (JSON)")
    gradings_per_hour: int = setting(
        "HANDSON_GRADINGS_PER_HOUR", "`handson classroom up --gradings-per-hour N`, for its grading service",
        "the most gradings of one student's submissions that the classroom's grading service starts in an "
        "hour (a student's latest submission is graded once the hour allows; `0`: no limit)", kind="count")
    classroom_dir: str = setting(
        "HANDSON_CLASSROOM_DIR", "site admin",
        "state folder of `handson classroom` (default `/var/lib/handson-classroom`): hub database, "
        "exchange, gradebook, the users' environments")
    cluster_dir: str = setting(
        "HANDSON_CLUSTER_DIR", "site admin",
        "state folder of the local cluster (default `/var/lib/handson-cluster`); its `link.json` tells "
        "notebooks and experiments that a cluster with a network is up")
    cluster_mark: str = setting(
        "HANDSON_CLUSTER", "`handson cluster up` (internal)",
        "in every daemon of the local cluster: its state folder, by which `cluster down` finds them")
    link: str = setting(
        "HANDSON_LINK", "the local cluster's TaskProlog (`cluster up --link`)",
        "in every job: the link profile, recorded in each benchmark result (`link`)")
    link_rate_bps: str = setting(
        "HANDSON_LINK_RATE_BPS", "the local cluster's TaskProlog (`cluster up --link`)",
        "in every job: the link's rate in bit/s, recorded in each benchmark result (`link`)")
    bench_corrupt_rank: str = setting(
        "HANDSON_BENCH_CORRUPT_RANK", "tests",
        "that rank adds a wrong contribution in `bench allreduce`, to prove the check fails")
    grader: GraderSettings = field(default_factory=GraderSettings)

    @classmethod
    def from_env(cls, environ=None):
        environ = os.environ if environ is None else environ
        return replace(super().from_env(environ), grader=GraderSettings.from_env(environ))

    def to_env(self):
        return {**super().to_env(), **self.grader.to_env()}


def declared():
    """[(field, its class's name)] of every setting, in the README table's order."""
    return [(f, "Settings") for f in Settings._declared()] + \
        [(f, "GraderSettings") for f in GraderSettings._declared()]


def variable(name):
    """The variable that carries field `name` (of Settings or GraderSettings)."""
    for f, _ in declared():
        if f.name == name:
            return f.metadata["variable"]
    raise KeyError(name)


VARIABLES = {f.name: f.metadata["variable"] for f, _ in declared()}
_FIELDS = {f.name: f for f, _ in declared()}

#: Changes made within this process by `override`, innermost last.
_OVERRIDES = []


def read(environ=None):
    """The settings an environment holds (this process's own, with its overrides, by default)."""
    return Settings.from_env(environ) if environ is not None else _overridden(Settings.from_env())


def _overridden(found):
    for changes in _OVERRIDES:
        found = _changed(found, changes)
    return found


def one(name, environ=None):
    """One field's value, parsing no other (what must work whatever else is set: the course's
    root at import, the messages' language), with this process's overrides by default."""
    f = _FIELDS[name]
    if environ is None:
        for changes in _OVERRIDES:
            if name in changes:
                return changes[name]
        environ = os.environ
    text = environ.get(f.metadata["variable"])
    return _parse(f, text) if text else f.default


def current():
    """This process's settings: its environment's, with the overrides in force."""
    return read()


def _changed(found, changes):
    grader_names = {f.name for f in fields(GraderSettings)}
    mine = {k: v for k, v in changes.items() if k not in grader_names}
    theirs = {k: v for k, v in changes.items() if k in grader_names}
    found = replace(found, **mine)
    return replace(found, grader=replace(found.grader, **theirs)) if theirs else found


@contextlib.contextmanager
def override(**changes):
    """Within it, this process's settings (and its children's, by child_env) carry `changes`:
    fields of Settings or of GraderSettings by name."""
    _changed(Settings(), changes)    # a name of neither is an error here, not later
    _OVERRIDES.append(changes)
    try:
        yield
    finally:
        _OVERRIDES.remove(changes)


def child_env(base=None, carried=None, changes=None, **extra):
    """The environment of a child process: `base` (this process's environment by default) with
    every setting's variable written from `carried` (the settings `base` holds, with this
    process's overrides, by default) and its `changes` (fields by name), then `extra`."""
    env = dict(os.environ if base is None else base)
    carried = carried if carried is not None else _overridden(Settings.from_env(env))
    carried = _changed(carried, changes) if changes else carried
    for name in VARIABLES.values():
        env.pop(name, None)
    env.update(carried.to_env())
    env.update(extra)
    return env


def hand_down(**changes):
    """Write `changes` into this process's own environment: only for a launcher that runs what
    comes next in its own process as another program would start (handson_lib.harness.observe runs
    the student's script by runpy), so that the script and every process it starts read them."""
    for name, value in _changed(Settings(), changes).to_env().items():
        os.environ[name] = value


def table_rows():
    """The README's table of variables, from the declarations (markdown rows)."""
    rows = ["| variable | set by | does |", "|---|---|---|"]
    rows += [f"| `{f.metadata['variable']}` | {f.metadata['set_by']} | {f.metadata['does']} |"
             for f, _ in declared()]
    return rows
