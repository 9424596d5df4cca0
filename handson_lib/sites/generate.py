"""Job scripts from one source: the site table (handson_lib/sites/table.py) and one template per
script kind (handson_lib/sites/templates/).

Generated, by `handson build` (and compared by `handson build --check`):

- jobscripts/<site>/{env.sh, run_multi_gpu_training.sh, run_multi_node_training.sh,
  run_profile.sh, run_scaling_sweep.sh} for every site with job scripts;
- jobscripts/README.md, its table of the sites' differences from the table;
- solutions/run_multi_gpu_training.sh and solutions/run_multi_node_training.sh: the course
  site's task scripts, with the exercise's instructions and nbgrader markers around the #PBS lines
  the student writes, above the same body as jobscripts/reedbush/;
- solutions/<site>/run_multi_gpu_training.sh and run_multi_node_training.sh: the same exercise for
  every other site of EXERCISE_SITES (Miyabi-G, ABCI 3.0), above that site's body. Each exercise
  names its site in a `# handson-site:` line: lint, `handson check jobscript-*` and the grader
  apply that site's rules.

Templates: `{{NAME}}` is replaced by a value; a line that is only `{{NAME}}` by a block of lines
(none when the block is empty); lines starting with `#%` are the template's own comments.
The training scripts' names come from the tasks registry ({{MULTI_GPU_SCRIPT}}, ...).

The parts: the script kinds and their #PBS lines (pbs_lines); where the course goes at a site and
the README's "At your site" steps (site_setup).
"""

import re
import textwrap
from pathlib import Path

from handson_lib.messages import in_english
from handson_lib.sites.jobscript_linter import placeholder_rule
from handson_lib.sites.pbs_lines import (EXERCISE_TASKS, SCRIPTS, TRAINING_SCRIPTS, job_directives, queue,
                                         request_words, resource_directives, select)
from handson_lib.sites.site_setup import COURSE_FOLDER, at_your_site, install_commands
from handson_lib.sites.table import DEFAULT_SITE, EXERCISE_SITES, get_site, script_sites

#: The generator's names, and those of its parts (pbs_lines, site_setup) that the build, the
#: release and the tests read from here.
__all__ = ["TEMPLATES", "PLACEHOLDER_RE", "TEMPLATE_COMMENT", "DIRECTIVES", "SCRIPT_VALUES", "TemplateError",
           "template", "fill", "usage", "submit", "group_hint", "fragment", "site_values", "split_template",
           "site_script", "resource_request", "SITE_LINE_WHY", "exercise_path", "exercise_script",
           "env_script", "launcher_rules", "queue_words", "sites_table", "generated_files", "write", "stale",
           "EXERCISE_TASKS", "SCRIPTS", "at_your_site", "get_site", "resource_directives", "script_sites"]

TEMPLATES = Path(__file__).resolve().parent / "templates"
PLACEHOLDER_RE = re.compile(r"\{\{([A-Z][A-Z0-9_]*)\}\}")
TEMPLATE_COMMENT = "#%"
#: The line of a script template where the #PBS lines go; what is above it is the site's intro.
DIRECTIVES = "{{DIRECTIVES}}"


#: The training scripts' names in the templates ({{MULTI_GPU_SCRIPT}}, ...), from the tasks registry.
SCRIPT_VALUES = {f"{kind.upper()}_SCRIPT": script for kind, script in TRAINING_SCRIPTS.items()}


class TemplateError(ValueError):
    """A template names a placeholder that the generator does not fill."""


def template(name):
    return (TEMPLATES / name).read_text()


def fill(text, values, name="template"):
    """`text` with its placeholders filled and its `#%` lines dropped."""
    out = []
    for line in text.splitlines():
        if line.startswith(TEMPLATE_COMMENT):
            continue
        whole = PLACEHOLDER_RE.fullmatch(line)
        if whole:
            block = _value(values, whole.group(1), name)
            out.extend(block.splitlines())
            continue
        out.append(PLACEHOLDER_RE.sub(lambda m: _value(values, m.group(1), name), line))
    return "\n".join(out) + "\n"


