"""How throughput is judged (`against`), and the reference solutions the checks are handed.

  - "reference": a ratio to the reference solution, their training steps timed in turn by the
    grader (checking.timing). The checks import nothing instructor-only: whoever has the
    reference solutions hands them in (`reference_solutions_from`): the autograder's judge,
    `handson check` where they are installed;
  - "self": the speed-up of the student's N-device run over their own one-device run, against
    the site's `speedup_bands` (the student edition, which has no reference solution).

What is handed in is any object with `available(name)`, `reference_script(name)` and
`measure_reference(name, args, timeout, np=None)` (handson_lib.checking.reference is one).
"""

import contextlib

from handson_lib.messages import tr

#: How throughput is judged (see the module's docstring).
AGAINST = ("reference", "self")

#: The reference solutions handed in (None: none here, the checks judge in self mode).
_HANDED_IN = None


def hand_in(solutions):
    """Hand the checks the reference solutions (None takes them back); what was handed in before."""
    global _HANDED_IN
    before, _HANDED_IN = _HANDED_IN, solutions
    return before


@contextlib.contextmanager
def reference_solutions_from(solutions):
    """The checks run within see `solutions` as the reference solutions."""
    before = hand_in(solutions)
    try:
        yield
    finally:
        hand_in(before)


def reference_solutions():
    """The reference solutions handed in, or None."""
    return _HANDED_IN


def default_against(reference_name="train_cifar_multi_gpu.py"):
    """"reference" where the reference solution can be measured (it was handed in: the
    instructor's checkout and the grader), else "self"."""
    solutions = reference_solutions()
    return "reference" if solutions is not None and solutions.available(reference_name) else "self"


def resolve_against(against, reference, reference_name):
    """The mode of one check: as asked, "reference" when a measured reference is passed in, else
    the default of this installation."""
    if against is None:
        against = "reference" if reference is not None else default_against(reference_name)
    if against not in AGAINST:
        raise ValueError(tr("unknown mode against={against!r}; choose one of {choices}",
                            against=against, choices=", ".join(AGAINST)))
    if against == "reference" and reference is None and default_against(reference_name) != "reference":
        raise ValueError(tr("judging against the reference needs the reference solution {name} (the "
                            "instructor's checkout); this installation has none: use --against self",
                            name=reference_name))
    return against


def measure_reference(name, args, timeout, np=None):
    return reference_solutions().measure_reference(name, args, timeout, np=np)


def reference_script(name):
    return reference_solutions().reference_script(name)
