"""The job scripts' check: `handson jobscript lint` at the student's site, and the request
against the task's layout there.
"""

from pathlib import Path

from handson_lib.verdicts.report import Report
from handson_lib.messages import tr
from handson_lib.sites import jobscript
from handson_lib.sites.table import EXERCISE_SITES, get_site, ranks_per_node


#: Job scripts graded with each task: (file, the site table's request kind).
JOBSCRIPTS = {"multi-gpu": ("run_multi_gpu_training.sh", "multi_gpu"),
              "multi-node": ("run_multi_node_training.sh", "multi_node")}


def check_jobscript(script, task, site=None):
    """Grade a task's job script with `handson jobscript lint` at the student's site, and its
    request against the task's layout there. The site is the one lint takes: `site` (--site), else
    the script's `# handson-site: NAME` line, else Reedbush-H (DEFAULT_SITE); only the sites with
    job-script exercises (EXERCISE_SITES) are graded. HANDSON_SITE (the grading machine's
    thresholds) never decides it: the machine that grades is not the site the job is for.

    Lint runs as before a qsub, and its findings are shown as lint prints them. The group line is
    the one error that costs no point: a grader cannot know each student's group. Its finding says
    so in the words lint, the job script's comment and notebook 01 use (jobscript.placeholder_rule)."""
    name, kind = JOBSCRIPTS[task]
    report = Report(f"jobscript-{task}", str(script), against="self")
    path = Path(script)
    if not path.exists():
        report.add("job script lint", False, tr("{name} was not handed in", name=name))
        report.add("resources of the task", False, tr("not checked: no job script"))
        return report
    text = jobscript.read_script(path)
    try:
        site = get_site(jobscript.site_for_script(path, text, site))
    except ValueError as error:     # `# handson-site: NAME` of no site in the table
        site = None
        why = str(error)
    else:
        why = None if site.key in EXERCISE_SITES else tr(
            "the course grades job scripts for {sites}; {site} is not one of them: name your site in the "
            "`# handson-site:` line", sites=", ".join(get_site(k).key for k in EXERCISE_SITES), site=site.title)
    if why:
        report.add("job script lint", False, why)
        report.add("resources of the task", False, tr("not checked: no site to check against"))
        return report
    findings = jobscript.lint(text, site)
    bad = [f for f in jobscript.errors(findings) if f.code != "placeholder"]
    shown = "\n".join("    " + f.format(path.name) for f in findings)
    verdict = (tr("{n} error(s)", n=len(bad)) if bad else
               tr("no error but the placeholder group") if jobscript.errors(findings) else tr("no error"))
    report.add("job script lint", not bad,
               f"`handson jobscript lint --site {site.key}`: {verdict}" + (":\n" + shown if shown else ""))
    if jobscript.too_large(text):
        report.add("resources of the task", False, tr("not checked: the job script is too large"))
        return report
    req = jobscript.parse_request(text)
    nodes = site.scripts.requests[kind][0]
    procs = ranks_per_node(site, kind)
    if not req.select:
        report.add("resources of the task", False, tr("no `#PBS -l select=...` line"))
    else:
        ok = req.nodes == nodes and req.mpiprocs == procs
        asked = tr("asks for {nodes} node(s) x {procs} MPI process(es)", nodes=req.nodes, procs=req.mpiprocs)
        report.add("resources of the task", ok, asked if ok else tr(
            "{asked}; {task} on {site} runs on {nodes} node(s) x {procs} MPI process(es) per node",
            asked=asked, task=task, site=site.title, nodes=nodes, procs=procs))
    return report
