"""`handson release student`: write the student edition into a new folder
(handson_lib.authoring.release does the work)."""

import sys

from handson_lib.authoring.release import READMES, ReleaseError, release_student


def add_arguments(parser):
    parser.add_argument("out", help="a new folder for the edition (a git repository, a home directory)")
    parser.add_argument("--lang", default="en", choices=sorted(READMES),
                        help="the edition's language (notebooks, comments, README, messages)")


def main(args):
    try:
        shipped, withheld = release_student(args.out, lang=args.lang)
    except ReleaseError as error:
        print(f"handson release student: {error}", file=sys.stderr)
        return 1
    for rel, why in withheld.items():
        print(f"withheld {rel}: it repeats an exercise's answer ({why})")
    print(f"Student edition written to {args.out}: notebooks/, exercises/, jobscripts/, "
          f"{len(shipped)} handson_lib modules; no solutions, no instructor commands.")
    print(f"Hand it out; students run `make setup` and `make lab` there (see {args.out}/README.md).")
    return 0
