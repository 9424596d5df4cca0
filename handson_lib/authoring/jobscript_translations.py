"""The generated job scripts (jobscripts/) in other languages: they are not in solutions/, so
their comments and README have catalogues of their own, `solutions/i18n/<lang>/jobscripts/` (see
JOBSCRIPT_COMMENTS), applied by `handson release student --lang` and checked like the others
(handson_lib.authoring.i18n_check); only comments change, and a command written in a comment
(`#   make setup`) is kept as it is. The comment machinery is translations'.
"""

import json
import re
from pathlib import Path

from handson_lib import COURSE_ROOT
from handson_lib.authoring.translations import CATALOGUES, _comment_lines, _first_line, comment_blocks, translate_code
from handson_lib.boundary import SKIP
from handson_lib.sites import generate
from handson_lib.sites.table import EXERCISE_SITES


#: The job scripts' catalogues, solutions/i18n/<lang>/jobscripts/: comments.json, {"comments":
#: {English comment block: translation}} shared by every site's scripts and env.sh (a block says
#: the same thing wherever it appears); README.md.json, {"pieces": {English piece: translation}}
#: for jobscripts/README.md, a piece being a paragraph, list item, heading, table row or commented
#: code line (a changed queue limit makes one row stale, not the file).
JOBSCRIPT_COMMENTS = Path("jobscripts") / "comments.json"
JOBSCRIPT_README = Path("jobscripts") / "README.md.json"
#: A command inside a comment ("#   make setup"): copied as written into every language.
_COMMAND_IN_COMMENT = re.compile(r"^\s*#(\s{2,}\S.*| module .*)$")


def edition_jobscripts(root: Path = COURSE_ROOT):
    """{path under the course: (site, task kind) or (None, None)} of jobscripts/ as the student
    edition ships it: its README and every site's env.sh and scripts, less the task scripts of a
    site with an exercise copy (exercises/[<site>/] holds the one copy a student completes); a
    site without one keeps its task scripts, with a gap (release.student_task_script). Here, not
    in release: problems() checks what ships, and release imports this module."""
    tasks = {Path("jobscripts") / site.key / generate.SCRIPTS[kind][0]: (site, kind)
             for site in generate.script_sites() for kind in generate.EXERCISE_TASKS}
    files = {}
    for path in sorted((Path(root) / "jobscripts").rglob("*")):
        rel = path.relative_to(root)
        site, kind = tasks.get(rel, (None, None))
        if path.is_file() and not SKIP & set(rel.parts) and not (site and site.key in EXERCISE_SITES):
            files[rel] = (site, kind)
    return files


def _jobscript_catalogue(root, lang, name):
    path = Path(root) / "solutions" / CATALOGUES / lang / name
    return json.loads(path.read_text()) if path.exists() else {}


def jobscript_comment(english, lang, root: Path = COURSE_ROOT):
    """Comment lines (no indentation) saying `english`, a whole comment block, in `lang`."""
    translation = _jobscript_catalogue(root, lang, JOBSCRIPT_COMMENTS).get("comments", {}).get(english)
    return _comment_lines("", translation or english, lang, keep_commands=True)


def translated_jobscript(text, lang, root: Path = COURSE_ROOT):
    """A job script or env.sh with its comments in `lang`; its shell lines, #PBS lines and
    `# handson-site:` line as they are."""
    entry = _jobscript_catalogue(root, lang, JOBSCRIPT_COMMENTS)
    return translate_code(text, entry, lang, keep_commands=True)


def markdown_pieces(text):
    """[(English, text)] of a markdown file, in order: a paragraph or list item (its lines joined
    by spaces; its text, the lines), a heading, a table row, a code line; English is None for a
    piece with nothing to translate (a blank line, a table's rule, a code line without comment)."""
    pieces, kind = [], None
    for line in text.split("\n"):
        if line.startswith(("    ", "\t")) and kind in ("blank", "code"):
            kind = "code"
            pieces.append([line if " #" in line else None, [line]])
        elif not line.strip() or line.startswith(("|", "#", "- ")) or kind not in ("item", "para"):
            kind = ("blank" if not line.strip() else "one" if line.startswith(("|", "#"))
                    else "item" if line.startswith("- ") else "para")
            translatable = kind != "blank" and re.search(r"[A-Za-z]", line)
            pieces.append([line if translatable else None, [line]])
        else:
            pieces[-1][1].append(line)
    for piece in pieces:
        if piece[0] is not None and len(piece[1]) > 1:
            piece[0] = " ".join(line.strip() for line in piece[1])
    return [(english, "\n".join(lines)) for english, lines in pieces]


