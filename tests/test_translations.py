"""The Japanese edition from the one English source: catalogues, staleness, generated copies,
the Japanese student edition and nbgrader course, and figures that draw Japanese."""

import functools
import io
import re
import json
import shutil
import warnings
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT
from handson_lib import plotting
from handson_lib.authoring import build, course_source, i18n_check, jobscript_translations, release, translations
from handson_lib.autograder import nbgrader_course
from handson_lib.sites import generate, jobscript

JA = "ja"


def _has_japanese(text):
    return any("\u3040" <= ch <= "\u30ff" or "\u4e00" <= ch <= "\u9fff" for ch in text)


def _code_tokens(source):
    """The Python tokens of a code cell that are code: not strings, comments or line ends."""
    import tokenize
    from IPython.core.inputtransformer2 import TransformerManager
    python = TransformerManager().transform_cell(source)
    skip = {tokenize.STRING, tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE}
    return [tok.string for tok in tokenize.generate_tokens(io.StringIO(python).readline)
            if tok.type not in skip]


def test_every_piece_is_translated_and_up_to_date():
    assert i18n_check.problems(ROOT) == []


def _course_copy(tmp_path, files):
    """solutions/<files> and their Japanese catalogues in a folder of their own."""
    for name in files:
        for rel in (Path("solutions") / name, translations.catalogue_path(Path(), JA, name)):
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, tmp_path / rel)
    return tmp_path


