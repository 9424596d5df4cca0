"""solutions/ is the single source: student copies are in sync, leak nothing and parse."""

import json
import shutil

import pytest

from handson_lib.authoring import build
from conftest import READING_ONLY, ROOT


@pytest.fixture
def course(tmp_path):
    """A copy of the course's source and student trees to tamper with."""
    for top in ("solutions", "notebooks", "exercises"):
        if (ROOT / top).exists():
            shutil.copytree(ROOT / top, tmp_path / top,
                            ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
        else:
            (tmp_path / top).mkdir()
    return tmp_path


def _problems(root):
    return [str(p) for p in build.check_tree(root).problems]


def test_committed_student_copies_match_a_rebuild_and_leak_nothing():
    report = build.check_tree(ROOT)
    assert report.ok, "\n".join(map(str, report.problems))


def test_every_source_has_a_student_copy():
    targets = build.plan(ROOT)
    assert any(kind == "notebook" for _, kind in targets.values())
    for rel in targets:
        assert (ROOT / rel).exists(), f"{rel} missing: run `handson build`"


def test_cli_check_passes_on_the_repository(run_handson):
    res = run_handson("build", "--check")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "in sync" in res.stdout


def test_build_is_idempotent(course):
    build.build(course)
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in build.student_files(course)}
    written, removed = build.build(course)
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in build.student_files(course)}
    assert before == after, "a second build rewrote files"
    assert removed == []
    assert len(written) == len(before) > 0


def test_pasted_solution_line_in_a_notebook_is_a_leak(course):
    path = course / "notebooks" / "00_setup.ipynb"
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "q1_total_batch")
    cell["source"] = "".join(cell["source"]) + "\n    return batch_per_worker * n_workers\n"
    path.write_text(json.dumps(nb, indent=1))
    problems = _problems(course)
    assert any("leaked" in p and "return batch_per_worker * n_workers" in p for p in problems), problems
    assert any("differs from a rebuild" in p for p in problems), problems


def test_pasted_solution_line_in_an_exercise_script_is_a_leak(course):
    source = course / "solutions" / "tiny_task.py"
    source.write_text('def answer():\n    """Return the answer."""\n    ### BEGIN SOLUTION\n'
                      '    return secret_value_of_the_task * 2\n    ### END SOLUTION\n')
    build.build(course)
    assert build.check_tree(course).ok
    released = (course / "exercises" / "tiny_task.py").read_text()
    assert "# PUT YOUR CODE HERE" in released and "secret_value" not in released
    (course / "exercises" / "tiny_task.py").write_text(released + "    return secret_value_of_the_task * 2\n")
    problems = _problems(course)
    assert any("leaked" in p and "exercises/tiny_task.py" in p for p in problems), problems


def test_hidden_test_and_markers_in_student_copy_are_reported(course):
    path = course / "notebooks" / "00_setup.ipynb"
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"]
                if c["metadata"].get("nbgrader", {}).get("grade_id") == "q2_parallelism_test")
    hidden = next(line.strip() for line in "".join(cell_of(course / "solutions" / "00_setup.ipynb",
                                                          "q2_parallelism_test")["source"]).split("\n")
                  if line.startswith("assert needed_parallelism =="))
    cell["source"] = "".join(cell["source"]) + f"\n### BEGIN HIDDEN TESTS\n{hidden}\n"
    path.write_text(json.dumps(nb, indent=1))
    problems = _problems(course)
    assert any("marker 'BEGIN HIDDEN TESTS'" in p for p in problems), problems
    assert any(f"leaked: {hidden!r}" in p for p in problems), problems


def cell_of(path, grade_id):
    return next(c for c in json.loads(path.read_text())["cells"]
                if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)


