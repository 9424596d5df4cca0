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


def pins_for(python_version):
    """constraints.txt's pins whose markers hold for `python_version` ('3.12'): name -> requirement."""
    from packaging.requirements import Requirement
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"python_version": python_version}):
                assert req.name not in pins, f"two pins of {req.name} hold for Python {python_version}"
                pins[req.name] = req
    return pins


def test_runtime_is_a_supported_stack_with_the_patched_chainer():
    import chainer
    import numpy
    import setuptools
    from handson_lib.runtime import chainer_patches
    assert (3, 11) <= sys.version_info[:2] <= (3, 13)
    assert chainer.__version__ == "7.8.1"
    assert set(chainer_patches.installed_state().values()) == {"active"}
    pins = pins_for(f"{sys.version_info.major}.{sys.version_info.minor}")
    assert numpy.__version__ in pins["numpy"].specifier, (numpy.__version__, str(pins["numpy"]))
    assert int(setuptools.__version__.split(".")[0]) < 70


def test_pins_follow_the_python_in_use():
    """NumPy 1.23.5 (and SciPy < 1.14) only where wheels exist: 3.11; NumPy 2 on 3.12 and 3.13."""
    for python, numpy_major in (("3.11", "1"), ("3.12", "2"), ("3.13", "2")):
        pins = pins_for(python)
        (spec,) = pins["numpy"].specifier
        assert spec.operator == "==" and spec.version.split(".")[0] == numpy_major, (python, spec)
        assert {"numpy", "scipy", "scikit-learn", "setuptools"} <= set(pins), (python, pins)
    assert "1.13.1" in pins_for("3.11")["scipy"].specifier
    assert "1.13.1" not in pins_for("3.13")["scipy"].specifier   # no 3.13 wheel, NumPy < 2.3


def test_environment_yml_matches_requirements():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    python = next(d.split("=", 1)[1] for d in conda if d.startswith("python="))
    pins = pins_for(python)
    numpy_pin = next(d for d in conda if d.startswith("numpy="))
    assert numpy_pin.split("=", 1)[1] in pins["numpy"].specifier, (numpy_pin, str(pins["numpy"]))
    assert "setuptools<70" in conda
    req = _requirements()
    listed = {re.split(r"[<>=!~ /]", p, maxsplit=1)[0].lower() for p in pip + conda}
    missing = set(req) - listed - {"playwright", "chainer", "mock"}  # the browser test's driver and Chainer's own tests' (tests/upstream_tier.py) are not for clusters
    assert not missing, f"in requirements.txt but not in environment.yml: {missing}"
    # Chainer is the course's patched wheel (`make chainer-wheel` builds it), never PyPI's
    assert "./build/chainer-wheel/chainer-7.8.1-py3-none-any.whl" in pip and req["chainer"] == "chainer==7.8.1"
    assert not any(p.startswith("chainer==") for p in pip)
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
