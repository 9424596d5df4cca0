"""`handson course`: the nbgrader course's source/<assignment>/ assembled from the single source
(solutions/, exercises/, in the course's language), and synthetic classes to try the grading.

An assignment's source holds the instructor notebook (with its markers, for nbgrader) and the
*student skeletons* of its scripts: nbgrader copies non-notebook files unchanged into the
release, so it must never see the solution scripts. Grading them is the autograder's
(handson_lib.autograder.nbgrader_course); this builds on it and on the translations.
"""

import re
import shutil
from pathlib import Path

from handson_lib import COURSE_ROOT
from handson_lib.authoring import translations
from handson_lib.autograder import nbgrader_course, synthetic_class
from handson_lib.sites.table import EXERCISE_SITES


def assemble(course_dir=nbgrader_course.COURSE_DIR, root=COURSE_ROOT, assignments=None, lang="en"):
    """Write course_dir/source/<assignment>/ for every (or the named) assignment, in `lang` (the
    instructor notebook translated, the students' scripts of exercises/<lang>/, with the job
    scripts' skeletons of the other exercise sites in <site>/ as in the edition), and `lang` in
    course_dir/.handson-lang (the course's language: the last assemble's)."""
    import nbformat
    written = []
    Path(course_dir).mkdir(parents=True, exist_ok=True)
    (Path(course_dir) / nbgrader_course.LANG_FILE).write_text(lang + "\n")
    exercises = root / "exercises" if lang == "en" else root / "exercises" / lang
    for name in assignments or nbgrader_course.ASSIGNMENTS:
        notebook, files = nbgrader_course.ASSIGNMENTS[name]
        dest = Path(course_dir) / "source" / name
        dest.mkdir(parents=True, exist_ok=True)
        if lang == "en":
            shutil.copy2(root / "solutions" / notebook, dest / notebook)
        else:
            nb = translations.translated_notebook(root / "solutions" / notebook, lang, root)
            (dest / notebook).write_text(nbformat.writes(nb) + "\n")
        for f in files:
            shutil.copy2(exercises / f, dest / f)
            for site in EXERCISE_SITES:   # a job script's skeleton at every other site, as the edition has
                if (exercises / site / f).exists():
                    (dest / site).mkdir(exist_ok=True)
                    shutil.copy2(exercises / site / f, dest / site / f)
        for figure in shown_figures(root / "solutions" / notebook):
            (dest / "figures").mkdir(exist_ok=True)
            shutil.copy2(root / "solutions" / "figures" / figure, dest / "figures" / figure)
        written.append(dest)
    return written


def shown_figures(notebook):
    """The teaching figures a notebook shows (`figures/<name>.svg`): they travel with it."""
    return sorted(set(re.findall(r"\(figures/([\w.-]+\.svg)\)", Path(notebook).read_text())))


def add_course_arguments(parser):
    parser.add_argument("action", choices=["assemble", "synthetic-class"])
    parser.add_argument("assignments", nargs="*",
                        help="assignments (default: all; synthetic-class: setup, task1 or task2)")
    parser.add_argument("--course", default=str(COURSE_ROOT / "course"))
    parser.add_argument("--lang", default="en", choices=["en", *translations.LANGUAGES],
                        help="assemble: the assignments' language (notebooks and scripts)")
    parser.add_argument("--copies", type=int, default=1,
                        help="synthetic-class: each kind of submission handed in by this many students "
                             "(a class of 7 x N for task2)")


def course_main(args):
    course_dir = Path(args.course)
    if args.action == "synthetic-class":
        for name in args.assignments or ["task2"]:
            if name not in synthetic_class.CLASSES:
                raise SystemExit(f"no synthetic class for {name!r}; there is one for {', '.join(synthetic_class.CLASSES)}")
            for folder in synthetic_class.write_class(course_dir, name, copies=args.copies):
                sub = synthetic_class.kind_of(name, folder.parent.name)
                print(f"wrote {folder}  (expected score {sub.expected:g}{': ' + sub.why if sub.why else ''})")
        return 0
    for dest in assemble(course_dir, assignments=args.assignments or None, lang=args.lang):
        print(f"assembled {dest}")
    return 0
