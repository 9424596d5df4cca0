"""Other languages of the course from the one English source: catalogues beside solutions/.

Each source file that students get has a catalogue per language, `solutions/i18n/<lang>/<file>.json`:

    {"language": "ja", "source": "02_multi_node.ipynb",
     "cells": {"<cell id>": {"en_hash": "3f2a...", "text": "<the markdown cell, translated>"},
               "<cell id>": {"comments": {"<English comment>": "<translation>"},
                             "strings": {"<English text in a string>": "<translation>"}}}}

A script's catalogue has one entry, "file", shaped like a code cell's. Why JSON per file and not
gettext: a notebook's unit of translation is a whole markdown cell (Markdown, LaTeX, tables), keyed
by nbgrader's stable cell id, and a comment is a whole comment block; .po files would cut them into
lines or need a custom extractor. gettext's one good idea, the English kept beside the
translation to catch staleness, is kept: a markdown translation carries the hash of the English
it was made from, and comments and strings are keyed by their English text.

- markdown cells: the translation replaces the cell; stale when the English changed (hash);
- code cells and scripts: only full-line comment blocks (outside solution and hidden-test regions,
  which students never see, and not `#!`, `#PBS`, nbgrader markers or `# handson-site:` lines) and,
  as "strings", text inside string literals meant for the reader (docstrings, messages) or in a
  comment at the end of a code line; code is never translated. Each block of
  comment lines is one key (its lines joined by spaces, without `#`); its translation is written
  back as comment lines with the block's indentation;
- `problems()` names every untranslated or stale piece: `handson build --check` fails on them.

`handson i18n template --lang ja` adds the missing entries to the catalogues (English text and
hash filled in, translation empty) for a translator to fill in.

The generated job scripts (jobscripts/) are not in solutions/: their catalogues and checks are
handson_lib.authoring.jobscript_translations'; handson_lib.authoring.i18n_check names the problems
of both.
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path

from handson_lib import COURSE_ROOT, settings
from handson_lib.authoring import recording

#: Languages the course is built in besides English (`handson build` writes notebooks/<lang>/ ...).
LANGUAGES = settings.LANGUAGES[1:]
CATALOGUES = "i18n"
#: Width of a translated comment line, in wide characters (two columns each).
COMMENT_WIDTH = {"ja": 44}
_MACHINE_COMMENT = re.compile(r"^\s*(#!|#PBS|###|# handson-site:|# noqa|# PUT YOUR CODE HERE)")
_REGION_START = ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS")
_REGION_END = ("END SOLUTION", "END HIDDEN TESTS")


def en_hash(text):
    """The digest of the English a translation was made from: the records' digest (one for both)."""
    return recording.source_hash(text)


def catalogue_path(root: Path, lang, source_rel):
    return Path(root) / "solutions" / CATALOGUES / lang / f"{Path(source_rel).as_posix()}.json"


def load(root: Path, lang, source_rel):
    path = catalogue_path(root, lang, source_rel)
    if not path.exists():
        return None
    return json.loads(path.read_text())


# ----------------------------------------------------------------------------- comment blocks

@dataclass
class CommentBlock:
    first: int          # index of its first line
    last: int           # index of its last line (inclusive)
    indent: str
    text: str           # the lines' text without `#`, joined by single spaces


def comment_blocks(source):
    """Full-line comment blocks a student sees: outside solution / hidden-test regions, not
    machine lines. Consecutive comment lines with the same indentation form one block."""
    lines = source.split("\n")
    blocks, region, current = [], False, None
    for i, line in enumerate(lines):
        if any(m in line for m in _REGION_START):
            region, current = True, None
            continue
        if any(m in line for m in _REGION_END):
            region, current = False, None
            continue
        stripped = line.strip()
        if region or not stripped.startswith("#") or _MACHINE_COMMENT.match(line):
            current = None
            continue
        indent = line[:len(line) - len(line.lstrip())]
        text = stripped.lstrip("#").strip()
        if current is not None and current.indent == indent and current.last == i - 1:
            current.last = i
            current.text = f"{current.text} {text}".strip()
        else:
            current = CommentBlock(i, i, indent, text)
            blocks.append(current)
    return [b for b in blocks if b.text]


def _columns(text):
    """Display width: East Asian wide characters take two columns."""
    import unicodedata
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


#: The Japanese edition's style (the glossary's "文体の決まり", solutions/i18n/ja/README.md):
#: words it does not use, each with the one it uses instead.
JA_STYLE = {"皆さん": "あなた", "**問 ": "**問題 ", "ゴール": "目標", "**目標。**": "**目標:**", "**目標**:": "**目標:**",
            "反復": "イテレーション", "リファレンス": "模範解答, 参照用", "参照出力": "参考出力",
            "スピードアップ": "速度向上", "高速化率": "速度向上", "クラスター": "クラスタ", "スケジューラー": "スケジューラ",
            "チャンスレート": "チャンスレベル", "包む": "ラップする", "包ん": "ラップし"}

