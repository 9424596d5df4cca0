# nbgrader configuration of the course. Assignments are assembled from solutions/ by
# `handson course assemble` (source/<assignment>/); run nbgrader's own CLI from this folder.
import os

from handson_lib import settings
from handson_lib.autograder import nbgrader_course
from handson_lib.autograder.nbgrader_ext import HideHiddenTests, JudgedExecute
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, GetGrades, IgnorePattern, LimitOutput,
                                    SaveAutoGrades)

c = get_config()  # noqa: F821 (nbgrader provides it)

# The grader's settings that the kernels nbgrader starts inherit (`handson autograde --site/--run-timeout`
# override them): only the scripts handed in next to the notebook count (the folder the kernel starts
# in), the throughput thresholds and credit bands of the site (handson_lib/sites/table.py), the
# watchdog of one training run in seconds, and the students' PlotReports registered but not drawn
# (no one looks at those PNGs).
DEFAULTS = settings.GraderSettings(submission=settings.KERNEL_FOLDER, site="local", run_timeout=300,
                                          plot_reports=False)
for variable, value in DEFAULTS.to_env().items():
    os.environ.setdefault(variable, value)
# Every nbgrader command run in a course assembled in Japanese (its feedback too) speaks Japanese.
for variable, value in nbgrader_course.grading_env(os.getcwd()).items():
    os.environ.setdefault(variable, value)

c.CourseDirectory.course_id = nbgrader_course.COURSE_ID

# The same stub as `handson build`.
c.ClearSolutions.code_stub = {"python": "# PUT YOUR CODE HERE"}

# Task cells train networks and run the grader (reference + student runs): minutes, not 30 s.
c.Execute.timeout = nbgrader_course.CELL_TIMEOUT
# ... but a student's own answer cell gets a minute (an infinite loop there should not cost 15).
c.Execute.timeout_func = nbgrader_course.cell_timeout
c.Execute.interrupt_on_timeout = True
c.Execute.allow_errors = True

# nbgrader's autograde pipeline, but for its Execute: the grade cells and the report cells run in the
# grader's process, not the student's kernel (handson_lib/autograder/judge.py).
c.Autograde.autograde_preprocessors = [JudgedExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
                                       SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]

# A student printing millions of lines must not blow up the gradebook or the feedback.
c.LimitOutput.max_lines = 500
c.LimitOutput.max_traceback = 60

# The scripts handed in with the notebook are the ones graded, not the instructor's copies.
c.Autograde.exclude_overwriting = nbgrader_course.STUDENT_FILES

# Feedback without hidden-test source (nbgrader shows it by default).
c.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]

# Collect from the exchange as a hostile class meets it: each submission vetted on its own (owner,
# links, special files, size, backdating) and refused with a line in the report, never followed
# (handson_lib/classroom/collect.py).
c.ExchangeFactory.collect = "handson_lib.classroom.collect.SafeCollect"

# A student's notebook is rendered in the instructor's browser by the Formgrader (manual grading)
# and in the feedback: its HTML outputs are cleaned (no script, no event handler), and its markdown
# cells too, after they are rendered (safe_markdown2html: the Formgrader's template renders them
# without nbconvert's cleaning).
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.filters = {"markdown2html": "handson_lib.autograder.nbgrader_ext.safe_markdown2html"}
