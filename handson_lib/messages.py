"""Messages a student reads, in the student's language (light: imports nothing of the course, so
that any module may import it at the top).

    from handson_lib.messages import tr
    print(tr("{passed} of {total} checks passed", passed=7, total=8))

The language is HANDSON_LANG (`en`, `ja`), else the locale (LC_ALL, LC_MESSAGES, LANG: `ja_JP.UTF-8`
is Japanese), else English. The English template is the key of the catalogue
(handson_lib/messages_<lang>.py: {template: translation}, the same `{fields}` in both); a template missing
there is shown in English. An unknown HANDSON_LANG falls back to English with a one-line note.
The course's build check reports templates without a translation and translations whose English
is no longer used (handson_lib.authoring.translations.message_problems).
"""

import contextlib
import importlib
import os
import sys

from handson_lib import settings
from handson_lib.settings import LANGUAGES

ENV = settings.variable("lang")
_noted = set()


def language(environ=None):
    """The language of the messages: HANDSON_LANG, else the locale's, else "en"."""
    env = os.environ if environ is None else environ
    chosen = (settings.one("lang", environ) or "").strip().lower()
    if chosen:
        code = chosen.replace("-", "_").split("_")[0].split(".")[0]
        if code in LANGUAGES:
            return code
        if chosen not in _noted:
            _noted.add(chosen)
            print(f"note: {ENV}={chosen!r} is not a language of the course ({', '.join(LANGUAGES)}): "
                  f"messages in English", file=sys.stderr)
        return "en"
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(name, "")
        if value:
            code = value.split("_")[0].split(".")[0].lower()
            return code if code in LANGUAGES else "en"
    return "en"


def catalogue(lang):
    """{English template: translation} of `lang` ({} for English)."""
    if lang == "en":
        return {}
    return importlib.import_module(f"{__name__}_{lang}").MESSAGES


#: Set while `in_english()` holds: every tr() gives the English (records and JSON a program reads).
_ENGLISH_ONLY = False


@contextlib.contextmanager
def in_english():
    """Within it, tr() gives the English template whatever the reader's language: for what a
    program keeps (JSON output, records), not for what a person reads."""
    global _ENGLISH_ONLY
    before, _ENGLISH_ONLY = _ENGLISH_ONLY, True
    try:
        yield
    finally:
        _ENGLISH_ONLY = before


def tr(template, **fields):
    """`template` in the reader's language, with `fields` filled in (str.format)."""
    text = (not _ENGLISH_ONLY and catalogue(language()).get(template)) or template
    return text.format(**fields) if fields else text