#: GPUs counted in anything but 枚 (the glossary's rule; JA_WORDS below).
JA_WORDS_GPU = (r"(?:GPU|P100|V100|A100|H100|H200|GH200|TITAN X)\**\s*(?:を|が|は)?\s*(?:[\d,]+|\{[^{}]*\}|何)\s*[台個]"
                r"|(?:[\d,]+|\{[^{}]*\}|何)\s*[台個](?:目)?の\s*(?:GPU|Tesla|P100|V100|A100|H100|H200)"
                r"|(?<![x×] )(?<![\w.])[\d,]+ ?GPU(?![\w/-]) ?(?=[\u3040-\u30ff\u4e00-\u9fff（）])")
#: The glossary's word list: one word for each thing (its "用語集" and "文体の決まり"); each
#: pattern matches the variants the edition does not use, the value is the word it uses.
JA_WORDS = {r"講座": "コース",
            r"フォルダ(?!ー)": "フォルダー",
            r"プレースホルダ(?!ー)|仮の値": "プレースホルダー",
            r"起動ツール": "ランチャー",
            # A GPU is a card: counted with 枚 (GPU 4 枚, P100 2 枚), never 台 or 個 (GPU 2 個,
            # 何台の GPU, GPU は {gpus} 個) nor bare in a sentence (4 GPU で; the layout "2 ノード x
            # 2 GPU" is notation); a machine or node with 台.
            JA_WORDS_GPU: "GPU N 枚",
            # The course's sources (seed 000-004) are シード資料 (シード資料 002); a random seed is 乱数シード.
            r"(?<!乱数)シード(?!資料)|\b[Ss]eeds? \d{3}": "シード資料",
            r"タスク #": "タスク#",
            r"ハンズオン #": "ハンズオン#"}
#: Spacing: no half-width space after 。 or 、 (a table's cell border `|` may follow one).
JA_SPACE_AFTER_MARK = r"[。、][ \t]+(?![|\s])"


#: Japanese line-breaking rules (kinsoku): what may not start a line (closing marks, small kana,
#: the long-vowel mark) and what may not end one (opening marks).
NO_LINE_START = set("、。，．・：；？！）」』】〉》〕］｝ーぁぃぅぇぉっゃゅょゎァィゥェォッャュョヮヵヶ,.:;?!)]}%")
NO_LINE_END = set("（「『【〈《〔［｛([{")
#: A run that is one word for line breaking: ASCII (a word, `code`, a path) or katakana and kanji
#: (with the long-vowel mark), each with the hiragana that follows it (its ending or particle:
#: 使います, ランクを), or hiragana alone. A line breaks only between such runs, so hiragana never
#: starts a line but after a space or a mark (にす/る, ではな/く were cut before).
_HIRAGANA = "[\u3040-\u309f]"
_WORD = (rf"`[^`]*`{_HIRAGANA}*|[\x21-\x7e]+{_HIRAGANA}*|[\u30a0-\u30ffー\u4e00-\u9fff々]+{_HIRAGANA}*"
         rf"|{_HIRAGANA}+")


def wrap_mixed(paragraph, width):
    """Lines of at most `width` columns (a closing mark may hang one past it). A line breaks
    between words, never inside one (`_WORD`: ASCII, katakana or kanji runs with their hiragana;
    a run longer than a line stands alone on its line), and never before a closing mark or after
    an opening one (NO_LINE_START, _END)."""
    tokens = re.findall(_WORD + r"|\s+|.", paragraph)
    lines, line = [], ""
    for token in tokens:
        fits = _columns(line + token.rstrip()) <= width
        hangs = token[0] in NO_LINE_START          # stays on its line, even past the width
        if line and not fits and not hangs:
            carried = ""
            while line and line[-1] in NO_LINE_END:  # an opening mark goes down with what it opens
                carried, line = line[-1] + carried, line[:-1]
            if line.strip():
                lines.append(line.rstrip())
                line = carried + ("" if token.isspace() else token)
            else:
                line = carried + token
        else:
            line += token
    if line.strip():
        lines.append(line.rstrip())
    return lines or [""]


def _comment_lines(indent, translation, lang, keep_commands=False):
    """Comment lines of a translation, wrapped to the language's width; with `keep_commands`, a
    line of the translation that starts with a space (a command to copy) is the text after `#`
    of its comment line, as it is: "   make setup" is written "#   make setup"."""
    width = COMMENT_WIDTH.get(lang, 90) * 2 if lang in COMMENT_WIDTH else 90
    lines = []
    for paragraph in translation.split("\n"):
        if keep_commands and paragraph.startswith(" "):
            lines.append(f"{indent}#{paragraph}".rstrip())
        else:
            lines += [f"{indent}# {piece}".rstrip() for piece in wrap_mixed(paragraph.strip(), width - len(indent))]
    return lines


