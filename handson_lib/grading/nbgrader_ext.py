"""nbgrader extensions, plugged in through nbgrader_config.py (no fork of nbgrader).

`HideHiddenTests` runs in `nbgrader generate_feedback`: nbgrader shows the source of hidden
tests in the feedback by default, and a failed hidden assert's traceback quotes it too. The
feedback keeps each grade cell without its hidden region, and each of its errors as one line
(the exception and its message, which the visible tests write for students).
"""

from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor
from nbgrader.utils import is_grade


class HideHiddenTests(NbGraderPreprocessor):
    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and is_grade(cell):
            ClearHiddenTests(enforce_metadata=False)._remove_hidden_test_region(cell)
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    message = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}".rstrip(": ")
                    output["traceback"] = [message + "   (traceback not shown in feedback)"]
        return cell, resources
