"""The course's settings (handson_lib.settings): one typed object, every variable declared there
once, changed within a process by `override`, carried to other processes by `child_env`, and the
README's table of variables generated from it."""

import ast
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from handson_lib import settings
from handson_lib.authoring import build
from handson_lib.settings import GraderSettings, Settings, SettingsError

LIBRARY = ROOT / "handson_lib"
#: The planted attack of the synthetic class sets a grader variable as a student's code would (a
#: string of code the class hands in, not the library's).
PLANTED = "handson_lib/autograder/synthetic_class.py"


def test_the_settings_cross_to_another_process_and_read_back_the_same():
    grader = GraderSettings(submission="/course/autograded/s1/task2", site="reedbush", run_timeout=300,
                            cell_timeout=45.5, reference_cache="/session/shared", session="/session",
                            profile_log="/session/s1/profile.jsonl", grading_job="/jobs/job-00001",
                            plot_reports=False)
    every = Settings(**{f.name: "x" for f in Settings._declared() if f.metadata["kind"] == "text"},
                     slot_held=True, observe_phases=True, observe_snapshots=(3, 31, 32, 33), gradings_per_hour=0,
                     grader=grader)
    env = every.to_env()
    assert set(env) == set(settings.VARIABLES.values())
    assert Settings.from_env(env) == every and every.grader.autograding
    assert GraderSettings.from_env(env) == grader


def test_outside_the_autograder_nothing_is_set():
    found = Settings.from_env({"PATH": "/usr/bin", "LANG": "C.UTF-8"})
    assert found == Settings() and not found.grader.autograding and found.grader.plot_reports
    assert Settings().to_env() == {}


def test_a_session_is_what_means_under_the_autograder_not_a_cache():
    assert not GraderSettings.from_env({"HANDSON_REFERENCE_CACHE": "/tmp/cache"}).autograding
    assert GraderSettings.from_env({"HANDSON_AUTOGRADE_SESSION": "/tmp/session"}).autograding


@pytest.mark.parametrize("variable, text", [("HANDSON_RUN_TIMEOUT", "ten"), ("HANDSON_CELL_TIMEOUT", "-5"),
                                            ("HANDSON_RUN_TIMEOUT", "0"), ("HANDSON_OBSERVE_SNAPSHOTS", "3,x")])
def test_a_bad_value_is_a_clear_error_naming_the_variable(variable, text):
    with pytest.raises(SettingsError, match=variable):
        Settings.from_env({variable: text})


def test_current_reads_this_process_and_but_changes_one_field(monkeypatch):
    monkeypatch.setenv("HANDSON_RUN_TIMEOUT", "120")
    monkeypatch.setenv("HANDSON_LANG", "ja")
    monkeypatch.delenv("HANDSON_PROFILE_LOG", raising=False)
    now = settings.current()
    assert now.grader.run_timeout == 120.0 and now.lang == "ja"
    assert now.grader.but(profile_log="/x").profile_log == "/x" and now.grader.profile_log is None


def test_an_override_holds_within_the_process_and_its_children_without_touching_the_environment(monkeypatch):
    monkeypatch.delenv("HANDSON_OBSERVE_PHASES", raising=False)
    monkeypatch.setenv("HANDSON_PROFILE_LOG", "/outer.jsonl")
    before = dict(os.environ)
    with settings.override(observe_phases=True, profile_log="/inner.jsonl"):
        assert settings.current().observe_phases and settings.current().grader.profile_log == "/inner.jsonl"
        assert dict(os.environ) == before
        child = settings.child_env()
        code = "from handson_lib import settings; s = settings.current(); print(s.observe_phases, s.grader.profile_log)"
        out = subprocess.run([sys.executable, "-c", code], env=child, capture_output=True, text=True, check=True)
        assert out.stdout.split() == ["True", "/inner.jsonl"]
    assert not settings.current().observe_phases and settings.current().grader.profile_log == "/outer.jsonl"
    with pytest.raises(TypeError):
        with settings.override(no_such_setting=1):
            pass


