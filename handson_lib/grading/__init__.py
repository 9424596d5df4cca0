"""The grader and course tools: the instrumenting launcher, checks, notebook helpers, the build of
the student copies, the nbgrader course and synthetic classes.
"""