def _value(values, key, name):
    if key not in values:
        raise TemplateError(f"{name}: no value for {{{{{key}}}}} (known: {', '.join(sorted(values))})")
    return values[key]


# ----------------------------------------------------------------------------- values


def usage(site, kind):
    """How the script is submitted (comment lines)."""
    script = SCRIPTS[kind][0]
    if kind != "profile":
        return f"#     {submit(site, script)}"
    runs = [(submit(site, script, PROFILE="1"), "profile Task #2"),
            (submit(site, script, PROFILE="1", PROFILE_TASK="multi-gpu"), "profile Task #1"),
            (submit(site, script), "same run, no profiler")]
    width = max(len(cmd) for cmd, _ in runs) + 2
    return "\n".join(f"#     {cmd:<{width}}# {what}" for cmd, what in runs)


def submit(site, script, **env):
    """`qsub -v A=1,B=2 run.sh`, or `A=1 B=2 bash run.sh` where no scheduler runs."""
    if site.scripts.submit == "qsub":
        options = f"-v {','.join(f'{k}={v}' for k, v in env.items())} " if env else ""
        return f"qsub {options}{script}"
    return " ".join([*(f"{k}={v}" for k, v in env.items()), "bash", script])


def group_hint(site):
    if site.placeholder is None:
        return ""
    where = "your ABCI group" if site.group == "P" else "yours (`id -ng`)"
    return (f"# Replace the group {site.placeholder} below with {where} first: "
            f"`handson jobscript lint` checks.")


def fragment(name, values):
    return fill(template(name), values, name).rstrip("\n")


def site_values(site, kind):
    """Every placeholder of a script template, for `site`."""
    scripts = site.scripts
    values = {
        "SITE": site.key,
        "TITLE": site.title,
        "NODE_GPUS": f"{site.gpus} x {site.gpu_model}" if site.gpus > 1 else f"one {site.gpu_model}",
        "REQUEST": request_words(site, kind) if kind in scripts.requests else "",
        "USAGE": usage(site, kind),
        "GROUP_HINT": group_hint(site),
        "ENV_SH": scripts.env_sh,
        "GPU_LIST": " ".join(str(i) for i in range(site.gpus)),
        "PROFILER": site.profiler,
        "PROFILER_HINT": scripts.profiler_hint,
        "PROFILE_ON": submit(site, "", PROFILE="1").replace(" bash", "").strip(),
        "PHASES_ON": submit(site, SCRIPTS["scaling"][0], HANDSON_PHASES="1"),
        "LAUNCH": scripts.launcher,
        "LAUNCH_SWEEP": scripts.launcher.replace('"$NP"', '"$p"'),
        "LAUNCH_WHY": scripts.launcher_why,
        **SCRIPT_VALUES,
    }
    values["ENVIRONMENT"] = fragment("_environment.sh", values)
    values["FIND_TASK"] = fragment("_find_task.sh", values)
    values["GPU_FLAG"] = fragment("_gpu_flag.sh", values)
    values["RANKS"] = fragment(f"_ranks_{scripts.ranks}.sh", values)
    values["PROFILER_COMMAND"] = fragment(f"_profiler_{site.profiler}.sh", values)
    values["PROFILE_ABOUT"] = fragment(f"_about_{site.profiler}.sh", values)
    return values


# ----------------------------------------------------------------------------- scripts


def split_template(kind):
    """(the site's intro, the body from the #PBS lines on) of a script template."""
    text = template(SCRIPTS[kind][0])
    intro, found, body = text.partition(DIRECTIVES + "\n")
    if not found:
        raise TemplateError(f"{SCRIPTS[kind][0]}: no {DIRECTIVES} line")
    return intro, body