def test_a_changed_english_cell_makes_its_translation_stale(tmp_path):
    root = _course_copy(tmp_path, ["00_setup.ipynb"])
    source = root / "solutions" / "00_setup.ipynb"
    assert translations.notebook_problems(source, JA, root) == []
    nb = json.loads(source.read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    cell["source"] = "".join(cell["source"]).replace("Welcome", "Welcome back", 1)
    source.write_text(json.dumps(nb))
    problems = translations.notebook_problems(source, JA, root)
    assert len(problems) == 1 and f"cell {cell['id']}: stale" in problems[0], problems


def test_a_changed_comment_in_a_script_is_reported(tmp_path):
    root = _course_copy(tmp_path, ["train_cifar_multi_node.py"])
    source = root / "solutions" / "train_cifar_multi_node.py"
    assert translations.script_problems(source, JA, root) == []
    text = source.read_text()
    block = translations.comment_blocks(text)[0]
    first_line = text.split("\n")[block.first]
    source.write_text(text.replace(first_line, first_line + " (changed)"))
    problems = translations.script_problems(source, JA, root)
    assert any("comment not translated" in p for p in problems), problems
    assert any("stale" in p for p in problems), problems


def test_comments_are_translated_and_code_and_solutions_are_not():
    source = ("x = 1  # inline stays\n"
              "    # A comment that goes on\n"
              "    # over two lines.\n"
              "    y = compute(x)\n"
              "    ### BEGIN SOLUTION\n"
              "    # the answer's comment\n"
              "    z = 2\n"
              "    ### END SOLUTION\n"
              "print('Done: {n}')\n")
    blocks = translations.comment_blocks(source)
    assert [b.text for b in blocks] == ["A comment that goes on over two lines."]
    entry = {"comments": {"A comment that goes on over two lines.": "二行にわたるコメントです。"},
             "strings": {"Done": "完了"}}
    out = translations.translate_code(source, entry, JA)
    assert "    # 二行にわたるコメントです。\n    y = compute(x)" in out
    assert "# the answer's comment" in out and "x = 1  # inline stays" in out
    assert "print('完了: {n}')" in out


def test_the_japanese_copies_are_built_next_to_the_english_ones():
    for english in sorted((ROOT / "notebooks").glob("*.ipynb")):
        japanese = ROOT / "notebooks" / JA / english.name
        en, ja = nbformat.read(str(english), 4), nbformat.read(str(japanese), 4)
        assert len(en.cells) == len(ja.cells)
        # (an answer cell is the student's to write: nbgrader's stub in both)
        markdown = [(a.source, b.source) for a, b in zip(en.cells, ja.cells) if a.cell_type == "markdown"
                    and not a.metadata.get("nbgrader", {}).get("solution")]
        assert all(_has_japanese(b) for _, b in markdown), english.name
        # Code is never translated: the same tokens but for strings and comments.
        for a, b in zip(en.cells, ja.cells):
            if a.cell_type == "code":
                assert _code_tokens(a.source) == _code_tokens(b.source), (english.name, a.source[:80])
    for script in ("train_cifar_multi_node.py", "run_multi_node_training.sh"):
        text = (ROOT / "exercises" / JA / script).read_text()
        assert _has_japanese(text) and build.STUB in text
    assert (ROOT / "notebooks" / JA / "README.md").exists()
    assert (ROOT / "notebooks" / JA / "figures" / "ring_allreduce.svg").exists()


def test_the_japanese_student_edition_and_course(tmp_path):
    shipped, _ = release.release_student(tmp_path / "edition", lang=JA)
    edition = tmp_path / "edition"
    assert not (edition / "notebooks" / JA).exists() and not (edition / "exercises" / JA).exists()
    nb = json.loads((edition / "notebooks" / "02_multi_node.ipynb").read_text())
    assert _has_japanese("".join(nb["cells"][0]["source"]))
    assert _has_japanese((edition / "README.md").read_text())
    assert "export HANDSON_LANG := ja" in (edition / "Makefile").read_text()
    assert (edition / "notebooks" / "figures" / "ring_allreduce.svg").exists()
    assert "handson_lib.messages_ja" in shipped

    course = tmp_path / "course"
    course_source.assemble(course, ROOT, ["task2"], lang=JA)
    source = json.loads((course / "source" / "task2" / "02_multi_node.ipynb").read_text())
    text = "".join("".join(c["source"]) for c in source["cells"])
    assert _has_japanese(text) and "BEGIN HIDDEN TESTS" in text   # the instructor's, whole
    assert _has_japanese((course / "source" / "task2" / "train_cifar_multi_node.py").read_text())


def test_a_japanese_course_is_autograded_in_japanese(tmp_path, monkeypatch):
    """`handson course assemble --lang ja` records the language; `handson autograde` sets
    HANDSON_LANG from it for the kernels, unless the environment chose one."""
    monkeypatch.delenv("HANDSON_LANG", raising=False)
    course = tmp_path / "course"
    course_source.assemble(course, ROOT, ["setup"], lang=JA)
    assert (course / nbgrader_course.LANG_FILE).read_text().strip() == JA
    assert nbgrader_course.grading_env(course_dir=course)["HANDSON_LANG"] == JA
    assert "HANDSON_LANG" not in nbgrader_course.grading_env(course_dir=tmp_path / "no-marker")
    monkeypatch.setenv("HANDSON_LANG", "en")
    assert "HANDSON_LANG" not in nbgrader_course.grading_env(course_dir=course)
    monkeypatch.delenv("HANDSON_LANG")
    course_source.assemble(course, ROOT, ["setup"])             # re-assembled in English
    assert nbgrader_course.grading_env(course_dir=course)["HANDSON_LANG"] == "en"


def test_a_figure_with_a_japanese_title_has_every_glyph():
    plt = plotting.pyplot("Agg")
    assert plotting.cjk_font(), "no CJK font for matplotlib: `apt-get install fonts-noto-cjk` (.ci/run does)"
    fig, ax = plt.subplots()
    ax.plot([1, 2, 4], [1.0, 1.8, 3.1])
    ax.set_title("ランク数とスループット（画像/秒）")
    ax.set_xlabel("ランク数 p")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.savefig(io.BytesIO(), format="png")
    missing = [str(w.message) for w in caught if "missing from font" in str(w.message)]
    assert not missing, missing
    plt.close(fig)


def _japanese_comment_blocks():
    """(file, [lines]) of every comment block of the Japanese student copies: scripts and code cells."""
    import re
    for path in sorted((ROOT / "exercises" / "ja").iterdir()):
        if path.suffix in (".py", ".sh"):
            yield from ((path.name, b) for b in _blocks(path.read_text()))
    for path in sorted((ROOT / "notebooks" / "ja").glob("*.ipynb")):
        for cell in nbformat.read(str(path), as_version=4).cells:
            if cell.cell_type == "code":
                yield from ((path.name, b) for b in _blocks(cell.source))
    for rel, text in release._student_jobscripts(ROOT, JA).items():
        if rel.suffix == ".sh":
            yield from ((rel.as_posix(), b) for b in _blocks(text))


def _blocks(source):
    import re
    block = []
    for line in source.split("\n") + [""]:
        match = re.match(r"\s*# ?(.*)$", line)
        if match and not line.lstrip().startswith("#!") and re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", line):
            block.append(match.group(1))
        elif block:
            yield block
            block = []


def test_japanese_comments_break_lines_where_japanese_allows():
    """No comment line starts with a closing mark or small kana, none ends with an opening mark,
    no katakana or kanji word is cut between two lines (ラ/ンク, テス/トデータ), and no line
    starts with hiragana but after a mark (にす/る, ではな/く, 使/います)."""
    kana, kanji = r"[\u30a0-\u30ffー]", r"[\u4e00-\u9fff々]"
    hiragana = r"[\u3040-\u309f]"
    import re
    wrong, blocks = [], 0
    for name, block in _japanese_comment_blocks():
        blocks += 1
        for before, after in zip(block, block[1:]):
            if not before or not after:
                continue
            if after[0] in translations.NO_LINE_START or before[-1] in translations.NO_LINE_END:
                wrong.append((name, before[-12:], after[:12]))
            for run in (kana, kanji):
                if re.match(run, before[-1]) and re.match(run, after[0]):
                    wrong.append((name, before[-12:], after[:12]))
            # hiragana starts a line only after a mark (、。）...) or the space after an ASCII word:
            # a word or its ending is cut otherwise (にす/る, ではな/く, あ/なた, 使/います)
            if re.match(hiragana, after[0]) and not re.match(r"[、。）」』】\x21-\x7e\s]", before[-1]):
                wrong.append((name, before[-12:], after[:12]))
    assert blocks > 50
    assert not wrong, wrong


def test_japanese_wrapping_keeps_words_and_marks_together():
    lines = translations.wrap_mixed("同じノードのランクはそのノードの GPU を分け合います（`comm.intra_rank`）。", 30)
    assert all(translations._columns(line) <= 32 for line in lines), lines
    assert not any(line[0] in translations.NO_LINE_START for line in lines[1:]), lines
    assert "ランク" in "".join(lines) and all("ラ" != line[-1] for line in lines), lines


def _japanese_texts():
    """(where, text) of every Japanese text a student reads: the catalogues' cells, comments and
    strings, the library's messages, the glossary above its style section."""
    from handson_lib import messages_ja
    for path in sorted((ROOT / "solutions" / "i18n" / "ja").glob("*.json")):
        data = json.loads(path.read_text())
        for key, entry in (data.get("cells") or {"file": data["file"]}).items():
            if entry.get("text"):
                yield f"{path.name} {key}", entry["text"]
            for kind in ("comments", "strings"):
                for english, text in entry.get(kind, {}).items():
                    yield f"{path.name} {key} {kind}: {english[:40]}", text
    jobscripts = ROOT / "solutions" / "i18n" / "ja" / "jobscripts"
    for english, text in json.loads((jobscripts / "comments.json").read_text())["comments"].items():
        yield f"jobscripts/comments.json comments: {english[:40]}", text
    for english, text in json.loads((jobscripts / "README.md.json").read_text())["pieces"].items():
        yield f"jobscripts/README.md.json: {english[:40]} README.md", text
    for english, text in messages_ja.MESSAGES.items():
        yield f"messages_ja: {english[:40]}", text
    glossary = (ROOT / "solutions" / "i18n" / "ja" / "README.md").read_text()
    yield "README.md", glossary.split("## 文体の決まり")[0]


_CODE = r"```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]+\$|\]\([^)\s]*\)|\{[^{}\n]*\}"
_JA_CHAR = r"[\u3040-\u30ff\u4e00-\u9fff\u3000-\u303f\uff01-\uff5e]"
_JA_LETTER = r"[\u3040-\u30ff\u4e00-\u9fff]"


def test_the_japanese_edition_keeps_its_style_section():
    """The glossary's style rules (JA_STYLE: each word the edition does not use, and its
    replacement) hold in every Japanese text: no such word, full-width parentheses in Japanese
    prose, no line break inside a paragraph of a Japanese markdown cell (it shows as a space)."""
    import re
    glossary = (ROOT / "solutions" / "i18n" / "ja" / "README.md").read_text()
    style = glossary.split("## 文体の決まり")[1]
    assert all(word.strip("*: 。") in style for word in translations.JA_STYLE), "a rule missing from the glossary"
    found, texts = [], 0
    for where, text in _japanese_texts():
        if not re.search(_JA_CHAR, text):
            continue
        texts += 1
        found += [(where, word) for word in translations.JA_STYLE if word in text]
        prose = re.sub(_CODE, "", text, flags=re.S)
        # A call or a formula in prose is code (half-width); a half-width parenthesis that opens
        # or closes Japanese, or holds it, is prose (タスク#2(複数ノード)).
        # (a string of code may be one piece of an f-string: its parentheses pair across pieces)
        paren = re.search(rf"{_JA_LETTER}\(|\)(?={_JA_LETTER})|\([^()\n]*{_JA_CHAR}[^()\n]*\)", prose)
        if paren and " strings" not in where:
            found.append((where, "half-width parenthesis: " + prose[paren.start():][:40]))
        if where.endswith(("README.md",)) or " comments" in where or " strings" in where:
            continue
        for before, after in re.findall(rf"({_JA_CHAR})\n(?![-*+|#>`$<\s]|\d+\. )({_JA_CHAR})", prose):
            found.append((where, f"line break inside a paragraph: {before}/{after}"))
    assert texts > 300
    assert not found, found[:40]


# ----------------------------------------------------------------------------- issue 40, item 5

_FULL_WIDTH_CODE = str.maketrans("（），：；［］｛｝＝", "(),:;[]{}=")
_FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)


