"""`handson doctor`: the environment check of part 0."""

import json
import re
import os
import stat
import shutil
import sys
from pathlib import Path
import textwrap
import time
import types

import pytest

from handson_lib.runtime import devices
from handson_lib.tools import doctor, doctor_gpu, doctor_mpi, doctor_packages, doctor_rows

COMPONENTS = ["Python", "platform", "setuptools", "NumPy", "Chainer", "Chainer patches", "ChainerMN", "mpi4py",
              "MPI library", "mpiexec", "user", "CPU cores", "CuPy", "cuDNN", "NCCL", "GPUs",
              "nvidia-smi", "PBS commands", "Slurm commands", "nvprof", "nsys", "JupyterLab",
              "nbgrader", "digits dataset", "Chromium"]


def cupy_importable():
    cupy, _ = devices.import_cupy()
    return cupy is not None


def row(text, name):
    """The table line of component `name` (status symbol, marker, name, found)."""
    for line in text.splitlines():
        if line.startswith("  [") and name in line:
            body = line[len("  [xxxx] * "):]
            if body.startswith(name + "  ") or body.rstrip() == name:
                return line
    raise AssertionError(f"no row for {name!r} in:\n{text}")


def by_name(checks):
    return {c.name: c for c in checks}


# --------------------------------------------------------------------------- the CLI on this host

def test_doctor_cli_table(run_handson):
    proc = run_handson("doctor", timeout=120)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "Traceback" not in out + proc.stderr
    for name in COMPONENTS:
        row(out, name)
    lines = out.strip().splitlines()
    assert lines[-2] == "CPU course: ready"
    assert row(out, "Python").startswith("  [ ok ] * Python")
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in row(out, "Python")
    assert "7.8.1" in row(out, "Chainer")
    mpiexec_row = row(out, "mpiexec")
    assert str(Path(sys.executable).parent / "mpiexec") in mpiexec_row
    shadowed = shutil.which("mpiexec") not in (None, str(Path(sys.executable).parent / "mpiexec"))
    # Slurm's torque wrapper puts /usr/bin/mpiexec first on PATH: the doctor must say so.
    assert ("[warn]" in mpiexec_row and "shadows the venv's" in out) if shadowed else "[ ok ]" in mpiexec_row
    assert str(doctor_rows.venv_bin() / "mpiexec") in row(out, "mpiexec")

    cupy_line = row(out, "CuPy")
    if cupy_importable():
        assert cupy_line.startswith(("  [ ok ]", "  [warn]")), cupy_line
    else:
        assert cupy_line.startswith("  [miss]"), cupy_line
        assert row(out, "GPUs").startswith("  [miss]")
        assert row(out, "NCCL").startswith("  [miss]")
        assert lines[-1] == "GPU course: not on this host (no CuPy/GPU)"
        # the not-ok rows say what they disable
        idx = lines.index(row(out, "NCCL"))
        assert "-> disables: MultiprocessParallelUpdater needs NCCL" in lines[idx + 1]
        assert "`naive` communicator" in lines[idx + 1]


def test_doctor_cli_json_matches_table(run_handson):
    proc_json = run_handson("doctor", "--json", timeout=120)
    assert proc_json.returncode == 0, proc_json.stdout + proc_json.stderr
    data = json.loads(proc_json.stdout)
    names = [c["name"] for c in data["checks"]]
    assert names == COMPONENTS
    for c in data["checks"]:
        assert c["status"] in doctor.STATUSES
        assert set(c) >= {"name", "status", "found", "disables", "required_for_cpu_course"}
        # ok rows disable nothing; every other row says what it disables
        assert (c["disables"] == "") == (c["status"] == "ok"), c
    assert data["verdict"]["cpu_ready"] is True
    assert data["verdict"]["cpu"] == "CPU course: ready"
    assert data["exit_code"] == 0
    cupy_row = next(c for c in data["checks"] if c["name"] == "CuPy")
    assert (cupy_row["status"] in ("ok", "warn")) == cupy_importable()
    required = {c["name"] for c in data["checks"] if c["required_for_cpu_course"]}
    assert {"Python", "Chainer", "NumPy", "Chainer patches", "ChainerMN", "mpi4py", "mpiexec"} <= required
    assert "CuPy" not in required and "Chromium" not in required


# --------------------------------------------------------------------------- broken environments