def site_script(site, kind):
    """jobscripts/<site>/<script>: the site's intro, every #PBS line, the body."""
    intro, body = split_template(kind)
    values = site_values(site, kind)
    values["DIRECTIVES"] = "\n".join([*resource_directives(site, kind), *job_directives(site, kind),
                                      "#PBS -j oe"])
    return fill(intro + DIRECTIVES + "\n" + body, values, SCRIPTS[kind][0])


def resource_request(site, kind):
    """What a task's resource lines must ask for, in words (the exercise's instruction)."""
    nodes, _ = site.scripts.requests[kind]
    what = EXERCISE_TASKS[kind][1].format(nodes=nodes, gpus=site.gpus, ranks=nodes * site.gpus,
                                          processes="process" if site.gpus == 1 else "processes")
    return f"Complete the queue and resource lines: the {queue(site, kind)} queue, {what}."


#: The words after an exercise's `# handson-site:` line: the line is the student's choice of site.
SITE_LINE_WHY = "(your site: lint, `handson check` and the grader apply its rules)"


def exercise_path(site, kind):
    """solutions/<script> for the course's site, solutions/<site>/<script> for the others."""
    script = Path(SCRIPTS[kind][0])
    return Path("solutions") / script if site.key == DEFAULT_SITE else Path("solutions") / site.key / script


def _group_step(site, group):
    """Step (2) of an exercise job script: replace the group, and the rule for the placeholder in
    the words lint and the graded check use (jobscript_linter.placeholder_rule)."""
    with in_english():
        rule = placeholder_rule()
    lines = textwrap.wrap(f"(2) Replace {site.placeholder} above with {group}: {rule}.", width=96)
    return ["# " + lines[0], *("#     " + line for line in lines[1:])]


def exercise_script(kind, site=None):
    """solutions/[<site>/]<script>: the exercise's intro with its `# handson-site:` line and the
    resource lines between nbgrader markers (the student writes them), the rest of the #PBS lines,
    the same body as the site's script."""
    site = site or get_site(DEFAULT_SITE)
    task, _ = EXERCISE_TASKS[kind]
    script = SCRIPTS[kind][0]
    # Reedbush-H's words stay as they were: the Japanese catalogue of solutions/ is keyed by them.
    node = (f"{site.gpus} x {site.gpu_model} per node" if site.gpus > 1 or site.key == DEFAULT_SITE
            else f"one {site.gpu_model} per node")
    group = ("your ABCI group (`groups` on the login node)" if site.group == "P"
             else "your own group (`id -ng`)")
    # The course's site is the default of every reader of job scripts, and its exercise stays
    # byte for byte as the notebooks' recorded outputs were made with (their digests cover it).
    site_line = [] if site.key == DEFAULT_SITE else [f"# handson-site: {site.key}   {SITE_LINE_WHY}"]
    intro = [
        "#!/bin/bash",
        *site_line,
        f"# {task} job script for {site.title} ({node}, {site.scheduler}). Submit with:",
        f"#     qsub -j oe {script}",
        "# (1) " + resource_request(site, kind),
        "### BEGIN SOLUTION",
        *resource_directives(site, kind),
        "### END SOLUTION",
        *job_directives(site, kind),
        *_group_step(site, group),
    ]
    _, body = split_template(kind)
    return "\n".join(intro) + "\n" + fill(body, site_values(site, kind), script)


def env_script(site):
    parts = site.scripts.env
    values = {key.upper(): parts[key] for key in ("about", "home", "modules", "python")}
    values["COURSE"] = "$HOME/" + COURSE_FOLDER
    values["INSTALL"] = "\n".join(f"#   {line}" for line in install_commands(site))
    values["EXTRA"] = "\n" + parts["extra"] if parts["extra"] else ""
    values["DATA_SUBMIT"] = submit(site, SCRIPTS["multi_node"][0], DATASET="cifar10")
    return fill(template("env.sh"), values, "env.sh")


# ----------------------------------------------------------------------------- README


