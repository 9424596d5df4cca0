"""nbgrader extensions, plugged in through nbgrader_config.py (no fork of nbgrader).

`JudgedExecute` replaces nbgrader's Execute in `nbgrader autograde`: the notebook's cells run in
the student's kernel (the grading sandbox), but the grade cells and the report cells, restored
from the source by nbgrader, run in the grader's own process (autograder.judge): the kernel is asked
for answers as data (the student's functions are called in a fresh sandboxed process of the answer
cells, never in the kernel), and the checks start the submission's scripts in the sandbox themselves.
A cell tagged `not-run-when-grading` (it only shows runs) is not run (judge.not_run_when_grading).

`HideHiddenTests` runs in `nbgrader generate_feedback`: nbgrader shows the source of hidden
tests in the feedback by default, and a failed hidden assert's traceback quotes it too. The
feedback keeps each grade cell without its hidden region, and each of its errors as one line
(the exception and its message, which the visible tests write for students).
"""

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

import jinja2
import nbformat
from nbgrader.preprocessors import ClearHiddenTests, Execute, NbGraderPreprocessor
from nbgrader.utils import is_grade

from handson_lib import launch, settings
from handson_lib.autograder import judge, sandbox
from handson_lib.messages import tr

class HideHiddenTests(NbGraderPreprocessor):
    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and is_grade(cell):
            ClearHiddenTests(enforce_metadata=False)._remove_hidden_test_region(cell)
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    message = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}".rstrip(": ")
                    output["traceback"] = [message + "   " + tr("(traceback not shown in feedback)")]
        return cell, resources


#: What a student's markdown may keep when it is shown to the instructor (the Formgrader) or back to
#: them (feedback): formatting, tables, images, links; nothing that runs (no script, no event
#: handler, no javascript: link, no style, class, frame or form).
SAFE_TAGS = {"a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
             "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span",
             "strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul"}
SAFE_PROTOCOLS = {"http", "https", "mailto", "data"}


def _safe_attribute(tag, name, value):
    if tag == "a":
        return name == "title" or (name == "href" and value.lower().startswith(("http:", "https:", "mailto:", "#")))
    if tag == "img":   # a pasted image is embedded as data:image/...
        return name in ("alt", "title", "width", "height") or (
            name == "src" and value.lower().startswith(("http:", "https:", "data:image/")))
    return name == "align" and tag in ("td", "th")


def clean_student_html(html):
    import bleach
    return bleach.clean(html, tags=SAFE_TAGS, attributes=_safe_attribute, protocols=SAFE_PROTOCOLS, strip=True,
                        strip_comments=True)


@jinja2.pass_context
def safe_markdown2html(context, source):
    """nbconvert's markdown2html for a student's markdown, cleaned after rendering (the last step:
    cleaning the source and rendering it after lets markdown make a link of what the cleaning left):
    the Formgrader's and the feedback's templates render markdown cells without nbconvert's
    sanitize_html, so script or an event handler there would run in the instructor's session on
    the hub's origin."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
    cell = context.get("cell", {})
    renderer = IPythonRenderer(escape=False, embed_images=True, exclude_anchor_links=True,
                               attachments=cell.get("attachments", {}))
    return clean_student_html(MarkdownWithMath(renderer=renderer).render(source))


def judged_outside(cell):
    """The grade_id of a cell the grader runs itself, or None for one the kernel runs."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    if cell.cell_type == "code" and judge.judged_by_grader(meta):
        return meta.get("grade_id")
    return None


#: The most output of one kernel cell the grader keeps (bytes of its messages): what a submission
#: prints beyond it is dropped as it arrives, never held in the grader's memory until the cell ends
#: (LimitOutput then cuts the lines of what was kept).
CELL_OUTPUT_BYTES = 4 << 20
#: ... and of a request of the judge (one answer of at most judge.MAX_ANSWER_CHARS, and some).
PROBE_OUTPUT_BYTES = judge.MAX_ANSWER_CHARS + (1 << 20)


