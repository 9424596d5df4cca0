"""The grader's settings (handson_lib.grader_settings): one typed object, carried to other
processes by their environment and read back whole."""

import pytest

from handson_lib import grader_settings
from handson_lib.grader_settings import GraderSettings, SettingsError


def test_the_settings_cross_to_another_process_and_read_back_the_same():
    settings = GraderSettings(submission="/course/autograded/s1/task2", site="reedbush", run_timeout=300,
                              cell_timeout=45.5, reference_cache="/session/shared", session="/session",
                              profile_log="/session/s1/profile.jsonl", plot_reports=False)
    env = settings.to_env()
    assert set(env) == set(grader_settings.VARIABLES.values())
    assert GraderSettings.from_env(env) == settings
    assert settings.autograding


def test_outside_the_autograder_nothing_is_set():
    settings = GraderSettings.from_env({"HANDSON_LANG": "ja", "PATH": "/usr/bin"})
    assert settings == GraderSettings() and not settings.autograding and settings.plot_reports
    assert GraderSettings().to_env() == {}


def test_a_session_is_what_means_under_the_autograder_not_a_cache():
    assert not GraderSettings.from_env({"HANDSON_REFERENCE_CACHE": "/tmp/cache"}).autograding
    assert GraderSettings.from_env({"HANDSON_AUTOGRADE_SESSION": "/tmp/session"}).autograding


@pytest.mark.parametrize("variable, text", [("HANDSON_RUN_TIMEOUT", "ten"), ("HANDSON_CELL_TIMEOUT", "-5"),
                                            ("HANDSON_RUN_TIMEOUT", "0")])
def test_a_bad_value_is_a_clear_error_naming_the_variable(variable, text):
    with pytest.raises(SettingsError, match=variable):
        GraderSettings.from_env({variable: text})


def test_current_reads_this_process_and_but_changes_one_field(monkeypatch):
    monkeypatch.setenv("HANDSON_RUN_TIMEOUT", "120")
    monkeypatch.delenv("HANDSON_PROFILE_LOG", raising=False)
    now = grader_settings.current()
    assert now.run_timeout == 120.0
    assert now.but(profile_log="/x").profile_log == "/x" and now.profile_log is None


def test_the_variables_are_named_in_one_place():
    """No module of the library reads or writes a grader setting's variable by its name."""
    from conftest import ROOT
    names = set(grader_settings.VARIABLES.values())
    found = []
    for path in sorted((ROOT / "handson_lib").rglob("*.py")):
        if path.name == "grader_settings.py":
            continue
        text = path.read_text()
        for name in names:
            for quote in ('"', "'"):
                if f"{quote}{name}{quote}" in text:
                    found.append(f"{path.relative_to(ROOT)}: {name}")
    # The planted attack of the synthetic class sets one as a student's code would.
    assert found == ["handson_lib/autograder/synthetic_class.py: HANDSON_GRADING"], found