def translated_jobscripts_readme(text, lang, root: Path = COURSE_ROOT):
    """jobscripts/README.md in `lang`: each piece (markdown_pieces) by its translation."""
    translated = _jobscript_catalogue(root, lang, JOBSCRIPT_README).get("pieces", {})
    return "\n".join(translated.get(english) or original if english else original
                     for english, original in markdown_pieces(text))


def gap_comment(site, kind):
    """What a gapped task script says it leaves to the student, one line of text (its key)."""
    return re.sub(r"\s*\n#\s*", " ", generate.resource_request(site, kind))


def _commands_in_comments(lines):
    """The commands written inside comment lines, without a comment of their own."""
    found = []
    for line in lines:
        match = _COMMAND_IN_COMMENT.match(line)
        if match:
            found.append(match.group(1).split(" #")[0].strip())
    return found


def _jobscript_sources(root):
    """{English comment block: (where, English lines)} of every job script the edition ships, and
    the queue and resource request that a gapped task script says in words."""
    needed = {}
    for rel, (site, kind) in edition_jobscripts(root).items():
        if rel.suffix != ".sh":
            continue
        text = (Path(root) / rel).read_text()
        lines = text.split("\n")
        for block in comment_blocks(text):
            needed.setdefault(block.text, (rel.as_posix(), lines[block.first:block.last + 1]))
        if kind:
            request = gap_comment(site, kind)
            needed.setdefault(request, (f"{rel.as_posix()} (its gap)", [f"# {request}"]))
    return needed


def jobscript_problems(lang, root: Path = COURSE_ROOT):
    """Untranslated and stale pieces of the job scripts' catalogues, and commands or code that a
    translation does not keep as written."""
    where = f"{CATALOGUES}/{lang}/{JOBSCRIPT_COMMENTS.as_posix()}"
    comments = _jobscript_catalogue(root, lang, JOBSCRIPT_COMMENTS).get("comments", {})
    needed = _jobscript_sources(root)
    problems = []
    for english, (shown, lines) in needed.items():
        translation = comments.get(english)
        if not translation:
            problems.append(f"{where}: {shown}: comment not translated: {_first_line(english)!r}")
            continue
        kept = _commands_in_comments(_comment_lines("", translation, lang, keep_commands=True))
        problems += [f"{where}: {shown}: the translation changes the command {command!r}"
                     for command in _commands_in_comments(lines) if command not in kept]
    problems += [f"{where}: stale: the comment {_first_line(english)!r} is no longer in a job script"
                 for english in comments if english not in needed]
    readme = Path(root) / "jobscripts" / "README.md"
    if not readme.exists():
        return problems
    where = f"{CATALOGUES}/{lang}/{JOBSCRIPT_README.as_posix()}"
    pieces = _jobscript_catalogue(root, lang, JOBSCRIPT_README).get("pieces", {})
    english_pieces = {english for english, _ in markdown_pieces(readme.read_text()) if english}
    for english in sorted(english_pieces):
        translation = pieces.get(english)
        if not translation:
            problems.append(f"{where}: jobscripts/README.md: not translated: {_first_line(english)!r}")
            continue
        lost = [span for span in re.findall(r"`[^`\n]+`", english) if span not in translation]
        if english.startswith(("    ", "\t")) and translation.split(" #")[0] != english.split(" #")[0]:
            lost.append(english.split(" #")[0].strip())
        problems += [f"{where}: jobscripts/README.md: the translation changes the code {code}"
                     for code in lost]
    problems += [f"{where}: stale: {_first_line(english)!r} is no longer in jobscripts/README.md"
                 for english in pieces if english not in english_pieces]
    return problems


def template_jobscripts(lang, root: Path = COURSE_ROOT):
    """Add the job scripts' missing entries to their catalogues (English in, translation empty)."""
    paths = []
    readme = Path(root) / "jobscripts" / "README.md"
    wanted = ((JOBSCRIPT_COMMENTS, "comments", list(_jobscript_sources(root))),
              (JOBSCRIPT_README, "pieces", [e for e, _ in markdown_pieces(readme.read_text()) if e]
               if readme.exists() else []))
    for name, key, english in wanted:
        path = Path(root) / "solutions" / CATALOGUES / lang / name
        catalogue = _jobscript_catalogue(root, lang, name) or {
            "language": lang, "source": "jobscripts/README.md" if key == "pieces" else "jobscripts/*/*.sh"}
        entries = catalogue.setdefault(key, {})
        for text in english:
            entries.setdefault(text, "")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(catalogue, indent=1, ensure_ascii=False) + "\n")
        paths.append(path)
    return paths