def _fake_module(monkeypatch, name, **attrs):
    mod = types.ModuleType(name)
    mod.__file__ = f"/fake/{name.replace('.', '/')}.py"
    for k, v in attrs.items():
        setattr(mod, k, v)
    monkeypatch.setitem(sys.modules, name, mod)
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, mod)
    return mod


@pytest.fixture
def fake_cupy_without_nccl(monkeypatch):
    """CuPy 13.6 with 2 A100s and cuDNN, whose cupy.cuda.nccl imports but has available=False."""
    import chainer  # noqa: F401  (imported for real first: chainer caches whether CuPy works)
    import chainermn  # noqa: F401

    props = {"name": b"NVIDIA A100-SXM4-40GB", "major": 8, "minor": 0, "totalGlobalMem": 40 * 2**30}
    _fake_module(monkeypatch, "cupy", __version__="13.6.0")
    _fake_module(monkeypatch, "cupy.cuda")
    _fake_module(monkeypatch, "cupy.cuda.runtime", getDeviceCount=lambda: 2,
                 getDeviceProperties=lambda i: dict(props))
    _fake_module(monkeypatch, "cupy.cuda.cudnn", getVersion=lambda: 8902)

    def get_unique_id():
        raise AttributeError("module 'cupy_backends.cuda.libs.nccl' has no attribute 'get_unique_id'")
    _fake_module(monkeypatch, "cupy.cuda.nccl", available=False, get_unique_id=get_unique_id)


def test_nccl_imports_but_unavailable(fake_cupy_without_nccl):
    checks = doctor.run_checks(isolate_cuda=False)
    rows = by_name(checks)
    assert rows["CuPy"].status == "ok" and rows["CuPy"].found == "13.6.0"
    assert rows["cuDNN"].status == "ok" and rows["cuDNN"].found == "8.9.2"
    assert rows["GPUs"].status == "ok"
    assert rows["GPUs"].found.startswith("2: 2 x NVIDIA A100-SXM4-40GB (cc 8.0")
    assert "nsys" in rows["GPUs"].note and "nvprof refuses" in rows["GPUs"].note
    nccl = rows["NCCL"]
    assert nccl.status == "missing"
    assert nccl.found == devices.NCCL_NOT_LOADED and "available is False" in nccl.found
    assert nccl.disables.startswith("MultiprocessParallelUpdater needs NCCL")
    assert "`naive` communicator" in nccl.disables
    v = doctor.verdict(checks)
    assert v.cpu_ready and v.cpu == "CPU course: ready"
    assert not v.gpu_ready
    assert v.gpu.startswith("GPU course: NOT ready (NCCL:")


def test_nccl_available_makes_gpu_course_ready(fake_cupy_without_nccl, monkeypatch):
    nccl = sys.modules["cupy.cuda.nccl"]
    monkeypatch.setattr(nccl, "available", True, raising=False)
    monkeypatch.setattr(nccl, "get_version", lambda: 21803, raising=False)
    rows = by_name(doctor.run_checks(isolate_cuda=False))
    assert rows["NCCL"].status == "ok" and rows["NCCL"].found == "2.18.3"
    assert rows["NCCL"].disables == ""
    assert doctor.verdict(list(rows.values())).gpu == "GPU course: ready"


def chainer_patches_list():
    from handson_lib.runtime import chainer_patches
    return chainer_patches.PATCHES


def unpatched_chainer_on_numpy_2(monkeypatch):
    """The installed Chainer as if built without the course's patches, on NumPy 2."""
    import numpy
    from handson_lib.runtime import chainer_patches
    monkeypatch.setattr(numpy, "__version__", "2.1.0")
    monkeypatch.setattr(chainer_patches, "installed_state",
                        lambda root=None: {p.name: "absent" for p in chainer_patches.PATCHES})


def test_wrong_chainer_and_missing_patches_block_cpu_course(monkeypatch, capsys):
    import chainer
    monkeypatch.setattr(chainer, "__version__", "6.7.0")
    unpatched_chainer_on_numpy_2(monkeypatch)
    rc = doctor.run()
    out = capsys.readouterr().out
    assert rc == 1
    assert row(out, "Chainer").startswith("  [err!] * Chainer          6.7.0")
    assert "7.8.1 expected" in row(out, "Chainer")
    assert row(out, "NumPy").startswith("  [ ok ] * NumPy            2.1.0")
    patches = row(out, "Chainer patches")
    every = len(chainer_patches_list())
    assert patches.startswith(f"  [err!] * Chainer patches  0 of {every} active: -"), patches
    lines = out.splitlines()
    explanation = lines[lines.index(patches) + 1]
    # the patches this stack needs, each with the line of Chainer it is for
    assert "chainer/functions/array/as_strided.py:10: `import chainer` fails on NumPy 2" in explanation
    assert "chainermn/communicators/_memory_utility.py:211" in explanation
    assert "`make setup` installs Chainer built with them" in explanation
    verdict = [ln for ln in out.splitlines() if ln.startswith("CPU course:")]
    assert verdict and verdict[0].startswith("CPU course: NOT ready (")
    assert "Chainer: 6.7.0" in verdict[0] and f"Chainer patches: 0 of {every} active" in verdict[0]


