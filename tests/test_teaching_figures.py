"""The teaching figures: committed SVGs match their drawing code, every notebook image exists,
and the arithmetic the figures draw agrees with Chainer and with the instructor's answers."""

import json
import re
import shutil
from pathlib import Path

import pytest

from handson_lib.autograder import answers
from handson_lib.authoring import build, figure_drawing, teaching_figures
from conftest import ROOT

IMAGE_RE = re.compile(r"!\[[^\]]*\]\((figures/[^)\s]+\.svg)\)")


def _images(folder):
    """{notebook name: [figures/x.svg, ...]} of the markdown images in a folder's notebooks."""
    found = {}
    for path in sorted((ROOT / folder).glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        found[path.name] = [m for c in cells if c["cell_type"] == "markdown"
                            for m in IMAGE_RE.findall("".join(c["source"]))]
    return found


def test_committed_figures_are_byte_identical_to_a_new_rendering(tmp_path):
    written, removed = teaching_figures.write(tmp_path)
    expected = {teaching_figures.folder(lang) / f"{n}.svg" for n in teaching_figures.FIGURES
                for lang in ("en", "ja")}
    assert set(written) == expected and removed == []
    for rel in sorted(expected):
        data = (tmp_path / rel).read_bytes()
        assert data.startswith(b"<?xml") and b"<svg" in data
        assert (ROOT / rel).read_bytes() == data, f"{rel} is stale: run `handson build`"
        shown = ROOT / "notebooks" / ("ja" if "i18n" in rel.parts else "") / "figures" / rel.name
        assert shown.read_bytes() == data, f"{shown.relative_to(ROOT)} is stale: run `handson build`"


def test_the_japanese_edition_draws_every_figure_in_japanese(tmp_path):
    """Each teaching figure has a Japanese drawing (the English one's words from FIGURE_TEXT: none
    left in English), shown by the Japanese notebooks and shipped in the Japanese edition."""
    from handson_lib.authoring import release
    del figure_drawing._UNTRANSLATED[:]
    for name in teaching_figures.FIGURES:
        english, japanese = teaching_figures.render(name), teaching_figures.render(name, lang="ja")
        assert japanese != english, name
    assert figure_drawing._UNTRANSLATED == []
    assert teaching_figures.render("warmup_lr") == (ROOT / teaching_figures.FOLDER / "warmup_lr.svg").read_bytes()
    release.release_student(tmp_path / "edition", lang="ja")
    for name in teaching_figures.FIGURES:
        shipped = (tmp_path / "edition" / "notebooks" / "figures" / f"{name}.svg").read_bytes()
        assert shipped == (ROOT / teaching_figures.folder("ja") / f"{name}.svg").read_bytes(), name


def test_every_figure_is_shown_and_every_shown_figure_exists():
    shown = _images("solutions")
    used = {ref for refs in shown.values() for ref in refs}
    for name in teaching_figures.FIGURES:
        assert f"figures/{name}.svg" in used, f"no notebook shows figures/{name}.svg"
    for notebook, refs in shown.items():
        for ref in refs:
            assert (ROOT / "solutions" / ref).is_file(), f"{notebook} shows {ref}, not in solutions/"
            assert (ROOT / "notebooks" / ref).is_file(), f"{notebook} shows {ref}, not in notebooks/"
    assert _images("notebooks") == shown, "the student notebooks show other images: run `handson build`"


def test_figures_are_copied_next_to_the_student_notebooks():
    targets = build.plan(ROOT)
    for name in teaching_figures.FIGURES:
        rel = teaching_figures.FOLDER / f"{name}.svg"
        assert targets[Path("notebooks") / "figures" / rel.name] == (ROOT / rel, "copy")
    assert not any(str(t).startswith("exercises/figures") for t in targets)


@pytest.fixture
def course_figures(tmp_path, monkeypatch):
    """A course root holding a copy of the committed figures; `rendered()` returns the committed
    bytes (these tests check the comparison, not the drawing, and stay fast)."""
    committed = {teaching_figures.FOLDER / f"{n}.svg":
                 (ROOT / teaching_figures.FOLDER / f"{n}.svg").read_bytes() for n in teaching_figures.FIGURES}
    monkeypatch.setattr(teaching_figures, "rendered", lambda: committed)
    folder = tmp_path / teaching_figures.FOLDER
    folder.parent.mkdir(parents=True)
    shutil.copytree(ROOT / teaching_figures.FOLDER, folder)
    return tmp_path, folder


def test_edited_missing_and_orphan_figures_are_stale(course_figures):
    root, folder = course_figures
    assert teaching_figures.stale(root) == []
    edited = folder / "ring_allreduce.svg"
    edited.write_bytes(edited.read_bytes().replace(b"#ffffff", b"#fffffe", 1))
    (folder / "warmup_lr.svg").unlink()
    (folder / "old_drawing.svg").write_text("<svg/>")
    found = {rel.name: why for rel, why in teaching_figures.stale(root)}
    assert set(found) == {"ring_allreduce.svg", "warmup_lr.svg", "old_drawing.svg"}
    assert found["ring_allreduce.svg"].startswith("differs") and "handson build" in found["ring_allreduce.svg"]
    assert found["warmup_lr.svg"].startswith("missing")
    assert "no function" in found["old_drawing.svg"]
    teaching_figures.write(root)
    assert teaching_figures.stale(root) == []
    assert not (folder / "old_drawing.svg").exists()


def test_build_check_reports_a_stale_figure(course_figures):
    root, folder = course_figures
    (folder / "ranks_2x2.svg").write_text("<svg/>")
    problems = [str(p) for p in build.check_tree(root).problems]
    assert any(p.startswith("solutions/figures/ranks_2x2.svg: differs") for p in problems), problems


def test_scatter_windows_are_chainermns():
    from chainermn.datasets.scatter import _scatter_index
    for n in (0, 1, 7, 10, 11, 64):
        for size in (1, 2, 3, 4, 5):
            for equal in (True, False):
                theirs = [(b, e) for _, b, e in _scatter_index(n, size, equal)]
                assert teaching_figures.scatter_ranges(n, size, equal) == theirs, (n, size, equal)
    windows = teaching_figures.scatter_ranges(10, 4)
    assert sum(e - b for b, e in windows) > 10, "the drawn case must show duplicated examples"


@pytest.mark.parametrize("p", [1, 2, 3, 4, 8])
def test_ring_allreduce_sums_everything_with_2_p_minus_1_over_p_traffic(p):
    states, sent = teaching_figures.ring_allreduce_steps(p)
    everyone = frozenset(range(p))
    after_reduce_scatter = states[p - 1]
    for r in range(p):
        complete = [c for c in range(p) if after_reduce_scatter[r][c] == everyone]
        assert complete == [(r + 1) % p]
    assert all(chunk == everyone for row in states[-1] for chunk in row)
    # Each step sends one chunk of L/p: in all 2(p-1)/p of L, as answers.allreduce_traffic_bytes.
    for chunks in sent:
        assert chunks / p == pytest.approx(answers.allreduce_traffic_bytes(1.0, p))


def test_warmup_curve_is_the_instructors_rule():
    for args in [(0.1, 32, 256, 10), (0.05, 64, 64, 3), (0.2, 16, 512, 0)]:
        for i in range(14):
            assert teaching_figures.warmup_rate(i, *args) == pytest.approx(answers.warmup_lr(i, *args))


def test_figure_module_does_not_ship_or_import_answers():
    source = (ROOT / "handson_lib" / "authoring" / "teaching_figures.py").read_text()
    imports = re.findall(r"^\s*(?:from|import) .*$", source, re.M)
    assert imports and not any("answers" in line for line in imports), imports
    from handson_lib import boundary
    shipped, _ = boundary.shipped_modules()
    assert "handson_lib.authoring.teaching_figures" not in shipped


def test_compute_vs_allreduce_uses_the_seeds_numbers():
    rate = teaching_figures.fitted_seconds_per_byte()
    for nodes, seconds in teaching_figures.SEED_ALLREDUCE_S.items():
        assert teaching_figures.allreduce_model(nodes, rate) == pytest.approx(seconds, rel=0.05)
    assert teaching_figures.allreduce_model(1, rate) == 0
    # seed 001: at 16 GPUs (4 nodes) the allreduce takes more than half of the iteration.
    share = teaching_figures.allreduce_model(4, rate) / (
        teaching_figures.allreduce_model(4, rate) + teaching_figures.SEED_COMPUTE_S)
    assert share > 0.5
