"""`handson classroom up|down|status`: the course as instructors run it, on one machine.

A JupyterHub (from PyPI; its proxy, configurable-http-proxy, from npm into the state folder) with
local Linux accounts `instructor` and `student01..N`, nbgrader's exchange in a shared folder, and
the course's assignments released through it. Students log in, fetch an assignment from the
Assignments tab, work and submit; the instructor collects, autogrades and releases feedback from
the Formgrader. Users' servers start as local processes (`--spawner local`) or as jobs of the local
Slurm cluster (`--spawner batch`, batchspawner), as at a computing centre.

Modules: `layout` (the state folder), `accounts` (users, groups, passwords), `environments` (the
students' and the instructor's Python environments, the proxy), `nbgrader_setup` (exchange,
course folder, released assignments), `hub` (JupyterHub's configuration and process), `command`
(the CLI). Instructor-only: none of it ships in the student edition.
"""
