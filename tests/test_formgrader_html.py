"""A student's notebook as the Formgrader renders it for the instructor (manual grading) and as
feedback renders it for the student, with the course's nbgrader configuration
(course/nbgrader_config.py): script and event handlers planted in markdown and in outputs are gone,
the student's formatting stays. The browser test of the same page is in tests/test_classroom.py."""

import re
from pathlib import Path

import nbformat
import pytest
from nbconvert.exporters import HTMLExporter
from nbgrader.server_extensions.formgrader import handlers
from traitlets.config import Config, PyFileConfigLoader

from handson_lib import COURSE_ROOT

PLANTED_MARKDOWN = ("My answer is **bold** and $a^2$. <script>window.handsonPlanted = 'markdown script'</script> "
                    "<img src=x onerror=\"window.handsonPlanted = 'markdown onerror'\"> "
                    "[a link](javascript:window.handsonPlanted='markdown link') "
                    "<svg onload=\"window.handsonPlanted = 'markdown svg'\"></svg>")
#: What cleaning the source and rendering it after would let through: the unknown tag is dropped,
#: its content left, and markdown then makes a javascript: link of it (under a page-wide invisible
#: layer of the Formgrader's Bootstrap, clicked anywhere).
PLANTED_AFTER_CLEANING = ("<x>\n[<span class=\"modal-backdrop fade\">.</span>]"
                          "(javascript:window.handsonPlanted='nested link')\n</x>")
PLANTED_OUTPUTS = [{"text/html": "<b>table</b><script>window.handsonPlanted = 'output script'</script>"
                                 "<img src=x onerror=\"window.handsonPlanted = 'output onerror'\">",
                    "text/plain": "<IPython.core.display.HTML object>"},
                   {"application/javascript": "window.handsonPlanted = 'output javascript'"},
                   {"text/markdown": "<script>window.handsonPlanted = 'output markdown'</script>"}]


def planted_notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(PLANTED_MARKDOWN))
    nb.cells.append(nbformat.v4.new_markdown_cell(PLANTED_AFTER_CLEANING))
    code = nbformat.v4.new_code_cell("from IPython.display import HTML\nHTML('...')")
    code.outputs = [nbformat.v4.new_output("display_data", data=data) for data in PLANTED_OUTPUTS]
    nb.cells.append(code)
    return nb


def course_config(template):
    config = PyFileConfigLoader("nbgrader_config.py", path=str(COURSE_ROOT / "course")).load_config()
    extra = Config()
    extra.HTMLExporter.template_name = template
    extra.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    # where nbgrader's feedback finds bootstrap's CSS (nbgrader/converters/generate_feedback.py)
    extra.HTMLExporter.extra_template_paths = [str(Path(handlers.__file__).parent / "static" / "node_modules" /
                                                   "bootstrap" / "dist" / "css")]
    extra.merge(config)   # the course's file wins, as in nbgrader's apps
    return extra


def rendered(template, config):
    resources = {"nbgrader": {"score": 0, "max_score": 3, "late_penalty": 0, "notebook": "01_setup"},
                 "assignment_id": "setup", "notebook_id": "01_setup", "submission_id": "1", "index": 0, "total": 1,
                 "base_url": "/user/instructor", "student": "student02", "last_name": None, "first_name": None,
                 "notebook_path": "autograded/student02/setup/01_setup.ipynb"}
    html, _ = HTMLExporter(config=config).from_notebook_node(planted_notebook(), resources=resources)
    return html


def planted_left(html):
    """The planted pieces that would run, found in the page: a script element, an event handler
    or a javascript: link carrying the planted code (as text it does nothing)."""
    return re.findall(r"<script[^>]*>[^<]*handsonPlanted|<\w[^<>]*\son\w+\s*=\s*[\"']?window\.handsonPlanted"
                      r"|<a[^<>]*href=[\"']?javascript:", html)


@pytest.mark.parametrize("template", ["formgrade", "feedback"])
def test_planted_script_is_cleaned_from_the_page(template):
    html = rendered(template, course_config(template))
    assert planted_left(html) == []
    assert 'class="modal-backdrop' not in html   # no class of the page's own CSS either
    assert "<strong>bold</strong>" in html and "$a^2$" in html and "<b>table</b>" in html


def test_without_the_course_configuration_the_planted_script_is_there():
    """The check above can fail: nbgrader's own settings keep every planted piece."""
    config = Config()
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    assert len(planted_left(rendered("formgrade", config))) >= 3
