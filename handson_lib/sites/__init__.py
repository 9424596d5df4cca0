"""Sites (machines): one table of queues and limits used by the job-script linter, the local
cluster and the generated job scripts.
"""
