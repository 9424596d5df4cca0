"""The grader's part of the course's settings (handson_lib.settings.GraderSettings), by its
former names: `current()` is `settings.current().grader`."""

from handson_lib import settings
from handson_lib.settings import KERNEL_FOLDER, GraderSettings, SettingsError  # noqa: F401

#: field -> its environment variable.
VARIABLES = {f.name: f.metadata["variable"] for f in GraderSettings._declared()}


def current():
    """The grader's settings this process runs under."""
    return settings.current().grader