def translate_code(source, entry, lang, keep_commands=False):
    """A code cell or script with its comment blocks and reader-facing strings translated."""
    if not entry:
        return source
    comments = entry.get("comments", {})
    lines = source.split("\n")
    for block in reversed(comment_blocks(source)):
        translation = comments.get(block.text)
        if translation:
            lines[block.first:block.last + 1] = _comment_lines(block.indent, translation, lang, keep_commands)
    text = "\n".join(lines)
    for english, translation in entry.get("strings", {}).items():
        if translation:
            text = text.replace(english, translation)
    return text


def _reader_texts(source):
    """The pieces of `source` a reader sees: its string literals (docstrings included) and
    comments, by Python's tokenizer; None where the source is not Python (a shell script, a
    cell with IPython syntax)."""
    import io
    import tokenize
    try:
        return [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type in (tokenize.STRING, tokenize.COMMENT)
                or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1)]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None


def _in_string_literal(source, english):
    """Whether `english` lies inside a string literal or a comment of `source`: by Python's
    tokens where it parses, else between quotes or after `#` on one line (shell)."""
    texts = _reader_texts(source)
    if texts is not None:
        return any(english in text for text in texts)
    for line in source.split("\n"):
        start = line.find(english)
        if start >= 0 and (line[:start].count('"') % 2 == 1 or line[:start].count("'") % 2 == 1
                           or "#" in line[:start]):
            return True
    return False


# ----------------------------------------------------------------------------- notebooks, scripts

def translate_notebook(nb, catalogue, lang):
    """The instructor notebook `nb` (nbformat) in `lang`, in place; returns it."""
    cells = (catalogue or {}).get("cells", {})
    for cell in nb.cells:
        entry = cells.get(cell.get("id"))
        if not entry:
            continue
        if cell.cell_type == "markdown" and entry.get("text"):
            cell.source = entry["text"]
        elif cell.cell_type == "code":
            cell.source = translate_code(cell.source, entry, lang)
    nb.metadata["language_info_handson"] = lang
    return nb


def translated_notebook(source: Path, lang, root: Path = COURSE_ROOT):
    """The notebook in `lang`: its catalogue's texts, and its recorded outputs in that language."""
    import nbformat
    nb = nbformat.read(str(source), as_version=4)
    rel = source.relative_to(Path(root) / "solutions")
    translate_notebook(nb, load(root, lang, rel), lang)
    return recording.apply(nb, root, lang, rel.name)


def translated_script(source: Path, lang, root: Path = COURSE_ROOT):
    rel = source.relative_to(Path(root) / "solutions")
    catalogue = load(root, lang, rel) or {}
    return translate_code(source.read_text(), catalogue.get("file"), lang)


# ----------------------------------------------------------------------------- checks, templates

def _first_line(text):
    line = next((l for l in text.split("\n") if l.strip()), "")
    return line[:70] + ("..." if len(line) > 70 else "")


def _code_problems(where, source, entry):
    problems = []
    entry = entry or {}
    keys = {b.text for b in comment_blocks(source)}
    comments = entry.get("comments", {})
    for block in comment_blocks(source):
        if not comments.get(block.text):
            problems.append(f"{where}: comment not translated: {_first_line(block.text)!r}")
    for english in comments:
        if english not in keys:
            problems.append(f"{where}: stale: the comment {_first_line(english)!r} is no longer in the "
                            f"English source")
    for english, translation in entry.get("strings", {}).items():
        if not _in_string_literal(source, english):
            problems.append(f"{where}: stale: {_first_line(english)!r} is no longer in a string of the "
                            f"English source")
        elif not translation:
            problems.append(f"{where}: string not translated: {_first_line(english)!r}")
    return problems


def notebook_problems(source: Path, lang, root: Path = COURSE_ROOT):
    rel = source.relative_to(Path(root) / "solutions")
    catalogue = load(root, lang, rel)
    if catalogue is None:
        return [f"{rel}: no {lang} catalogue ({catalogue_path(root, lang, rel).relative_to(root)}): "
                f"`handson i18n template --lang {lang}`"]
    nb = json.loads(source.read_text())
    cells = catalogue.get("cells", {})
    problems, ids = [], set()
    recorded = set(_recorded_refs(nb["cells"]))
    for cell in nb["cells"]:
        cid = cell.get("id")
        ids.add(cid)
        if cid in recorded:
            ids.discard(cid)    # rendered from its record (handson_lib.authoring.recording)
            continue
        text = "".join(cell["source"])
        entry = cells.get(cid)
        where = f"{rel} cell {cid}"
        if cell["cell_type"] == "markdown":
            if not entry or not entry.get("text"):
                problems.append(f"{where}: not translated: {_first_line(text)!r}")
            elif entry.get("en_hash") != en_hash(text):
                problems.append(f"{where}: stale: its English changed since it was translated: "
                                f"{_first_line(text)!r}")
        elif cell["cell_type"] == "code":
            problems += _code_problems(where, text, entry)
    for cid in set(cells) - ids:
        problems.append(f"{rel} cell {cid}: stale: no such cell in the English source any more")
    return problems