def _japanese_markdown():
    """(where, English, Japanese) of every markdown cell of the built Japanese notebooks beside
    its English one, the glossary (notebooks/ja/README.md) and the edition's README."""
    for english in sorted((ROOT / "notebooks").glob("*.ipynb")):
        en = nbformat.read(str(english), 4)
        ja = nbformat.read(str(ROOT / "notebooks" / JA / english.name), 4)
        for a, b in zip(en.cells, ja.cells):
            if a.cell_type == "markdown":
                yield f"{english.name} {a.get('id')}", a.source, b.source
    yield "notebooks/ja/README.md", "", (ROOT / "notebooks" / JA / "README.md").read_text()
    yield "README (ja edition)", release.README, release.README_JA


def _code_spans(markdown):
    return re.findall(r"`([^`\n]+)`", _FENCE.sub("", markdown))


def _formulas(markdown):
    return re.findall(r"\$\$(.+?)\$\$|\$([^$\n]+)\$", _FENCE.sub("", markdown), flags=re.S)


def _compiles(code):
    for mode in ("eval", "exec"):
        try:
            compile(code, "<span>", mode)
            return True
        except SyntaxError:
            pass
    return False


def test_code_spans_of_the_japanese_edition_are_code_a_student_can_copy():
    """A code span that is Python once its full-width marks are made ASCII compiles as written:
    the style rule's full-width parentheses belong to prose, never to code (06 had
    `lb.run（batches=（16, 512）, …）`, a SyntaxError)."""
    compiled, broken = 0, []
    for where, _, text in _japanese_markdown():
        for span in _code_spans(text):
            ascii_span = span.translate(_FULL_WIDTH_CODE)
            if "(" not in ascii_span or re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", span) \
                    or not _compiles(ascii_span):
                continue
            compiled += 1
            if not _compiles(span):
                broken.append((where, span))
    assert compiled > 40, compiled
    assert not broken, broken


