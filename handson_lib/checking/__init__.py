"""The checks: they start a script under the harness, with a watchdog, and judge what it left from
outside (`handson check`, the notebooks' report cells, and the autograder, which runs the same
checks in its own process). `checks` (the verdicts), `runs` (observed runs, kept as plain data),
`evidence` (the trained model evaluated apart from the run), `notebook` (the notebooks' run,
table and scheduler helpers). Ships in the student edition; imports nothing of the autograder or
the authoring tools, except the reference measurement where it is installed.
"""
