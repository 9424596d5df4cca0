"""The observed-run harness: what runs inside every process of an observed run (the student's
ranks and workers, in the grading sandbox of the course's grader).

`observe` starts a training script and records what it did (`python -m
handson_lib.harness.observe`); `stepper` runs a script's training steps one at a time on the
command of the paired timing (handson_lib.checking.timing.paired), which times them from outside;
`answer_call` runs the answer cells in a fresh process, where the grader calls a course function
on them (a hidden test's `on_answers`) or the student's functions a grade cell calls (`codec`:
answers as JSON).
Inside the sandbox: it imports the runtime, data and messages only, never the checks, the
autograder or the authoring tools (a test of the course holds it to that).
"""
