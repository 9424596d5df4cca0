"""Every untranslated or stale piece of another language: the sources' catalogues
(handson_lib.authoring.translations) and the generated job scripts' (jobscript_translations).
`handson build --check` and `handson i18n status` report them."""

from pathlib import Path

from handson_lib import COURSE_ROOT
from handson_lib.authoring import jobscript_translations, translations


def problems(root: Path = COURSE_ROOT, languages=translations.LANGUAGES):
    found = translations.problems(root, languages)
    for lang in languages:
        found += jobscript_translations.jobscript_problems(lang, root)
    return found