def test_patches_unneeded_here_are_a_warning_and_needed_ones_are_named(monkeypatch):
    from handson_lib.runtime import chainer_patches
    monkeypatch.setattr(chainer_patches, "installed_state",
                        lambda root=None: {p.name: "absent" if p.name == "copy=False" else "active"
                                           for p in chainer_patches.PATCHES})
    monkeypatch.setattr(chainer_patches, "needed_here",
                        lambda: {p.name: "NumPy 2" if p.name == "np.sctypes" else "" for p in chainer_patches.PATCHES})
    c = doctor_packages.check_chainer_patches()
    assert c.status == "warn" and not c.blocking, c
    others = [p.name for p in chainer_patches.PATCHES if p.name != "copy=False"]
    assert c.found == f"{len(others)} of {len(others) + 1} active: " + ", ".join(others)
    assert c.disables.startswith("nothing on this stack; on newer ones: "
                                 "chainermn/communicators/_memory_utility.py:211: the fp16 allreduce"), c.disables
    assert c.note == "needed on this stack: np.sctypes (NumPy 2)"


@pytest.mark.parametrize("minor, status", [(11, "ok"), (12, "ok"), (13, "ok"), (14, "warn"), (10, "warn")])
def test_python_3_11_to_3_13_are_supported(monkeypatch, minor, status):
    monkeypatch.setattr(sys, "version_info", types.SimpleNamespace(major=3, minor=minor))
    c = doctor_packages.check_python()
    assert c.status == status, c
    if status == "warn":
        assert "3.11-3.13 expected" in c.found and "3.11, 3.12 and 3.13" in c.disables


def test_failing_import_is_a_row_not_a_crash(monkeypatch):
    import chainer  # noqa: F401
    monkeypatch.setitem(sys.modules, "chainermn", None)   # `import chainermn` raises ImportError
    checks = doctor.run_checks(isolate_cuda=False)
    mn = by_name(checks)["ChainerMN"]
    assert mn.status == "missing", mn
    assert mn.found.startswith(("ModuleNotFoundError", "ImportError")), mn
    assert "Task #2" in mn.disables
    v = doctor.verdict(checks)
    assert not v.cpu_ready and "ChainerMN" in v.cpu


