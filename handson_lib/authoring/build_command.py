"""`handson build`, the command: record the notebooks' long outputs (`--record`), rebuild the student
copies (handson_lib.authoring.build), check them (`--check`).

A module of its own because recording writes the student edition (release), which is built on
`build`: the command sits above both.
"""

import sys
from pathlib import Path

from handson_lib import COURSE_ROOT
from handson_lib.authoring import build, recording, release, translations


def add_arguments(parser):
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 when the committed student copies or job scripts "
                        "are stale, a recorded output is not its record's, or a student copy leaks")
    parser.add_argument("--record", nargs="*", metavar="NOTEBOOK",
                        help="first run the notebooks (default: every one with recorded cells) in the student "
                        "edition of each language on this machine and record what their long cells print "
                        "(solutions/recorded/); run it on a quiet machine")
    parser.add_argument("--lang", action="append", choices=recording.LANGUAGES,
                        help="with --record: only this language (repeatable; default: all)")


def main(args, root: Path = COURSE_ROOT):
    if getattr(args, "record", None) is not None and not args.check:
        try:
            recording.record(release.release_student, root, notebooks=args.record,
                             languages=tuple(args.lang or recording.LANGUAGES),
                             translated_script=translations.translated_script)
        except recording.RecordingError as error:
            print(f"handson build --record: {error}", file=sys.stderr)
            return 1
    if not args.check:
        written, removed = build.build(root)
        print(f"Built {len(written)} student files from solutions/ (and the job scripts from "
              f"handson_lib/sites/, the figures from handson_lib/authoring/teaching_figures.py):")
        for rel in written:
            print(f"  {rel}")
        for rel in removed:
            print(f"  removed {rel} (its source is gone)")
    report = build.check_tree(root)
    if report.ok:
        print("Student copies are in sync with solutions/ and leak nothing; job scripts are in sync "
              "with the site table; teaching figures are in sync with their drawings.")
        return 0
    print(f"{len(report.problems)} problem(s):", file=sys.stderr)
    for problem in report.problems:
        print(f"  {problem}", file=sys.stderr)
    return 1
