"""The generated job scripts' kinds and their #PBS lines: which scripts there are (the job-script
tasks of the tasks registry, the profile and the scaling sweep), and each site's queue, select,
group, walltime and job name for each of them, from the site table.
"""

from handson_lib import tasks
from handson_lib.sites.table import ranks_per_node

#: script kind -> (file name, job name): the job-script tasks' scripts (tasks.TASKS), then the
#: measurements' own.
SCRIPTS = {
    **{t.jobscript: (t.script, t.jobscript) for t in tasks.TASKS if t.jobscript},
    "profile": ("run_profile.sh", "profile"),
    "scaling": ("run_scaling_sweep.sh", "scaling"),
}

#: The exercises' job scripts (solutions/), for the course's site: what the student completes.
EXERCISE_TASKS = {t.jobscript: (tasks.assignment(t.assignment).title, t.layout) for t in tasks.TASKS if t.jobscript}

#: script kind -> the training script its job runs (the script of the task it runs).
TRAINING_SCRIPTS = {t.jobscript: tasks.task(t.runs).script for t in tasks.TASKS if t.jobscript}


def select(site, kind):
    nodes, _ = site.scripts.requests[kind]
    # ompthreads=1 on every request: PBS Pro then sets OMP_NUM_THREADS=1 in the job, as the
    # scripts' default does (one copy once left it out of Task #1).
    return f"select={nodes}:mpiprocs={ranks_per_node(site, kind)}:ompthreads=1"


def group_directive(site):
    if site.group == "group_list":
        return f"#PBS -W group_list={site.placeholder}"
    if site.group == "P":
        return f"#PBS -P {site.placeholder}"
    return None


def queue(site, kind):
    if kind in EXERCISE_TASKS or not site.scripts.measure_queue:
        return site.scripts.queue
    return site.scripts.measure_queue


def resource_directives(site, kind):
    return [f"#PBS -q {queue(site, kind)}", f"#PBS -l {select(site, kind)}"]


def job_directives(site, kind):
    """The #PBS lines after the resources: group, walltime, job name."""
    _, walltime = site.scripts.requests[kind]
    lines = [group_directive(site), f"#PBS -l walltime={walltime}", f"#PBS -N {SCRIPTS[kind][1]}"]
    return [line for line in lines if line]


def request_words(site, kind):
    """`2 nodes x 2 P100 = 4 ranks` (or one node's)."""
    nodes, _ = site.scripts.requests[kind]
    per_node = ranks_per_node(site, kind)
    node_words = f"{nodes} node{'s' if nodes != 1 else ''}"
    return f"{node_words} x {per_node} {site.gpu_model}: {nodes * per_node} rank{'s' if nodes * per_node != 1 else ''}"