def test_formulas_and_code_blocks_of_the_japanese_edition_are_the_english_ones():
    """Formulas are the English cell's, character for character; a fenced Python or shell block
    differs from the English one only in its comments."""
    wrong, formulas, blocks = [], 0, 0
    for where, en, ja in _japanese_markdown():
        if where.startswith(("notebooks/ja/README", "README")):
            continue
        english = {"".join(f) for f in _formulas(en)}
        for formula in ("".join(f) for f in _formulas(ja)):
            formulas += 1
            if formula not in english:
                wrong.append((where, "formula", formula[:80]))
        for (lang_en, code_en), (lang_ja, code_ja) in zip(_FENCE.findall(en), _FENCE.findall(ja)):
            if lang_en in ("python", "bash", "sh"):
                blocks += 1
                uncommented = [[line.split("#")[0].rstrip() for line in code.split("\n")]
                               for code in (code_en, code_ja)]
                if uncommented[0] != uncommented[1]:
                    wrong.append((where, "code block", code_ja[:80]))
    assert formulas > 10 and blocks > 5, (formulas, blocks)
    assert not wrong, wrong


def _every_japanese_text():
    """_japanese_texts() and the Japanese edition's README."""
    yield from _japanese_texts()
    yield "README (ja edition)", release.README_JA


