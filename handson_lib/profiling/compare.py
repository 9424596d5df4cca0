"""Notebook 03's comparison of the student's answers with the tool's summary, without putting an
answer of Questions 1-5 on screen before the student has given one: the summary, which prints them
all, waits until every one holds an answer, and the comparison says only whether each answer is
the tool's (never the tool's value)."""

from handson_lib.messages import tr

#: (label, the answer's name in the notebook, the sample profile it is about, the summary's value),
#: in the order of the notebook's questions
QUESTIONS = (
    ("kernels", "n_kernels", "saxpy", lambda s: s.kernel_count),
    ("HtoD bytes", "htod_bytes", "saxpy", lambda s: s.memcpy_bytes("HtoD")),
    ("top kernel", "top_kernel_name", "mlp", lambda s: s.top_kernel),
    ("busy fraction", "busy_fraction", "mlp", lambda s: round(s.devices[0].busy_fraction, 3)),
    ("longest gap [ms]", "longest_gap_ms", "mlp", lambda s: s.devices[0].longest_gap.duration_ns / 1e6),
)


def truth(summaries):
    """{answer's name: the tool's value} from the summaries of the sample profiles ({name: summary})."""
    return {name: tool(summaries[profile]) for _, name, profile, tool in QUESTIONS}


def open_questions(answers):
    """The names of Questions 1-5 that `answers` (the notebook's globals) holds no answer for."""
    return [name for _, name, _, _ in QUESTIONS if answers.get(name) is None]


def show_summary(summaries, answers):
    """Print the tool's summaries ({profile: summary}) once Questions 1-5 are answered; until then,
    which are open."""
    still_open = open_questions(answers)
    if still_open:
        print(tr("The summary prints the answers of Questions 1-5: it is shown once they all hold yours "
                 "(still open: {names}).", names=", ".join(still_open)))
        return False
    print("\n\n".join(summary.text() for summary in summaries.values()))
    return True


def compare_answers(summaries, answers):
    """One line per question: your answer, and whether the tool found the same (never its value)."""
    rows = []
    tool_values = truth(summaries)
    for label, name, _, _ in QUESTIONS:
        yours = answers.get(name)
        verdict = tr("not answered yet") if yours is None else (
            tr("the same as the tool") if _same(yours, tool_values[name]) else tr("differs from the tool"))
        rows.append((label, yours, verdict))
        print(f"{label:18s} {str('-' if yours is None else yours):>22s}   {verdict}")
    return rows


def _same(yours, theirs):
    if isinstance(yours, bool) or isinstance(theirs, bool):
        return yours == theirs
    if isinstance(yours, (int, float)) and isinstance(theirs, (int, float)):
        return abs(yours - theirs) <= 1e-6 * max(1.0, abs(theirs))
    return yours == theirs