def launcher_rules(site):
    words = []
    for rule in site.mpi:
        if rule.startswith("export:"):
            words.append(f"`-x {rule.split(':', 1)[1]}`")
        elif rule == "hostfile":
            words.append("`-hostfile $PBS_NODEFILE`" if site.scripts.submit == "qsub" else "`--hostfile`")
        elif rule == "np":
            words.append("`-np N`")
        elif rule == "ppr":
            words.append("`--map-by ppr:N:node`")
    return ", ".join(words) or "nothing special (the scripts pass the node file anyway)"


def queue_words(site):
    words = []
    for q in site.queues.values():
        nodes = f"{q.max_nodes} node{'s' if q.max_nodes != 1 else ''}"
        hours = f"{q.max_walltime // 3600}:{q.max_walltime % 3600 // 60:02d}"
        gpus = f" ({q.gpus} GPU{'s' if q.gpus != 1 else ''} per node)" if q.gpus != site.gpus else ""
        words.append(f"`{q.name}` {nodes} {hours}{gpus}")
    return ", ".join(words)


def sites_table():
    """The Markdown table of the sites' differences, one column per site."""
    sites = script_sites()
    group = {"group_list": "`#PBS -W group_list=G`", "P": "`#PBS -P G`", None: "none"}
    rows = [
        ("GPUs per node", lambda s: f"{s.gpus} x {s.gpu_model}"),
        ("scheduler", lambda s: s.scheduler + ("" if s.scripts.submit == "qsub" else
                                               " (run the scripts with `bash`)")),
        ("queues (course's assumed limits)", queue_words),
        ("group charged", lambda s: group[s.group]),
        ("placeholder to replace", lambda s: f"`{s.placeholder}`" if s.placeholder else "-"),
        ("Task #2 request", lambda s: f"`{select(s, 'multi_node')}` "
                                      f"({s.scripts.requests['multi_node'][0] * s.gpus} ranks)"),
        ("launcher must have", launcher_rules),
        ("profiler (`PROFILE=1`)", lambda s: f"`{s.profiler}`"),
        ("HOME in jobs", lambda s: s.home),
        ("env.sh at", lambda s: f"`{s.scripts.env_sh}`"),
        ("`handson jobscript lint` rules", lambda s: f"`--site {s.key}`"
                                                     + (" (default)" if s.key == DEFAULT_SITE else "")),
    ]
    lines = ["| | " + " | ".join(f"{s.title} (`{s.key}/`)" for s in sites) + " |",
             "|---" * (len(sites) + 1) + "|"]
    for label, cell in rows:
        lines.append(f"| {label} | " + " | ".join(cell(s) for s in sites) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the files


def generated_files():
    """{path relative to the course root: text} of every generated job script and README."""
    files = {}
    for site in script_sites():
        folder = Path("jobscripts") / site.key
        files[folder / "env.sh"] = env_script(site)
        for kind, (name, _) in SCRIPTS.items():
            files[folder / name] = site_script(site, kind)
    files[Path("jobscripts") / "README.md"] = fill(template("README.md"), {"SITES_TABLE": sites_table(),
                                                                        **SCRIPT_VALUES}, "README.md")
    for key in EXERCISE_SITES:
        for kind in EXERCISE_TASKS:
            files[exercise_path(get_site(key), kind)] = exercise_script(kind, get_site(key))
    return files


def write(root):
    """Write every generated file under `root` that differs; the relative paths written."""
    written = []
    for rel, text in generated_files().items():
        path = Path(root) / rel
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(rel)
        if path.name.startswith("run_"):
            path.chmod(0o755)       # job scripts run with bash or qsub; env.sh is sourced
    return written


def stale(root):
    """[(relative path, what is wrong)] for generated files missing or edited under `root`."""
    found = []
    for rel, text in generated_files().items():
        path = Path(root) / rel
        if not path.exists():
            found.append((rel, "missing: run `handson build`"))
        elif path.read_text() != text:
            found.append((rel, "differs from the site table and templates (handson_lib/sites/): run "
                               "`handson build` (edit the table or the template, never the copy)"))
    return found