def test_stale_copy_and_orphan_are_reported(course):
    source = course / "solutions" / "00_setup.ipynb"
    nb = json.loads(source.read_text())
    nb["cells"][0]["source"] = "# A changed title\n"
    source.write_text(json.dumps(nb, indent=1))
    (course / "exercises" / "orphan.py").write_text("print('no source')\n")
    problems = _problems(course)
    assert any(p.startswith("notebooks/00_setup.ipynb: differs") for p in problems), problems
    assert any(p.startswith("exercises/orphan.py: has no source") for p in problems), problems
    build.build(course)
    assert not (course / "exercises" / "orphan.py").exists()
    # The copies are rebuilt; the Japanese translation of the changed cell is now stale and named.
    problems = _problems(course)
    cell = nb["cells"][0]["id"]
    assert problems == [f"solutions/00_setup.ipynb cell {cell}: stale: its English changed since it "
                        f"was translated: '# A changed title'"], problems


def test_release_script_python_and_bash():
    py = ("import os\n\ndef f(x):\n    '''Doc.'''\n    ### BEGIN SOLUTION\n    y = x + 1\n"
          "    return y\n    ### END SOLUTION\n\n### BEGIN HIDDEN TESTS\nassert f(1) == 2\n"
          "### END HIDDEN TESTS\n")
    out = build.release_script(py)
    assert out == "import os\n\ndef f(x):\n    '''Doc.'''\n    # PUT YOUR CODE HERE\n\n"
    sh = ("#!/bin/bash\n### BEGIN SOLUTION\n#PBS -q h-debug\n#PBS -l select=1:mpiprocs=1\n"
          "### END SOLUTION\n#PBS -W group_list=gt00\necho hi\n")
    assert build.release_script(sh) == "#!/bin/bash\n# PUT YOUR CODE HERE\n#PBS -W group_list=gt00\necho hi\n"


def test_unparseable_release_is_reported(course):
    # A whole function body as the solution, with no docstring left: the release cannot parse.
    (course / "solutions" / "broken.py").write_text(
        "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n")
    (course / "solutions" / "broken.sh").write_text(
        "#!/bin/bash\nif true; then\n### BEGIN SOLUTION\necho solved\n### END SOLUTION\nfi\n")
    build.build(course)
    problems = _problems(course)
    assert any(p.startswith("exercises/broken.py: does not parse") for p in problems), problems
    assert any(p.startswith("exercises/broken.sh: does not parse") for p in problems), problems


def test_released_notebooks_keep_grade_cells_locked_with_checksums():
    for rel, (source, kind) in build.plan(ROOT).items():
        if kind != "notebook":
            continue
        nb = json.loads((ROOT / rel).read_text())
        graded = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]
        assert bool(graded) == (rel.name not in READING_ONLY), f"{rel}: graded cells {len(graded)}"
        for cell in graded:
            meta = cell["metadata"]["nbgrader"]
            # a graded answer cell (a markdown answer a person grades) is the student's to edit
            assert (meta["locked"] or meta.get("solution")) and meta.get("checksum"), f"{rel}: {meta.get('grade_id')}"
        assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")


def test_every_recorded_output_is_its_records_rendering():
    """Each ref cell (English in solutions/, Japanese in the build) renders its record, whose code
    cell has not changed since `handson build --record` ran it: one run per notebook and language."""
    from handson_lib.authoring import recording, translations
    assert recording.problems(ROOT) == []
    recorded = list(recording._notebooks_with_records(ROOT))
    assert len(recorded) >= 6
    for path, cells, refs in recorded:
        japanese = translations.translated_notebook(path, "ja", ROOT)
        record = recording.load(ROOT, "ja", path.name)
        by_id = {c.get("id"): c for c in japanese.cells}
        for cid, ref in refs.items():
            assert by_id[ref].source == recording.render(record, cid, "ja")
            assert by_id[ref].source.startswith("参考出力（")