def _all_a_japanese_student_reads():
    """_every_japanese_text() and, as built: every cell of the Japanese notebooks (their recorded
    outputs and code strings too), the Japanese exercises and job scripts, every catalogue under
    solutions/i18n/ja/, the edition README's "At your site" steps, the figures' words and the
    recorded outputs' labels (issue 49: GPUs counted with 台 and 個, the seeds named four ways)."""
    from handson_lib.authoring import figure_drawing, recording
    from handson_lib.sites import site_setup
    yield from _every_japanese_text()
    for path in sorted((ROOT / "notebooks" / JA).glob("*.ipynb")):
        for cell in nbformat.read(str(path), 4).cells:
            yield f"notebooks/ja/{path.name} {cell.get('id')}", cell.source
    for path in sorted((ROOT / "exercises" / JA).rglob("*")):
        if path.suffix in (".py", ".sh"):
            yield str(path.relative_to(ROOT)), path.read_text()
    for path in sorted((ROOT / "solutions" / "i18n" / JA).glob("*/*.sh.json")):   # miyabi/, abci/
        for kind, pieces in json.loads(path.read_text())["file"].items():
            yield from ((f"{path.relative_to(ROOT)} {kind}", text) for text in pieces.values())
    for rel, text in release._student_jobscripts(ROOT, JA).items():
        yield f"edition jobscripts/{rel}", text
    yield "README (ja edition): At your site", site_setup.at_your_site(JA)
    yield from (("figure_drawing.FIGURE_TEXT", text) for text in figure_drawing.FIGURE_TEXT[JA].values())
    yield "recording.LABELS", recording.LABELS[JA] + recording.MACHINE[JA]


def test_the_japanese_edition_uses_one_word_for_each_thing():
    """The glossary's word list (translations.JA_WORDS: コース, フォルダー, プレースホルダー,
    ランチャー, GPU counted in 枚, the sources named シード資料 and a random seed 乱数シード, タスク#N and
    ハンズオン#2 as the seeds write them) in everything a student reads in Japanese, no half-width space after 。 or 、, every
    **目標:** in the です・ます form, and one Japanese title for each English title."""
    glossary = (ROOT / "solutions" / "i18n" / "ja" / "README.md").read_text()
    missing_rules = [w for w in translations.JA_WORDS.values() if w != "GPU N 枚" and w not in glossary]
    found = []
    for where, text in _all_a_japanese_student_reads():
        for pattern, word in translations.JA_WORDS.items():
            found += [(where, f"{match.group(0)} -> {word}") for match in re.finditer(pattern, text)]
    for where, text in _every_japanese_text():
        prose = _FENCE.sub("", text)
        found += [(where, "space after a mark: " + prose[max(m.start() - 8, 0):m.end() + 8])
                  for m in re.finditer(translations.JA_SPACE_AFTER_MARK, prose)]
        for goal in re.findall(r"\*\*目標:\*\*(.*)", text):
            sentences = [s.strip() for s in re.sub(r"（[^（）]*）", "", goal).split("。") if s.strip()]
            found += [(where, "目標 not in the です・ます form: " + s[-20:]) for s in sentences
                      if not s.endswith(("ます", "です"))]
    titles = {}
    for where, en, ja in _japanese_markdown():
        en_titles, ja_titles = (re.findall(r"^#+ .*$", t, re.M) for t in (en, ja))
        if len(en_titles) == len(ja_titles):
            for a, b in zip(en_titles, ja_titles):
                titles.setdefault(a, set()).add(b)
    found += [("titles", f"{english} -> {sorted(japanese)}") for english, japanese in titles.items()
              if len(japanese) > 1]
    assert not missing_rules and not found, (missing_rules, found[:80])


def test_the_glossary_names_only_folders_the_edition_has(tmp_path):
    """The Japanese edition's glossary (its notebooks/README.md) speaks of that edition: every
    path it names is there (it once named notebooks/ja/, solutions/ and tests/)."""
    edition = tmp_path / "edition"
    release.release_student(edition, lang=JA)
    glossary = (edition / "notebooks" / "README.md").read_text()
    paths = [span for span in _code_spans(glossary) if re.fullmatch(r"[\w.-]+/[\w./-]*", span)]
    assert paths, "the glossary names no folder of the edition"
    assert [p for p in paths if not (edition / p).exists()] == []


def test_the_japanese_notebooks_quote_what_the_tools_print_in_japanese():
    """A message a tool prints, quoted in a Japanese notebook, is quoted as the Japanese tool
    prints it (00 told students to look for "CPU course: ready")."""
    from handson_lib import messages_ja
    quoted = [(where, english) for where, _, text in _japanese_markdown()
              for english in messages_ja.MESSAGES if "{" not in english and len(english) > 6
              and (f"**{english}**" in text or f"`{english}`" in text)]
    assert quoted == []