def test_a_child_gets_exactly_the_carried_settings_and_the_rest_of_the_environment(monkeypatch):
    monkeypatch.setenv("HANDSON_DATASET", "mnist")
    env = settings.child_env(carried=Settings(lang="ja"), EXTRA="1")
    assert env["HANDSON_LANG"] == "ja" and env["EXTRA"] == "1" and "HANDSON_DATASET" not in env
    assert env["PATH"] == os.environ["PATH"]
    assert settings.child_env({"HANDSON_DATASET": "cifar10", "PATH": "/bin"}) == \
        {"HANDSON_DATASET": "cifar10", "PATH": "/bin"}


def test_the_readme_table_of_variables_is_the_settings_objects_fields():
    readme = (ROOT / "README.md").read_text()
    start, end = build.SETTINGS_TABLE
    assert start in readme and end in readme
    table = readme.split(start, 1)[1].split(end, 1)[0]
    listed = re.findall(r"^\| `([A-Z_]+)` \|", table, flags=re.M)
    assert listed == [f.metadata["variable"] for f, _ in settings.declared()]
    assert build.readme_with_settings_table(readme) == readme
    # every field of both classes is declared with a variable (none read some other way)
    assert {f.name for f, _ in settings.declared()} == \
        {*Settings.__dataclass_fields__, *GraderSettings.__dataclass_fields__} - {"grader"}


def _library_files():
    return sorted(p for p in LIBRARY.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_variable_is_named_in_the_settings_module_only():
    """No other module of the library reads or writes a setting's variable by its name."""
    names = set(settings.VARIABLES.values())
    found = []
    for path in _library_files():
        if path.name == "settings.py" and path.parent == LIBRARY:
            continue
        text = path.read_text()
        found += [f"{path.relative_to(ROOT)}: {name}" for name in sorted(names)
                  if any(f"{q}{name}{q}" in text for q in "\"'")]
    assert found == [f"{PLANTED}: HANDSON_GRADING", f"{PLANTED}: HANDSON_OBSERVE_DIR"], found


#: Writing os.environ: item assignment, update, pop, del, setdefault, clear.
ENVIRON_WRITES = re.compile(r"os\.environ\[[^\]]*\]\s*=(?!=)|os\.environ\.(update|pop|setdefault|clear)\(|"
                            r"del os\.environ|os\.putenv|os\.unsetenv")
#: Who may: the settings module (hand_down, for a launcher that runs a program in its own
#: process) and the entry points that pick matplotlib's backend for their own process.
MAY_WRITE = {"handson_lib/settings.py", "handson_lib/runtime/training.py"}


def test_no_module_rewrites_the_environment_to_pass_a_setting_to_itself():
    found = []
    for path in _library_files():
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                continue     # a string: code of a planted submission, a template
            if hasattr(node, "lineno") and isinstance(node, ast.stmt):
                line = ast.get_source_segment(path.read_text(), node) or ""
                first = line.splitlines()[0] if line else ""
                if ENVIRON_WRITES.search(first) and rel not in MAY_WRITE:
                    found.append(f"{rel}:{node.lineno}: {first.strip()}")
    assert found == [], found


def test_the_languages_are_declared_once():
    defined = [str(p.relative_to(ROOT)) for p in _library_files()
               if re.search(r"^LANGUAGES\s*=\s*\(", p.read_text(), flags=re.M)]
    assert defined == ["handson_lib/settings.py"]


def test_a_bad_grader_setting_leaves_the_library_importable_and_its_messages_readable():
    env = settings.child_env(HANDSON_RUN_TIMEOUT="ten", HANDSON_LANG="ja")
    code = ("from handson_lib import COURSE_ROOT, settings\nfrom handson_lib.messages import language\n"
            "print(language())\ntry:\n    settings.current()\nexcept settings.SettingsError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["ja", "HANDSON_RUN_TIMEOUT='ten': a number of seconds expected"]


def test_one_setting_follows_the_overrides():
    with settings.override(lang="ja"):
        assert settings.one("lang") == "ja" == settings.current().lang


def test_the_command_stops_at_a_bad_setting_naming_it():
    env = settings.child_env(HANDSON_CELL_TIMEOUT="-1")
    out = subprocess.run([sys.executable, "-m", "handson_lib.cli", "doctor"], env=env, capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.strip() == \
        "handson: HANDSON_CELL_TIMEOUT='-1': a positive number of seconds expected"
