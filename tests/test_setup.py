"""The set-up files agree with each other and with the facts Chainer 7.8.1 imposes."""

import re
import subprocess
import sys

import yaml

from conftest import ROOT


def _requirements():
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name = re.split(r"[<>=!~ ]", line, maxsplit=1)[0].lower()
            pins[name] = line
    return pins


def test_runtime_is_what_chainer_7_8_1_needs():
    import chainer
    import numpy
    import setuptools
    assert sys.version_info[:2] == (3, 11)
    assert chainer.__version__ == "7.8.1"
    assert tuple(map(int, numpy.__version__.split(".")[:2])) < (1, 24)
    assert int(setuptools.__version__.split(".")[0]) < 70


def test_environment_yml_matches_requirements():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "python=3.11" in conda and "numpy=1.23.5" in conda and "setuptools<70" in conda
    req = _requirements()
    listed = {re.split(r"[<>=!~ ]", p, maxsplit=1)[0].lower() for p in pip + conda}
    missing = set(req) - listed - {"playwright"}  # the browser test's driver is not for clusters
    assert not missing, f"in requirements.txt but not in environment.yml: {missing}"
    assert "chainer==7.8.1" in pip and req["chainer"] == "chainer==7.8.1"
    assert "-e ." in pip


def test_ci_installs_and_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make test" in ci and "apt-get install" in ci and "chromium" in ci
    assert "make demo" in readme and "make test" in readme


def test_lab_settings_silence_the_news_popup():
    import json

    from handson_lib.tools import lab
    settings = json.loads(lab.overrides_path().read_text())
    assert settings["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"


def test_runtime_declares_what_student_scripts_use_and_imports_no_matplotlib():
    code = ("import sys\nfrom handson_lib import runtime\n"
            "missing = [n for n in runtime.__all__ if not hasattr(runtime, n)]\n"
            "assert not missing, missing\nassert 'matplotlib' not in sys.modules\nprint(len(runtime.__all__))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    used = set()
    for script in (ROOT / "solutions").glob("train_*.py"):
        text = script.read_text()
        assert "from handson_lib import runtime  #" in text, f"{script.name}: one commented runtime import"
        assert text.count("handson_lib") == 1, f"{script.name}: more than one course import"
        used |= set(re.findall(r"\bruntime\.(\w+)", text))
    from handson_lib import runtime
    assert used <= set(runtime.__all__), used - set(runtime.__all__)