class JudgedExecute(Execute):
    def preprocess(self, nb, resources=None, km=None):
        spec = json.loads(settings.current().judge or "{}")
        self._judge = judge.Judge(self._ask_kernel, judge.report_names(), self._answer_cells, spec.get("runs"))
        self._output_limit, self._output_used, self._output_cut = CELL_OUTPUT_BYTES, {}, set()
        return super().preprocess(nb, resources, km)

    def _ask_kernel(self, code):
        probe = nbformat.v4.new_code_cell(code)
        probe.metadata["nbgrader"] = {"solution": True}   # an answer's time limit (cell_timeout)
        original = self.nb.cells[self._index]
        self._output_limit, self._output_used, self._output_cut = PROBE_OUTPUT_BYTES, {}, set()
        try:
            self.execute_cell(probe, self._index, store_history=False)
        finally:   # nbclient puts the cell it ran at that index
            self.nb.cells[self._index] = original
            self._output_limit, self._output_used, self._output_cut = CELL_OUTPUT_BYTES, {}, set()
        return "".join(o.get("text", "") for o in probe.outputs if o.get("output_type") == "stream")

    def _answer_cells(self):
        """What a hidden test's on_answers call runs (judge.answer_sources) of the cells before
        the grade cell that runs it, as the kernel ran them."""
        return judge.answer_sources(self.nb.cells[:self._index])

    def output(self, outs, msg, display_id, cell_index):
        """nbclient's output handler, with the cell's output capped as it arrives (an error, the
        cell's verdict, is kept, shortened)."""
        limits = getattr(self, "_output_limit", CELL_OUTPUT_BYTES)
        used, cut = getattr(self, "_output_used", {}), getattr(self, "_output_cut", set())
        size = len(json.dumps(msg.get("content", {}), default=str))
        total = used.get(cell_index, 0) + size
        used[cell_index] = total
        if total <= limits:
            return super().output(outs, msg, display_id, cell_index)
        if cell_index not in cut:
            cut.add(cell_index)
            outs.append(nbformat.v4.new_output("stream", name="stderr", text=tr(
                "... output cut: this cell printed more than {mb} MB; the grader keeps no more of it",
                mb=limits >> 20) + "\n"))
        if msg.get("msg_type") == "error":
            content = msg.get("content", {})
            outs.append(nbformat.v4.new_output("error", ename=str(content.get("ename", "Error"))[:200],
                                               evalue=str(content.get("evalue", ""))[:2000], traceback=[]))
        return None

    def preprocess_cell(self, cell, resources, index):
        if judge.not_run_when_grading(cell):
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=tr(
                "(not run by the autograder: this cell only shows runs; the report cells run your scripts "
                "themselves)") + "\n")]
            cell.execution_count = None
            return cell, resources
        grade_id = judged_outside(cell)
        if grade_id is None:
            return super().preprocess_cell(cell, resources, index)
        self._index = index
        report = grade_id in judge.REPORT_CELLS
        with _judged_runs(report):
            outputs = self._judge.run(cell.source, grade_id, report=report)
        cell.outputs = [nbformat.from_dict(o) for o in outputs]
        cell.execution_count = None
        return cell, resources


@contextlib.contextmanager
def _judged_runs(report):
    """While a cell of the grader's runs: its temporary files in a folder of the grader's (never
    TMPDIR, the student's folder, which the kernel writes); for a report cell, its checks' runs
    go to the grader's folder of this student (not the kernel's), each in the sandbox when the
    session has one."""
    if not settings.current().judge:
        yield
        return
    spec = json.loads(settings.current().judge)
    saved_tempdir = tempfile.tempdir
    # A report cell's runs in the grader's folder of this student, with the grader's log in its own
    # folder (the kernel's is the kernel's to write); a grade cell's files in its memo (its
    # on_answers calls make their folders in the runs' folder themselves).
    tempfile.tempdir = spec["runs"] if report else spec["memo"]
    moved = settings.override(profile_log=os.path.join(spec["memo"], "profile.jsonl")) if report \
        else contextlib.nullcontext()
    if spec.get("settings"):
        launch.set_wrapper(lambda cmd, cwd: judge_sandbox_command(spec, cmd, cwd))
    # A report cell's runs are timed: the kernel's sandbox (and whatever the answer cells left
    # running there) is stopped meanwhile, so it can neither slow the reference nor work beside it.
    frozen = sandbox.frozen_kernel(spec["settings"], spec["own"]) if report and spec.get("settings") \
        else contextlib.nullcontext()
    try:
        with moved, frozen:
            yield
    finally:
        tempfile.tempdir = saved_tempdir
        launch.set_wrapper(None)


def judge_sandbox_command(spec, cmd, cwd, confinement=None):
    """A check's launch in the sandbox, where its `confinement` (a launch.Confinement, as the
    launch states it; by default the one the launch being wrapped asked for) puts it: writing its
    own folder only (a side of the paired timing: that side's folder, which the other side never
    sees), else the run's folder in the student's runs. The reference's role (the reference's
    side of the paired timing): the reference scripts readable, no copy of the submission,
    cgroups of its own; every other run (the student's side included) without the reference
    scripts, in the student's runs' cgroups."""
    confinement = confinement or launch.asked_confinement()
    settings_file, role, folder = spec["settings"], "runs", settings.current().grader.submission
    runs, cwd = Path(spec["runs"]).resolve(), Path(cwd or Path.cwd()).resolve()
    if confinement.role == "reference":
        settings_file, role, folder = str(sandbox.paired_settings_path(settings_file)), "reference", sandbox.NO_FOLDER
    if confinement.own_folder or not cwd.is_relative_to(runs) or cwd == runs:
        writable = cwd if confinement.own_folder else runs
    else:
        writable = runs / cwd.relative_to(runs).parts[0]   # the run's folder (runs.run_folder)
    return [sys.executable, "-m", "handson_lib.autograder.sandbox", "run", settings_file, spec["own"], role,
            str(writable), folder, str(cwd), str(confinement.cores), "--", *cmd]