def _sections(readme):
    """{title: body} of a README's `## ` sections, in order."""
    parts = re.split(r"^## (.*)$", readme, flags=re.M)
    return list(zip(parts[1::2], parts[2::2]))


def _glossary_terms():
    """(English, Japanese) pairs of the glossary's tables (rows of single terms or terms
    separated by " / " on both sides)."""
    glossary = (ROOT / "solutions" / "i18n" / "ja" / "README.md").read_text()
    for row in re.findall(r"^\| ([^|`]+) \| ([^|`]+) \|", glossary, re.M):
        english, japanese = (cell.split(" / ") for cell in row)
        if len(english) == len(japanese):
            yield from ((e.strip(), j.strip()) for e, j in zip(english, japanese)
                        if re.fullmatch(r"[a-z][a-z -]+", e.strip()))


def _named_things(text):
    """Names in an English text: CamelCase, acronyms, names with a hyphen or a digit (Reedbush-H)."""
    words = re.findall(r"\b[A-Za-z][\w-]*[\w]\b", re.sub(r"`[^`]*`", "", text))
    return {w for w in words if sum(c.isupper() for c in w) >= 2
            or (w[0].isupper() and re.search(r"[-\d]", w))}


def test_the_japanese_readme_says_what_the_english_one_says():
    """Section by section, the edition's Japanese README has the English one's commands and code,
    its names (Reedbush-H, JupyterHub, ...) and, where the English uses a glossary term, the
    glossary's Japanese for it (reference solution: 模範解答)."""
    en, ja = _sections(release.README), _sections(release.README_JA)
    assert len(en) == len(ja), ([t for t, _ in en], [t for t, _ in ja])
    terms = list(_glossary_terms())
    assert ("reference solution", "模範解答") in terms
    missing = []
    for (en_title, en_body), (ja_title, ja_body) in zip(en, ja):
        # (the Japanese commands may set HANDSON_LANG=ja: their messages in Japanese outside `make lab`)
        indented = [[line.split("#")[0].rstrip().replace("HANDSON_LANG=ja ", "")
                     for line in body.split("\n") if line.startswith("    ")] for body in (en_body, ja_body)]
        if indented[0] != indented[1]:
            missing.append((en_title, "code lines", indented[0], indented[1]))
        missing += [(en_title, "code", span) for span in set(_code_spans(en_body)) - set(_code_spans(ja_body))]
        missing += [(en_title, "name", name) for name in _named_things(en_body)
                    if name not in ja_body and name.removesuffix("s") not in ja_body]
        missing += [(en_title, "term", f"{english} -> {japanese}") for english, japanese in terms
                    if re.search(rf"\b{english}\b", en_body, re.I) and japanese not in ja_body]
    assert not missing, missing


def test_each_editions_reference_output_says_it_is_a_run_of_its_own():
    """The English and Japanese records are two runs of each notebook, and their numbers differ
    (02: 1.75x and 2.04x, a 1-rank accuracy of 0.426 and 0.137): every recorded output says why."""
    said = {"en": "the Japanese edition's is another run", JA: "英語版の参考出力は別の実行です"}
    refs = 0
    for english in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for lang, path in (("en", english), (JA, ROOT / "notebooks" / JA / english.name)):
            for cell in nbformat.read(str(path), 4).cells:
                if str(cell.get("id", "")).startswith("ref-"):
                    refs += 1
                    assert said[lang] in cell.source and "scatter_dataset" in cell.source, (path.name, cell.id)
    assert refs > 20, refs


# ----------------------------------------------------------------------------- issue 40, item 5: jobscripts/ in Japanese

def _without_comments(text):
    """A job script's lines but its comments (the #PBS lines, `#!` and `# handson-site:` kept:
    they are what the scheduler, the shell and the linter read)."""
    return [line for line in text.split("\n") if not line.lstrip().startswith("#")
            or line.startswith(("#PBS", "#!", "# handson-site:", build.STUB))]


@pytest.fixture(scope="module")
def editions(tmp_path_factory):
    """The English and the Japanese student editions."""
    out = tmp_path_factory.mktemp("editions")
    release.release_student(out / "en")
    release.release_student(out / JA, lang=JA)
    return out / "en", out / JA