def test_a_hand_edited_or_stale_recorded_output_is_reported(tmp_path):
    from handson_lib.authoring import recording
    root = tmp_path / "course"
    shutil.copytree(ROOT / "solutions", root / "solutions")
    path = root / "solutions" / "06_large_batch.ipynb"
    nb = json.loads(path.read_text())
    cells = {c["id"]: c for c in nb["cells"]}
    cid, ref = next(iter(recording.recorded_cells(nb["cells"]).items()))
    cells[ref]["source"] = "".join(cells[ref]["source"]).replace("0.9", "0.99", 1)
    path.write_text(json.dumps(nb))
    assert any("is not the rendering of its record" in why for _, why in recording.problems(root))
    cells[ref]["source"] = recording.render(recording.load(root, "en", path.name), cid, "en")
    cells[cid]["source"] = "".join(cells[cid]["source"]) + "\nprint('one more line')"
    path.write_text(json.dumps(nb))
    stale = [why for _, why in recording.problems(root)]
    assert sum("changed since it was recorded" in why for why in stale) == 4, stale   # both cells, en and ja
    cells[cid]["source"] = "".join(cells[cid]["source"]).replace("\nprint('one more line')", "")
    path.write_text(json.dumps(nb))
    assert recording.problems(root) == []
    script = root / "solutions" / "train_cifar_multi_node.py"   # notebook 02 runs the solved script
    script.write_text(script.read_text() + "\n# one more line\n")
    stale = {where for where, why in recording.problems(root) if "changed since it was recorded" in why}
    assert {"solutions/recorded/en/02_multi_node.json", "solutions/recorded/ja/02_multi_node.json"} <= stale, stale
    assert not [where for where in stale if "05_tuning" in where or "06_large_batch" in where], stale
    (root / "solutions" / "recorded" / "ja" / "06_large_batch.json").unlink()
    assert any("missing: `handson build --record 06_large_batch.ipynb`" in why for _, why in recording.problems(root))


def test_the_numbers_of_one_recording_agree_across_its_cells():
    """A notebook's recorded cells come from one run: the images/s in a table of runs (01, 02) are
    the `Throughput:` lines those same runs printed in an earlier recorded cell."""
    import re
    from handson_lib.authoring import recording
    checked = 0
    for lang in recording.LANGUAGES:
        for name in ("01_multi_gpu.ipynb", "02_multi_node.ipynb"):
            outputs = [entry["output"] for entry in recording.load(ROOT, lang, name)["cells"].values()]
            printed = [float(x) for text in outputs
                       for x in re.findall(r"Throughput: ([\d.]+) \[images/sec\.\]", text)]
            rows = [float(m.group(1)) for text in outputs
                    for m in re.finditer(r"^\S.*?\s{2,}([\d.]+)\s+[\d.]+x$", text, re.M)]
            assert len(printed) >= 2 and len(rows) >= 2, (lang, name, outputs)
            for value in rows:
                assert any(abs(value - p) <= 0.15 for p in printed), (lang, name, value, printed)
                checked += 1
    assert checked >= 8


def test_the_japanese_recordings_hold_no_english_prose():
    """What the Japanese edition's long cells printed is Japanese, but for tables (columns apart by
    runs of spaces), commands and Chainer's own warnings."""
    import re
    from handson_lib.authoring import recording
    english = []
    for name in sorted({p.name for p, _, _ in recording._notebooks_with_records(ROOT)}):
        for cid, entry in recording.load(ROOT, "ja", name)["cells"].items():
            for line in entry["output"].split("\n"):
                prose = len(re.findall(r"\b[a-z]{3,}\b", line)) >= 5 and line.count("  ") < 2
                if prose and not re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", line) \
                        and not line.startswith("handson ") and "Warning:" not in line:
                    english.append((name, cid, line[:100]))
    assert not english, english


def test_the_recordings_of_04_hide_l_in_every_unit():
    """Exercise 2 of 04 asks L, the gradient bytes: its recorded outputs show it as …, in bytes and
    in MiB (2.079 MiB gave it to within a rounding)."""
    from handson_lib.authoring import recording
    from handson_lib.autograder import answers
    value = answers.gradient_bytes("cnn")
    shown = [f"{value:,}", str(value), f"{value / 2**20:.3f}", f"{value / 2**20:.2f} MiB"]
    for lang in recording.LANGUAGES:
        outputs = "\n".join(e["output"] for e in recording.load(ROOT, lang, "04_scaling.ipynb")["cells"].values())
        assert "L = …" in outputs or "L = … " in outputs, lang
        assert [s for s in shown if s in outputs] == [], lang
