"""The student edition's "At your site" sections (issue 40, item 4): one numbered section per
exercise site in both languages, whose paths, files and lines are the ones the edition ships, and
whose steps 4 and 5, followed as written on a copy of the edition's exercises, end where the
section says they end. One install route throughout."""

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from handson_lib.authoring import release
from handson_lib.sites import site_setup
from handson_lib.sites.table import EXERCISE_SITES, get_site

LANGS = ("en", "ja")
STEPS = 7


def sections(lang):
    """{site title: section text} of the edition's README in `lang`."""
    text = release.student_readme(lang)
    heading = {"en": r"### At your site \((\d)\): (.+)", "ja": r"### 各サイトでの手順（(\d)）: (.+)"}[lang]
    found = list(re.finditer(heading, text))
    return {m.group(2): text[m.start():found[i + 1].start() if i + 1 < len(found) else len(text)]
            for i, m in enumerate(found)}, [int(m.group(1)) for m in found]


def commands(section):
    """The indented command lines of a section's code blocks, comments dropped."""
    return [line.strip().split("  #", 1)[0].rstrip() for line in section.splitlines()
            if line.startswith("       ") and line.strip()]


@pytest.mark.parametrize("lang", LANGS)
def test_one_numbered_section_per_exercise_site_with_every_step(lang):
    found, numbers = sections(lang)
    assert list(found) == [get_site(key).title for key in EXERCISE_SITES]
    assert numbers == list(range(1, len(EXERCISE_SITES) + 1))
    for title, text in found.items():
        steps = [int(n) for n in re.findall(r"^(\d)\. \*\*", text, re.M)]
        assert steps == list(range(1, STEPS + 1)), (title, steps)
    assert "{{" not in release.student_readme(lang)


def test_both_languages_give_the_same_commands():
    english, _ = sections("en")
    japanese, _ = sections("ja")
    for title in english:
        assert commands(english[title]) == commands(japanese[title]), title


@pytest.mark.parametrize("key", EXERCISE_SITES)
def test_the_steps_name_what_the_edition_ships(key):
    """The env.sh copied is the site's, at the path its job scripts source; the module lines to
    uncomment are commented in it; the skeletons copied exist; the course folder is env.sh's COURSE."""
    site = get_site(key)
    text = sections("en")[0][site.title]
    lines = commands(text)
    copy_env = next(line for line in lines if line.endswith("/env.sh") and line.startswith("cp "))
    # `$(id -ng)` stays one word, as the shell reads it
    source, dest = (word.replace("$GROUP", "$(id -ng)") for word in copy_env.replace("$(id -ng)", "$GROUP").split()[1:])
    assert source.endswith(f"/jobscripts/{key}/env.sh") and (ROOT / "jobscripts" / key / "env.sh").exists()
    # the job scripts source env.sh from exactly there ($USER as the login shell has it)
    for name in ("run_multi_gpu_training.sh", "run_multi_node_training.sh"):
        skeleton = ROOT / ("exercises" if key == "reedbush" else f"exercises/{key}") / name
        assert f"ENV_SH=${{ENV_SH:-{site.scripts.env_sh}}}" in skeleton.read_text()
    assert dest == site.scripts.env_sh.replace("${USER:-$(id -un)}", "$USER")
    env_sh = (ROOT / "jobscripts" / key / "env.sh").read_text()
    uncomment = re.findall(r"`(# module [^`]+)`", text)
    assert uncomment and all(line in env_sh.splitlines() or any(l.startswith(line + " ") for l in env_sh.splitlines())
                             for line in uncomment), uncomment
    # the course goes where env.sh's COURSE points once env.sh has set HOME
    course = site_setup.course_folder(site)
    assert f"`{course}`" in text and "export COURSE=${COURSE:-$HOME/distributed-handson}" in env_sh
    home = re.search(r"^export HOME=(.+)$", env_sh, re.M)
    base = home.group(1).replace("${USER:-$(id -un)}", "$USER") if home else "$HOME"
    assert course == f"{base}/distributed-handson"
    # the install route: make setup, then the venv's own pip; the site's skeletons are in the edition
    assert lines[lines.index(f"cd {course}") + 1] == "make setup"
    for line in lines:
        if line.startswith("cp exercises/"):
            for path in shlex.split(line)[1:-1]:
                assert (ROOT / path).exists(), path


def test_one_install_route_throughout_the_edition(tmp_path):
    """No `pip install --user`, conda environment or other venv is offered as a way to install the
    course anywhere a student reads: README, jobscripts/ (every env.sh), the notebooks."""
    edition = tmp_path / "edition"
    release.release_student(edition)
    assert not (edition / "environment.yml").exists()
    offered = re.compile(r"pip install --user|conda env create|-m venv|\$HOME/venv")
    readme = (edition / "README.md").read_text()
    problems = []
    for path in [edition / "README.md", *sorted((edition / "jobscripts").rglob("*")),
                 *sorted((edition / "notebooks").glob("*.ipynb"))]:
        if path.is_file():
            for line in path.read_text().splitlines():
                # the README says once why `pip install --user` is not the route
                if offered.search(line) and "does not work inside a venv" not in line:
                    problems.append(f"{path.relative_to(edition)}: {line.strip()[:100]}")
    assert not problems, "\n".join(problems)
    assert readme.count("make setup") >= 1 + len(EXERCISE_SITES)


def test_following_steps_4_and_5_at_miyabi_ends_ready_to_submit(tmp_path):
    """Steps 4 and 5 of Miyabi-G's section run as written in a copy of the edition's exercises: the
    copy of the site's skeletons, the #PBS lines completed as step 4 says, then the lint and the
    check of step 5, whose first output ends as the section promises."""
    site = get_site("miyabi")
    text = sections("en")[0][site.title]
    lines = commands(text)
    course = tmp_path / "distributed-handson"
    shutil.copytree(ROOT / "exercises", course / "exercises", ignore=shutil.ignore_patterns("ja"))
    copy = next(line for line in lines if line.startswith("cp exercises/"))
    subprocess.run(shlex.split(copy), cwd=course, check=True)
    script = course / "exercises" / "run_multi_gpu_training.sh"
    request = re.search(r"Task #1:\s+`([^`]+)`", text).group(1)
    queue = re.search(r"queue `([^`]+)`", text).group(1)
    placeholder = re.search(r"replace `([^`]+)` with", text).group(1)
    skeleton = script.read_text()
    assert "# handson-site: miyabi" in skeleton
    script.write_text(skeleton.replace("# PUT YOUR CODE HERE\n",
                                       f"# PUT YOUR CODE HERE\n#PBS -q {queue}\n#PBS -l {request}\n")
                      .replace(f"group_list={placeholder}", "group_list=gc64"))
    promised = re.search(r"The first must end `([^`]+)`", text).group(1)
    head, _, tail = promised.partition(" ... ")
    bin_dir = Path(sys.executable).parent
    lint, check = [line for line in lines if line.startswith(("handson jobscript lint", "handson check"))]
    for line in (lint, check):
        args = shlex.split(line)
        result = subprocess.run([str(bin_dir / args[0]), *args[1:]], cwd=course, capture_output=True,
                                text=True, timeout=120, env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HANDSON_LANG": "en"})
        assert result.returncode == 0, result.stdout + result.stderr
        if line == lint:
            last = result.stdout.strip().splitlines()[-1]
            assert head.rstrip(",") in last and last.endswith(tail), (promised, last)