def _recorded_refs(cells):
    """Ids of the ref cells whose text comes from a recording, not a catalogue."""
    return recording.recorded_cells(cells).values()


def script_problems(source: Path, lang, root: Path = COURSE_ROOT):
    rel = source.relative_to(Path(root) / "solutions")
    catalogue = load(root, lang, rel)
    if catalogue is None:
        if not comment_blocks(source.read_text()):
            return []
        return [f"{rel}: no {lang} catalogue ({catalogue_path(root, lang, rel).relative_to(root)}): "
                f"`handson i18n template --lang {lang}`"]
    return _code_problems(str(rel), source.read_text(), catalogue.get("file"))


def template(source: Path, lang, root: Path = COURSE_ROOT):
    """Add the missing entries of `source`'s catalogue (English filled in, translation empty);
    a stale markdown entry gets `en_now`, the English it must now say. Returns the path."""
    rel = source.relative_to(Path(root) / "solutions")
    path = catalogue_path(root, lang, rel)
    catalogue = load(root, lang, rel) or {"language": lang, "source": rel.as_posix()}
    if source.suffix == ".ipynb":
        cells = catalogue.setdefault("cells", {})
        notebook_cells = json.loads(source.read_text())["cells"]
        recorded = set(_recorded_refs(notebook_cells))
        for cell in notebook_cells:
            if cell.get("id") in recorded:
                continue
            text = "".join(cell["source"])
            entry = cells.get(cell.get("id"))
            if cell["cell_type"] == "markdown":
                if entry is None:
                    cells[cell["id"]] = {"en_hash": en_hash(text), "en": text, "text": ""}
                elif entry.get("en_hash") != en_hash(text):
                    entry["en_now"], entry["en_hash_now"] = text, en_hash(text)
            elif cell["cell_type"] == "code":
                _template_code(cells, cell["id"], text)
    else:
        _template_code(catalogue, "file", source.read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(catalogue, indent=1, ensure_ascii=False) + "\n")
    return path


def _template_code(holder, key, source):
    blocks = comment_blocks(source)
    if not blocks and key not in holder:
        return
    entry = holder.setdefault(key, {})
    comments = entry.setdefault("comments", {})
    for block in blocks:
        comments.setdefault(block.text, "")


def sources(root: Path = COURSE_ROOT):
    """The solutions/ files that have translations: notebooks and scripts."""
    src = Path(root) / "solutions"
    return sorted(p for p in src.rglob("*")
                  if p.is_file() and p.suffix in (".ipynb", ".py", ".sh")
                  and CATALOGUES not in p.relative_to(src).parts
                  and ".ipynb_checkpoints" not in p.parts)


def message_templates():
    """{English template: "file:line"} of every `tr("...")` call in handson_lib (the first
    argument, a string literal)."""
    import ast
    import handson_lib
    found = {}
    package = Path(handson_lib.__file__).parent
    root = package.parent
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                    and getattr(node.func, "id", getattr(node.func, "attr", None)) == "tr"):
                found.setdefault(node.args[0].value, f"{path.relative_to(root)}:{node.lineno}")
    return found


def message_problems(lang):
    """The library's messages without a translation, and translations whose English is gone."""
    from handson_lib import messages
    used = message_templates()
    translated = messages.catalogue(lang)
    where = f"handson_lib/messages_{lang}.py"
    problems = [f"{where}: message not translated (used at {at}): {_first_line(template)!r}"
                for template, at in used.items() if not translated.get(template)]
    problems += [f"{where}: stale: no tr() uses this English any more: {_first_line(template)!r}"
                 for template in translated if template not in used]
    for template, translation in translated.items():
        if template in used and _fields(template) != _fields(translation):
            problems.append(f"{where}: the translation of {_first_line(template)!r} has other "
                            f"{{fields}}: {sorted(_fields(translation))} instead of {sorted(_fields(template))}")
    return problems


def _fields(template):
    import string
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def problems(root: Path = COURSE_ROOT, languages=LANGUAGES):
    found = []
    for lang in languages:
        for source in sources(root):
            found += (notebook_problems(source, lang, root) if source.suffix == ".ipynb"
                      else script_problems(source, lang, root))
        found += message_problems(lang)
    return found


# ----------------------------------------------------------------------------- CLI