def test_shadowing_mpiexec_on_path_is_a_warning(tmp_path, monkeypatch):
    fake = tmp_path / "mpiexec"
    fake.write_text("#!/bin/sh\necho 'mpiexec (slurm torque wrapper) 1.0'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    checks = doctor.run_checks(isolate_cuda=False)
    mpiexec = by_name(checks)["mpiexec"]
    assert mpiexec.status == "warn"
    assert mpiexec.found.startswith(str(doctor_rows.venv_bin() / "mpiexec"))
    assert str(fake) in mpiexec.disables and "shadows the venv's" in mpiexec.disables
    assert doctor.verdict(checks).cpu_ready   # the course's launcher uses the venv's mpiexec


@pytest.mark.timed
def test_doctor_stays_fast(run_handson):
    """A student runs `handson doctor` first: it answers within seconds. Timed, so it runs alone
    on an idle machine (the timed tier): on a busy laptop the same command took 30 s."""
    start = time.monotonic()
    proc = run_handson("doctor", timeout=120)
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert elapsed < 15, f"doctor took {elapsed:.1f} s (must stay fast)"


def test_hanging_mpi4py_import_times_out(tmp_path, monkeypatch):
    pkg = tmp_path / "mpi4py"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("__version__ = '9.9.9'\n")
    (pkg / "MPI.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(doctor_mpi, "MPI_IMPORT_TIMEOUT", 2)
    # (without the timeout the import ends after its 60 s and nothing says "timed out")
    checks = doctor.run_checks(isolate_cuda=False)
    rows = by_name(checks)
    assert rows["mpi4py"].status == "error"
    assert rows["mpi4py"].found.startswith("9.9.9;") and "timed out after 2 s" in rows["mpi4py"].found
    assert rows["MPI library"].status == "missing"
    v = doctor.verdict(checks)
    assert not v.cpu_ready and "mpi4py" in v.cpu


def test_fake_cupy_through_the_isolated_probe(tmp_path, run_handson):
    """End to end: the subprocess probe sees a CuPy whose NCCL is not loadable."""
    pkg = tmp_path / "cupy"
    (pkg / "cuda").mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = '13.6.0'\n")
    (pkg / "cuda" / "__init__.py").write_text("")
    (pkg / "cuda" / "runtime.py").write_text(textwrap.dedent("""\
        def getDeviceCount():
            return 1
        def getDeviceProperties(i):
            return {"name": b"Tesla P100-SXM2-16GB", "major": 6, "minor": 0,
                    "totalGlobalMem": 16 * 2**30}
        """))
    (pkg / "cuda" / "nccl.py").write_text("available = False\n")
    (pkg / "cuda" / "cudnn.py").write_text("raise ImportError('libcudnn.so.8: cannot open shared object file')\n")
    proc = run_handson("doctor", "--json", env={"PYTHONPATH": str(tmp_path)}, timeout=120)
    data = json.loads(proc.stdout)
    rows = {c["name"]: c for c in data["checks"]}
    assert rows["CuPy"]["status"] == "ok" and rows["CuPy"]["found"] == "13.6.0"
    assert rows["GPUs"]["found"].startswith("1: 1 x Tesla P100-SXM2-16GB (cc 6.0")
    assert rows["cuDNN"]["status"] == "missing" and "libcudnn" in rows["cuDNN"]["found"]
    assert rows["NCCL"]["status"] == "missing"
    assert "MultiprocessParallelUpdater needs NCCL" in rows["NCCL"]["disables"]
    assert data["verdict"]["gpu_ready"] is False
    assert data["verdict"]["gpu"].startswith("GPU course: NOT ready (NCCL:")


def test_component_rejects_unknown_status():
    with pytest.raises(ValueError, match="bad status 'fine'"):
        doctor.Component("x", "fine")


def test_slurm_torque_wrapper_is_recognised(tmp_path, monkeypatch):
    """A `qsub` that is Slurm's torque wrapper (a Perl script) and a partial Slurm install."""
    scripts = {
        "qsub": "#!/usr/bin/perl\n# qsub wrapper for Slurm\nuse Slurm;\nprint 'x';\n",
        "qstat": "#!/bin/sh\nexit 0\n",
        "qdel": "#!/bin/sh\nexit 0\n",
        "pbsnodes": "#!/bin/sh\nexit 0\n",
        "sbatch": "#!/bin/sh\necho 'slurm 22.05.8'\n",
    }
    for name, text in scripts.items():
        f = tmp_path / name
        f.write_text(text)
        f.chmod(0o755)
    # keep only directories that have no scheduler commands of their own, plus the fakes
    keep = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not any(os.path.exists(os.path.join(d, c))
                             for c in doctor_mpi.PBS_COMMANDS + doctor_mpi.SLURM_COMMANDS)]
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path), *keep]))
    rows = by_name(doctor.run_checks(isolate_cuda=False))
    pbs, slurm = rows["PBS commands"], rows["Slurm commands"]
    assert pbs.status == "ok", pbs
    assert "Slurm's torque wrapper" in pbs.found and str(tmp_path) in pbs.found
    assert slurm.status == "warn", slurm
    assert "slurm 22.05.8" in slurm.found and "missing: sinfo srun" in slurm.found
    assert "handson cluster up" in slurm.disables


JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff\uff01-\uff5e]")


