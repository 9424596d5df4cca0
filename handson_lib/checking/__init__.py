"""The checks: they start a script under the harness, with a watchdog, and judge what it left from
outside (`handson check`, the notebooks' report cells, and the autograder, which runs the same
checks in its own process). `checks` is their public face (the tasks' checks, the report, the
credit; its docstring maps the modules behind it), `runs` the observed runs, kept as plain data,
`timing` the scored timing, `evidence` the trained model evaluated apart from the run, `notebook`
the notebooks' run, table and scheduler helpers, `command` the `handson check` command. Ships in
the student edition; imports nothing of the autograder, the authoring tools nor the instructor-only
`reference` (the reference solutions are handed in: `against`; `command` finds them where installed).
"""