def test_the_japanese_editions_job_scripts_are_commented_in_japanese(editions):
    """Every job script and env.sh of the Japanese edition's jobscripts/ has Japanese comments and
    nothing else changed: without comments it is the English edition's, line for line, the
    commands its comments give (`#   make setup`, `# module load ...`) are the English ones, and
    `handson jobscript lint` finds the same in both."""
    en, ja = editions
    scripts = sorted(p.relative_to(en) for p in (en / "jobscripts").rglob("*.sh"))
    assert scripts == sorted(p.relative_to(ja) for p in (ja / "jobscripts").rglob("*.sh")) and len(scripts) > 10
    wrong = []
    for rel in scripts:
        english, japanese = (en / rel).read_text(), (ja / rel).read_text()
        comments = [line for line in japanese.split("\n") if line.lstrip().startswith("# ")
                    and not line.startswith("# handson-site:")]
        if not any(_has_japanese(line) for line in comments) or japanese == english:
            wrong.append((rel, "no Japanese comment"))
        if _without_comments(english) != _without_comments(japanese):
            wrong.append((rel, "a line that is not a comment changed"))
        # (a gap's instruction goes on in an indented line: words, not a command)
        gaps = [f"# {generate.resource_request(site, kind)}" for site in generate.script_sites()
                for kind in generate.EXERCISE_TASKS]
        commands = jobscript_translations._commands_in_comments(
            functools.reduce(lambda text, gap: text.replace(gap, ""), gaps, english).split("\n"))
        kept = jobscript_translations._commands_in_comments(japanese.split("\n"))
        wrong += [(rel, f"command {c!r}") for c in commands if c not in kept]
        english_only = [line for line in comments if re.search(r"[A-Za-z]{4,} [a-z]{3,} [a-z]{3,}", line)
                        and not _has_japanese(line) and not jobscript_translations._COMMAND_IN_COMMENT.match(line)]
        wrong += [(rel, f"English left: {line[:60]}") for line in english_only]
        findings = []
        for path, text in ((en / rel, english), (ja / rel, japanese)) if rel.name.startswith("run_") else ():
            site = jobscript.site_for_script(path, text)
            findings.append(sorted((f.severity, f.code, f.message, f.text) for f in jobscript.lint(text, site, template=True)))
        if findings and findings[0] != findings[1]:
            wrong.append((rel, f"lint differs: {findings}"))
    assert not wrong, wrong


def test_the_japanese_editions_jobscripts_readme_is_japanese(editions):
    """jobscripts/README.md of the Japanese edition is Japanese, with the English one's code spans,
    code lines (but their comments) and tables, and the note on where the task scripts are."""
    en, ja = editions
    english, japanese = ((edition / "jobscripts" / "README.md").read_text() for edition in editions)
    assert _has_japanese(japanese) and not _has_japanese(english)
    assert release.task_scripts_note(JA) in japanese and release.task_scripts_note("en") in english
    assert set(_code_spans(english)) <= set(_code_spans(japanese))
    code = [[line.split(" #")[0] for line in text.split("\n") if line.startswith("    ")] for text in (english, japanese)]
    assert code[0] == code[1] and code[0]
    rows = [[line.count("|") for line in text.split("\n") if line.startswith("|")] for text in (english, japanese)]
    assert rows[0] == rows[1]
    titles = re.findall(r"^#+ .*$", japanese, re.M)
    assert titles and all(_has_japanese(t) for t in titles), titles


def _jobscripts_copy(tmp_path):
    """jobscripts/ and its Japanese catalogues in a folder of their own."""
    shutil.copytree(ROOT / "jobscripts", tmp_path / "jobscripts")
    catalogues = Path("solutions") / "i18n" / JA / "jobscripts"
    shutil.copytree(ROOT / catalogues, tmp_path / catalogues)
    return tmp_path


def test_a_changed_comment_of_a_job_script_template_is_reported(tmp_path):
    """A template comment that changed (every site's env.sh, as `handson build` writes them) is
    untranslated, its old translation stale; a changed row of jobscripts/README.md too; and
    `i18n_check.problems`, which `handson build --check` reports, says so."""
    root = _jobscripts_copy(tmp_path)
    assert jobscript_translations.jobscript_problems(JA, root) == []
    for env_sh in (root / "jobscripts").glob("*/env.sh"):   # one template: every site's env.sh
        env_sh.write_text(env_sh.read_text().replace("# The course library (handson_lib)", "# The course's library (handson_lib)"))
    readme = root / "jobscripts" / "README.md"
    readme.write_text(readme.read_text().replace("| GPUs per node |", "| GPUs in a node |"))
    problems = jobscript_translations.jobscript_problems(JA, root)
    assert any("/env.sh: comment not translated: \"The course's library" in p for p in problems), problems
    assert any("stale: the comment" in p and "The course library" in p for p in problems), problems
    assert any("README.md: not translated: '| GPUs in a node |" in p for p in problems), problems
    assert any("stale: '| GPUs per node |" in p for p in problems), problems
    assert all(p.startswith("i18n/ja/jobscripts/") for p in problems), problems   # build --check: under solutions/
    assert set(problems) <= set(i18n_check.problems(root, [JA]))


