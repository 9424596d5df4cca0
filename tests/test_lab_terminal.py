"""The terminals of `make lab` find the course's commands without activating its venv."""

import os

from handson_lib.tools import lab


def test_lab_terminals_have_the_venv_first_on_path(tmp_path):
    """A terminal of JupyterLab inherits the server's environment: with the venv's bin first on
    PATH it runs `handson` and the venv's `mpiexec`, not Slurm's /usr/bin/mpiexec (issue 40)."""
    venv_bin = tmp_path / ".venv" / "bin"
    env = lab.lab_environment({"PATH": f"/usr/bin{os.pathsep}{venv_bin}{os.pathsep}/bin", "HOME": "/h"},
                              bin_dir=venv_bin)
    assert env["PATH"].split(os.pathsep) == [str(venv_bin), "/usr/bin", "/bin"]
    assert env["VIRTUAL_ENV"] == str(tmp_path / ".venv") and env["HOME"] == "/h"


def test_handson_lab_starts_jupyter_with_that_environment(monkeypatch, tmp_path):
    started = {}
    monkeypatch.setattr(lab, "install_settings", lambda: tmp_path / "overrides.json")
    monkeypatch.setattr(lab.os, "chdir", lambda path: None)
    monkeypatch.setattr(lab.os, "execve", lambda exe, argv, env: started.update(exe=exe, env=env))
    monkeypatch.setattr(lab.os, "execv", lambda exe, argv: started.update(exe=exe, env=None))
    monkeypatch.setenv("PATH", "/usr/bin")

    class Args:
        install_settings, port, ip, no_browser = False, 8888, "127.0.0.1", True
    lab.main(Args())
    assert started["env"] is not None, "started without the venv's environment"
    assert started["env"]["PATH"].split(os.pathsep)[0] == os.path.dirname(lab.sys.executable)