def test_report_in_japanese_keeps_names_paths_and_json(monkeypatch, capsys):
    """HANDSON_LANG=ja: the table, its explanations and the verdicts are Japanese (the course's
    catalogue); component names, versions, paths and commands stay as they are; --json stays English."""
    import chainer
    import numpy
    monkeypatch.setenv("HANDSON_LANG", "ja")
    unpatched_chainer_on_numpy_2(monkeypatch)   # a row that disables something, on any host
    rc = doctor.run()
    out = capsys.readouterr().out
    assert rc == 1
    lines = out.splitlines()
    assert lines[0].startswith("handson doctor: ") and JAPANESE.search(lines[0]), lines[0]
    for name in ["Python", "setuptools", "NumPy", "Chainer", "Chainer patches", "ChainerMN", "mpi4py", "mpiexec",
                 "CuPy", "cuDNN", "NCCL", "nvidia-smi", "nvprof", "nsys", "JupyterLab", "nbgrader", "Chromium"]:
        row(out, name)
    patches_row = row(out, "Chainer patches")
    assert patches_row.startswith("  [err!] * Chainer patches") and f"0 of {len(chainer_patches_list())}" not in patches_row
    assert JAPANESE.search(patches_row), patches_row
    explanation = lines[lines.index(patches_row) + 1].strip()
    assert explanation.startswith("-> ") and JAPANESE.search(explanation), explanation
    assert "chainer/functions/array/as_strided.py:10" in explanation and "`make setup`" in explanation
    assert str(Path(chainer.__file__).parent) in row(out, "Chainer")
    explanations = [ln.strip() for ln in lines if ln.strip().startswith("->")]
    assert explanations and all(JAPANESE.search(ln) for ln in explanations), explanations
    assert "-> disables:" not in out and "-> note:" not in out
    assert "（" in out and "(* = needed" not in out
    verdicts = [ln for ln in lines if ln.startswith(("CPU ", "GPU "))]
    assert len(verdicts) == 2 and all(JAPANESE.search(ln) for ln in verdicts), verdicts
    assert "course" not in " ".join(verdicts) and "Chainer patches: " in verdicts[0]

    # the machine-readable output does not change with the language
    assert doctor.run(as_json=True) == 1
    data = json.loads(capsys.readouterr().out)
    patches_check = next(c for c in data["checks"] if c["name"] == "Chainer patches")
    assert patches_check["found"] == f"0 of {len(chainer_patches_list())} active: -"
    assert patches_check["disables"].startswith("chainer/functions/array/as_strided.py:10: `import chainer` fails")
    assert data["verdict"]["cpu"].startswith("CPU course: NOT ready (")
    assert not any(JAPANESE.search(text) for text in (*data["verdict"].values(), patches_check["disables"])
                   if isinstance(text, str))


def test_the_stand_in_is_said_to_sum_gradients_as_the_notebooks_teach(monkeypatch):
    """00 (Question 3) teaches that MultiprocessParallelUpdater sums the workers' gradients; the
    doctor said its CPU stand-in averages them."""
    for lang, summed, averaged in (("en", "summed", "averag"), ("ja", "合計", "平均")):
        monkeypatch.setenv("HANDSON_LANG", lang)
        text = doctor_gpu._no_cupy()
        assert summed in text and averaged not in text, text


def test_the_students_doctor_lists_no_instructor_tools(monkeypatch):
    """The student edition ships no autograder and installs neither nbgrader nor Chromium: its
    doctor has no rows for nbgrader's release and autograding or the browser tests."""
    names = [c.name for c in doctor.run_checks(isolate_cuda=False)]
    assert "nbgrader" in names and "Chromium" in names   # the course itself
    monkeypatch.setattr(doctor_packages, "instructors_copy", lambda: False)
    names = [c.name for c in doctor.run_checks(isolate_cuda=False)]
    assert "nbgrader" not in names and "Chromium" not in names and "JupyterLab" in names


def test_the_japanese_edition_is_told_when_its_figures_have_no_japanese_font(tmp_path, monkeypatch):
    """Issue 49: without a Japanese font the Japanese notebooks' figures showed empty boxes, and
    matplotlib's warnings filled the cells; doctor says so in Japanese, and only there."""
    fonts = tmp_path / "fonts"
    fonts.mkdir()
    monkeypatch.setattr(doctor_packages, "FONT_FOLDERS", (str(fonts), str(tmp_path / "no-such-folder")))
    monkeypatch.setenv("HANDSON_LANG", "ja")
    missing = by_name(doctor.run_checks(isolate_cuda=False))["Japanese font"]
    assert missing.status == "missing" and "fonts-noto-cjk" in missing.disables, missing
    (fonts / "opentype" / "noto").mkdir(parents=True)
    (fonts / "opentype" / "noto" / "NotoSansCJK-Regular.ttc").write_bytes(b"")
    found = by_name(doctor.run_checks(isolate_cuda=False))["Japanese font"]
    assert found.status == "ok" and found.found.endswith("NotoSansCJK-Regular.ttc"), found
    monkeypatch.setenv("HANDSON_LANG", "en")
    assert "Japanese font" not in by_name(doctor.run_checks(isolate_cuda=False))