def test_a_translation_that_changes_a_command_is_reported(tmp_path):
    """A command a comment gives (`#   make setup`) and a code line of the README stay as written."""
    root = _jobscripts_copy(tmp_path)
    for name, key in (("comments.json", "comments"), ("README.md.json", "pieces")):
        path = root / "solutions" / "i18n" / JA / "jobscripts" / name
        catalogue = json.loads(path.read_text())
        catalogue[key] = {english: text.replace("make setup", "make  setup").replace("lint run_multi", "lint  run_multi")
                          for english, text in catalogue[key].items()}
        path.write_text(json.dumps(catalogue, ensure_ascii=False))
    problems = jobscript_translations.jobscript_problems(JA, root)
    assert any("changes the command 'make setup'" in p for p in problems), problems
    assert any("README.md: the translation changes the code" in p for p in problems), problems


# ----------------------------------------------------------------------------- issue 49, item 5

def _near_copies_of_quotes(text, threshold=0.7):
    """(quote, likeness) of each italic Japanese quote of `text` (*GPU の計算が効率的かどうか*)
    that has a near-copy of itself within 80 characters around it: in English the quote comes with
    a gloss, and a gloss translated back into Japanese says the quote twice."""
    import difflib
    found = []
    for match in re.finditer(r"(?<![*\w])\*([^*\s`][^*\n`]*[\u3040-\u9fff][^*\n`]*[^*\s`])\*(?![*\w])", text):
        quote = re.sub(r"\s+", "", match.group(1))
        if len(quote) < 8:      # a word in italics is emphasis, and may well come again
            continue
        around = re.sub(r"\s+", "", text[max(0, match.start() - 80):match.start()] + "\x00"
                        + text[match.end():match.end() + 80])
        likeness = max(difflib.SequenceMatcher(None, quote, around[i:i + len(quote)]).ratio()
                       for i in range(max(1, len(around) - len(quote) + 1)))
        if likeness >= threshold:
            found.append((match.group(1), round(likeness, 2)))
    return found


def test_no_japanese_quote_comes_with_a_near_copy_of_itself():
    """Issue 49: 03 paired each of the talk's Japanese questions with a near-copy of itself
    (`GPU の計算は効率的か（*GPU の計算が効率的かどうか*）`), 00 the sources' titles."""
    old = "* GPU の計算は効率的か（*GPU の計算が効率的かどうか*）\n"
    assert _near_copies_of_quotes(old) == [("GPU の計算が効率的かどうか", 0.71)]
    doubled = [(where, quote) for where, _, ja in _japanese_markdown() for quote in _near_copies_of_quotes(ja)]
    assert doubled == []


def test_the_japanese_catalogue_has_each_message_once():
    """A message given twice in messages_ja.py: Python keeps the last, silently."""
    import ast
    from collections import Counter
    tree = ast.parse((ROOT / "handson_lib" / "messages_ja.py").read_text())
    catalogue = next(node for node in ast.walk(tree) if isinstance(node, ast.Dict))
    counts = Counter(key.value for key in catalogue.keys)
    assert [key for key, n in counts.items() if n > 1] == []


def test_a_japanese_recording_fills_in_the_answers_as_a_japanese_student_writes_them(tmp_path):
    """`handson build --record` fills the Japanese edition's exercises with the solved scripts
    commented in Japanese, as a student's own are (they were English: 02's diff of the MNIST
    conversion and every warning's line number came from the English script)."""
    from handson_lib.authoring import recording
    edition = tmp_path / "edition"
    release.release_student(edition, lang=JA)
    recording.fill_answers(edition, ROOT, lambda source: translations.translated_script(source, JA, ROOT))
    solved = (edition / "exercises" / "train_mnist_multi_node.py").read_text()
    assert _has_japanese(solved) and "### BEGIN SOLUTION" not in solved and "### END SOLUTION" not in solved
    assert "optimizer = chainermn.create_multi_node_optimizer(optimizer, comm)" in solved
    english = recording._without_markers((ROOT / "solutions" / "train_mnist_multi_node.py").read_text())
    assert _code_tokens(solved) == _code_tokens(english)
