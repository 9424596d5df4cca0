"""The autograder: the nbgrader course (`handson course`, `handson autograde`), the grading
sandbox, the judge that runs grade and report cells in the grader's process, the reference
measurement, the hidden tests' answer helpers and the synthetic classes. Instructor-only: none of
it ships in the student edition, and no submission can read it.
"""
