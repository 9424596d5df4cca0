"""The grader's settings: one typed object, written by the trusted side and read everywhere else.

The course's autograding (handson_lib.autograder.nbgrader_course) and the course's nbgrader_config.py
build a `GraderSettings` and hand it on with `to_env()`: nbgrader, the kernels it starts and every
process a kernel starts are other processes, and their environment is what reaches them (in the
grading sandbox too, where only these variables and a few of the system's cross). The library
reads them back with `current()`, never from os.environ: the variables are named here only.

Outside the autograder every field is unset: a student's `handson check` and the notebooks run
as in the student edition.
"""

import os
from dataclasses import dataclass, fields, replace

#: field -> its environment variable.
VARIABLES = {
    "submission": "HANDSON_GRADING",
    "site": "HANDSON_SITE",
    "run_timeout": "HANDSON_RUN_TIMEOUT",
    "cell_timeout": "HANDSON_CELL_TIMEOUT",
    "reference_cache": "HANDSON_REFERENCE_CACHE",
    "session": "HANDSON_AUTOGRADE_SESSION",
    "profile_log": "HANDSON_PROFILE_LOG",
    "plot_reports": "HANDSON_PLOT_REPORTS",
}
#: `submission` for nbgrader's own CLI: the folder the kernel starts in.
KERNEL_FOLDER = "1"


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class GraderSettings:
    #: the folder of the scripts handed in (only they count, wherever a cell moves the working
    #: directory), or KERNEL_FOLDER; None outside the autograder
    submission: str = None
    #: the site whose thresholds and credit bands apply (handson_lib/sites/table.py)
    site: str = None
    #: the most seconds one training run may take before the watchdog stops it
    run_timeout: float = None
    #: seconds per notebook cell under the autograder
    cell_timeout: float = None
    #: the folder of the session's reference measurements (read-only inside the sandbox)
    reference_cache: str = None
    #: the grading session's folder, set by the course's autograding in every process of the session
    session: str = None
    #: the file where every observed run of a student appends its part and seconds
    profile_log: str = None
    #: False: a script's PlotReports are registered (the rank-0 check sees them) but draw nothing
    plot_reports: bool = True

    @property
    def autograding(self):
        """Whether this process belongs to a session of the course's autograding."""
        return self.session is not None

    def to_env(self):
        """The variables that carry these settings to other processes (unset fields: none)."""
        env = {}
        for field in fields(self):
            value = getattr(self, field.name)
            if value is None or (field.name == "plot_reports" and value):
                continue
            if field.name == "plot_reports":
                env[VARIABLES[field.name]] = "0"
            elif isinstance(value, float):
                env[VARIABLES[field.name]] = f"{value:g}"
            else:
                env[VARIABLES[field.name]] = str(value)
        return env

    def but(self, **changes):
        return replace(self, **changes)

    @classmethod
    def from_env(cls, environ=None):
        environ = os.environ if environ is None else environ
        values = {}
        for name, variable in VARIABLES.items():
            text = environ.get(variable)
            if not text:
                continue
            if name in ("run_timeout", "cell_timeout"):
                try:
                    values[name] = float(text)
                except ValueError:
                    raise SettingsError(f"{variable}={text!r}: a number of seconds expected") from None
                if values[name] <= 0:
                    raise SettingsError(f"{variable}={text!r}: a positive number of seconds expected")
            elif name == "plot_reports":
                values[name] = text != "0"
            else:
                values[name] = text
        return cls(**values)


def current():
    """The settings this process runs under (read from its environment each time: a judge's
    context may change them while it runs)."""
    return GraderSettings.from_env()

