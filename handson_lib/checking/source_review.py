"""The grader reads a student's training script for what it must not do (trusted side: run in the
grader's process, on the file as handed in).

A task script trains a network; it has no use for the means of rewriting what the grader's
launcher records (`atexit` handlers, `os._exit` past the launcher's own end, the launcher's folder
and files, the grader's modules) nor of reaching into other processes. Such a line is not scored
silently: the checks fail with "tampering suspected, for the instructor to review", naming the
line, and the instructor decides.
"""

import ast
import io
import re
import tokenize

#: Modules a task script has no use for: the grader's own, and the means to rewrite a process.
FORBIDDEN_MODULES = ("atexit", "ctypes", *(f"handson_lib.{name}" for name in (
    "harness", "checking", "autograder", "launch", "settings")))
#: Calls (module attribute) a task script has no use for.
FORBIDDEN_CALLS = {("os", "_exit"), ("os", "fork"), ("os", "forkpty"), ("os", "kill"), ("os", "killpg"),
                   ("sys", "_getframe"), ("gc", "get_objects"), ("gc", "get_referrers")}
#: What the grader's launcher writes or reads (its folder, its files, its variables) and Python's
#: internals a script may use to find the launcher's code.
FORBIDDEN_WORDS = re.compile(r"HANDSON_OBSERVE|HANDSON_GRADING|\bobserved(-rank\d*)?\.json|\bheartbeat(-rank\d*)?\b|"
                             r"\bworker\d*\.npz|\bparams-rank|\bmodel-rank0\.npz|\bcontrol\.sock|__qualname__|__code__|"
                             r"sys\.modules|sys\.argv")
#: The most characters of a script the review reads (a longer one is reviewed up to there, and said).
LARGEST_SCRIPT = 1 << 20


def review(text):
    """[(line, what)] of every line of `text` that a task script has no business with ([] for an
    honest script; a script that does not parse is the run's to report, not the review's)."""
    text = text[:LARGEST_SCRIPT]
    found = []
    for number, line in enumerate(_without_comments(text).splitlines(), 1):
        match = FORBIDDEN_WORDS.search(line)
        if match:
            found.append((number, f"names {match.group(0)!r}"))
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return found
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            names = []
        for name in names:
            if any(name == m or name.startswith(m + ".") for m in FORBIDDEN_MODULES):
                found.append((node.lineno, f"imports {name}"))
                break
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and (node.value.id, node.attr) in FORBIDDEN_CALLS:
            found.append((node.lineno, f"uses {node.value.id}.{node.attr}"))
    return sorted(set(found))


def _without_comments(text):
    """`text` with its comments blanked (a comment may name anything), lines kept in place."""
    lines = text.splitlines()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                (row, col), _ = token.start, token.end
                lines[row - 1] = lines[row - 1][:col]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return "\n".join(lines)


def said(found, limit=4):
    """The review's findings as one line: `line 12 imports atexit; line 20 uses os._exit`."""
    shown = "; ".join(f"line {line} {what}" for line, what in found[:limit])
    return shown + (f" (and {len(found) - limit} more)" if len(found) > limit else "")
