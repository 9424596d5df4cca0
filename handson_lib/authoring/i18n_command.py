"""`handson i18n template` and `handson i18n status`: the catalogues of another language
(handson_lib.authoring.translations does the work)."""

from pathlib import Path

from handson_lib import COURSE_ROOT
from handson_lib.authoring.i18n_check import problems
from handson_lib.authoring.jobscript_translations import template_jobscripts
from handson_lib.authoring.translations import LANGUAGES, sources, template


def add_arguments(parser):
    parser.add_argument("--lang", default=LANGUAGES[0], choices=LANGUAGES)
    parser.add_argument("files", nargs="*", help="solutions/ files (default: all with text to translate)")


def _report(args, root):
    chosen = [Path(f).resolve() for f in args.files]
    named = [str(s.relative_to(Path(root) / "solutions")) for s in chosen]
    found = [p for p in problems(root, [args.lang]) if not named or any(p.startswith(n) for n in named)]
    for problem in found:
        print(problem)
    print(f"{len(found)} piece(s) untranslated or stale in {args.lang}" if found
          else f"every piece is translated into {args.lang} and up to date")
    return found


def template_main(args, root: Path = COURSE_ROOT):
    for source in [Path(f).resolve() for f in args.files] or sources(root):
        print(f"catalogue: {template(source, args.lang, root).relative_to(root)}")
    if not args.files:   # the generated job scripts' catalogues too
        for path in template_jobscripts(args.lang, root):
            print(f"catalogue: {Path(path).relative_to(root)}")
    _report(args, root)
    return 0


def status_main(args, root: Path = COURSE_ROOT):
    return 1 if _report(args, root) else 0
