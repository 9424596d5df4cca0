"""The job-script linter: one function per rule (LINT_RULES) over a parsed script and its site.

`lint(text, site)` returns a list of :class:`Finding` (line number, error or warning, message,
the line itself); handson_lib.sites.jobscript's docstring lists what the rules refuse.
"""

import difflib
import re
from dataclasses import dataclass, field

from handson_lib.messages import tr
from handson_lib.sites.jobscript_parser import (DASHES, DIRECTIVE_RE, LARGEST_SCRIPT, LOOSE_DIRECTIVE_RE,
                                                STUB_RE, JobRequest, find_launchers, header_end,
                                                parse_request, parse_select, read_script,
                                                site_for_script, strip_comment, too_large)
from handson_lib.sites.table import EXERCISE_SITES, SITES, Queue, Site, format_walltime, get_site, parse_walltime


# ============================================================================================
# Findings
# ============================================================================================

@dataclass
class Finding:
    line: int
    severity: str               # "error" or "warning"
    code: str                   # stable identifier for tests and callers
    message: str
    text: str = ""              # the line itself

    @property
    def is_error(self):
        return self.severity == "error"

    def format(self, path="<script>"):
        shown = f"  [{self.text.strip()}]" if self.text.strip() else ""
        return f"{path}:{self.line}: {self.severity}: {self.message}{shown}"

    def __str__(self):
        return self.format("line").replace("line:", "line ", 1)


def errors(findings):
    return [f for f in findings if f.is_error]


# ============================================================================================
# Placeholders
# ============================================================================================

_PLACEHOLDER_PATTERNS = [
    (re.compile(r"^[a-z]{1,3}0+$", re.I), lambda: tr("the course's sample group is all zeros, like gt00")),
    (re.compile(r"x{2,}", re.I), lambda: tr("`xx` marks a sample, as in the seed's pz0xxx")),
    (re.compile(r"[<>{}\[\]]"), lambda: tr("a template slot")),
    (re.compile(r"your", re.I), lambda: tr("a template slot")),
    (re.compile(r"^(gr(ou)?p_?(name)?|group|project(_?name)?|change_?me|todo|fixme|sample|"
                r"example|none|dummy|foo|hoge)$", re.I), lambda: tr("a sample name")),
]


def placeholder_rule():
    """The one rule for a placeholder group, in the reader's language, in the words that lint, the
    graded check (checking.jobscripts), the exercise job scripts' comment (sites.generate) and
    notebook 01 all use (issue 49: they called it an error, a warning and "only a warning")."""
    return tr("left in, the placeholder group is an error before qsub but costs no point in the graded check")


def placeholder_reason(value):
    """Why `value` looks like a placeholder group/project (in the reader's language), or None."""
    value = (value or "").strip()
    if not value:
        return tr("empty")
    for pattern, why in _PLACEHOLDER_PATTERNS:
        if pattern.search(value):
            return why()
    return None


# ============================================================================================
# A launcher call's options
# ============================================================================================

def _opt(call, *names):
    return [v for o, v in call.options if o in names]


def _exports(call):
    names = set()
    for o, v in call.options:
        if o in ("-x", "-genv", "-env", "--env"):
            names.add(v.split("=", 1)[0].split(" ", 1)[0])
        elif o in ("-genvlist", "-envlist"):
            names.update(v.split(","))
        elif o in ("-genvall", "-envall"):
            names.add("*")
    return names


# ============================================================================================
# The linter: one function per rule
# ============================================================================================

@dataclass
class LintContext:
    """What every rule reads: the script, its #PBS request and the site; `add` records a finding."""
    lines: list
    end: int                    # index of the first command: #PBS lines count only above it
    site: Site
    req: JobRequest
    template: bool
    anchor: int                 # where a missing directive is reported: the last #PBS line
    stubs: list                 # line numbers of `# PUT YOUR CODE HERE`
    header_stub: int            # the stub among the #PBS lines, or None
    queue: Queue                # the requested queue on the site, or None
    gpus: int                   # GPUs per node in that queue
    text: str = ""
    found: list = field(default_factory=list)

    def add(self, line, severity, code, message):
        lines = self.lines
        self.found.append(Finding(line, severity, code, message,
                                  lines[line - 1] if 0 < line <= len(lines) else ""))


def lint_context(text, site, template):
    lines = text.splitlines()
    end = header_end(lines)
    req = parse_request(text)
    directive_lines = sorted({d.line for d in req.directives})
    stubs = [i + 1 for i, line in enumerate(lines) if STUB_RE.search(line)]
    queue = site.queues.get(req.queue) if req.queue is not None else None
    return LintContext(
        lines=lines, end=end, site=site, req=req, template=template, text=text,
        anchor=directive_lines[-1] if directive_lines else (end if end else 1),
        stubs=stubs, header_stub=next((n for n in stubs if n <= end), None),
        queue=queue, gpus=queue.gpus if queue else site.gpus)


def rule_shebang(ctx):
    if not ctx.lines or not ctx.lines[0].startswith("#!"):
        ctx.add(1, "warning", "shebang", tr("no `#!/bin/bash` on the first line: PBS runs the script with "
                                            "your login shell"))


def rule_directive_lines(ctx):
    """#PBS lines qsub ignores or misreads: after the first command, en dashes, shell variables,
    `# PBS` comments that look like directives."""
    for i, line in enumerate(ctx.lines):
        number = i + 1
        if DIRECTIVE_RE.match(line):
            body = strip_comment(line)
            if i >= ctx.end:
                ctx.add(number, "error", "late-directive",
                        tr("qsub ignores #PBS lines after the first command (line {line}): move this line up "
                           "to the other #PBS lines", line=ctx.end + 1))
            if any(ch in body for ch in DASHES):
                ctx.add(number, "error", "dash", tr("an en dash (copied from the slides?) instead of an ASCII "
                                                    "hyphen: type `-` again"))
            if "$" in body or "`" in body:
                ctx.add(number, "error", "variable", tr("qsub does not expand shell variables in #PBS lines: "
                                                        "write the value itself"))
        elif LOOSE_DIRECTIVE_RE.match(line) and i < ctx.end:
            ctx.add(number, "warning", "not-a-directive", tr("this is a comment, not a directive: write "
                                                             "`#PBS` (no space, upper case, at the start of "
                                                             "the line)"))


def rule_stubs(ctx):
    req = ctx.req
    for n in ctx.stubs:
        if n != ctx.header_stub:
            ctx.add(n, "error", "stub", tr("unfinished: `# PUT YOUR CODE HERE` is still in the script"))
            continue
        missing = []
        if req.queue is None:
            missing.append(tr("the queue (`#PBS -q {queue}`)", queue=_example_queue(ctx.site)))
        if "select" not in req.lines:
            missing.append(tr("the nodes and processes (`#PBS -l select=N:mpiprocs=M`)"))
        if req.walltime is None and "walltime" not in req.lines:
            missing.append(tr("the walltime (`#PBS -l walltime=HH:MM:SS`)"))
        if missing:
            ctx.add(n, "error", "stub", tr("unfinished skeleton: complete the #PBS lines here; missing: {missing}",
                                           missing=", ".join(missing)))
        else:   # the header completed under its marker, as the Python skeletons are: done, no point lost
            ctx.add(n, "warning", "stub-left", tr("the #PBS lines here are complete: this `# PUT YOUR CODE HERE` "
                                                  "line may stay (PBS reads on past a comment) or go"))


def rule_queue(ctx):
    req, site = ctx.req, ctx.site
    if req.queue is not None:
        if ctx.queue is None:
            close = difflib.get_close_matches(req.queue, list(site.queues), n=1, cutoff=0.5)
            fields = dict(queue=req.queue, site=site.title, queues=", ".join(site.queues))
            owner = _site_of_queue(req.queue, site)
            ctx.add(req.lines["queue"], "error", "queue-unknown",
                    tr("unknown queue `{queue}` on {site}: `{queue}` is a queue of {owner}; if that is your site, "
                       "name it in the script: `# handson-site: {key}` on the line after `#!/bin/bash` (or lint "
                       "with --site {key})", owner=owner.title, key=owner.key, **fields) if owner else
                    tr("unknown queue `{queue}` on {site}: use one of {queues}; did you mean {close}?",
                       close=close[0], **fields) if close else
                    tr("unknown queue `{queue}` on {site}: use one of {queues}", **fields))
    elif ctx.header_stub is None:
        if site.queue_required:
            ctx.add(ctx.anchor, "error", "queue-missing",
                    tr("no queue: add `#PBS -q {queue}` (queues on {site}: {queues})",
                       queue=_example_queue(site), site=site.title, queues=", ".join(site.queues)))
        else:
            ctx.add(ctx.anchor, "warning", "queue-missing", tr("no `#PBS -q`: the server's default queue is used"))


def _site_of_queue(queue, site):
    """The site with job-script exercises, other than `site`, that has a queue called `queue`:
    a script written for it but read with another site's rules (no `# handson-site:` line)."""
    return next((SITES[key] for key in EXERCISE_SITES
                 if key != site.key and queue in SITES[key].queues), None)


def rule_resource_syntax(ctx):
    """Malformed `select` / `walltime` values, Torque's `nodes=N:ppn=M`."""
    site = ctx.site
    for d in ctx.req.directives:
        if d.option != "-l":
            continue
        for res in d.value.split(","):
            key, _, val = res.partition("=")
            if key == "select":
                try:
                    parse_select(val)
                except ValueError as exc:
                    ctx.add(d.line, "error", "select-malformed",
                            tr("malformed `select={value}`: {error}", value=val, error=exc))
            elif key in ("nodes", "ppn"):
                ctx.add(d.line, "error", "select-torque",
                        tr("`{resource}` is Torque syntax; {site} ({scheduler}) takes `-l select=N:mpiprocs=M`",
                           resource=res, site=site.title, scheduler=site.scheduler))
            elif key == "walltime":
                try:
                    if parse_walltime(val) <= 0:
                        ctx.add(d.line, "error", "walltime-malformed", tr("walltime of zero seconds"))
                except ValueError as exc:
                    ctx.add(d.line, "error", "walltime-malformed",
                            tr("malformed walltime: {error} (write HH:MM:SS, e.g. 00:15:00)", error=exc))


def rule_select_missing(ctx):
    if "select" not in ctx.req.lines and ctx.header_stub is None:
        ctx.add(ctx.anchor, "error", "select-missing",
                tr("no node request: add `#PBS -l select=N:mpiprocs=M` (M at most {gpus}: one MPI process per "
                   "GPU of a {site} node)", gpus=ctx.gpus, site=ctx.site.title))


def rule_select_limits(ctx):
    """More processes or GPUs per node than a node has, more nodes than the queue allows."""
    req, site, queue, gpus = ctx.req, ctx.site, ctx.queue, ctx.gpus
    if not req.select:
        return
    line = req.lines["select"]
    for chunk in req.select:
        if chunk.mpiprocs > gpus:
            node = (tr("a {site} node in {queue}", site=site.title, queue=queue.name)
                    if queue and queue.gpus != site.gpus else tr("a {site} node", site=site.title))
            ctx.add(line, "error", "mpiprocs",
                    tr("mpiprocs={mpiprocs} but {node} has {gpus}: at most one MPI process per GPU "
                       "(mpiprocs={most}, and more nodes for more ranks)", mpiprocs=chunk.mpiprocs, node=node,
                       gpus=_gpus(gpus), most=gpus))
        ngpus = chunk.resources.get("ngpus")
        if ngpus is not None and not site.ngpus_resource:
            ctx.add(line, "error", "ngpus",
                    tr("`ngpus={ngpus}`: on {site} a chunk of `select` is a node, and its {gpus} come with it; "
                       "leave `ngpus` out (`select=N:mpiprocs=M` asks for N nodes)", ngpus=ngpus, site=site.title,
                       gpus=_gpus(gpus)))
        elif ngpus is not None and int(ngpus) > gpus:
            ctx.add(line, "error", "ngpus",
                    tr("ngpus={ngpus} but a {site} node has {gpus}", ngpus=ngpus, site=site.title, gpus=gpus))
        if chunk.mpiprocs == 0 and len(req.select) == 1:
            ctx.add(line, "error", "select-malformed", tr("mpiprocs=0: no process would start"))
    if queue and req.nodes > queue.max_nodes:
        ctx.add(line, "error", "nodes-limit",
                tr("{nodes} nodes but queue {queue} allows at most {most} (course assumption for {site})",
                   nodes=req.nodes, queue=queue.name, most=queue.max_nodes, site=site.title))


def rule_walltime(ctx):
    req, queue = ctx.req, ctx.queue
    if "walltime" not in req.lines:
        if ctx.header_stub is None:
            ctx.add(ctx.anchor, "error", "walltime-missing",
                    tr("no walltime: add `#PBS -l walltime=HH:MM:SS` (the job is killed when it runs longer)"))
    elif req.walltime is not None and queue and req.walltime > queue.max_walltime:
        ctx.add(req.lines["walltime"], "error", "walltime-limit",
                tr("walltime {walltime} is over the limit of queue {queue}: {limit} (course assumption for {site})",
                   walltime=format_walltime(req.walltime), queue=queue.name,
                   limit=format_walltime(queue.max_walltime), site=ctx.site.title))


def rule_group(ctx):
    """The group charged, in the site's own option, and not a placeholder."""
    if ctx.site.group == "group_list":
        _group_rule(ctx, own=("group", "-W group_list=GROUP"), other=("project", "-P"),
                    how=tr("your group (`id -ng` on the login node)"))
    elif ctx.site.group == "P":
        _group_rule(ctx, own=("project", "-P GROUP"), other=("group", "-W group_list="),
                    how=tr("your ABCI group (`groups` on the login node shows it)"))


def _group_rule(ctx, own, other, how):
    """`own`: (request field, option) the site takes; `other`: the one it does not."""
    req, site = ctx.req, ctx.site
    own_field, own_option = own
    other_field, other_option = other
    value = getattr(req, own_field)
    if getattr(req, other_field) is not None:
        ctx.add(req.lines[other_field], "error", "group-option",
                tr("{site} takes the group as `#PBS {own}`, not `{other}`", site=site.title, own=own_option,
                   other=other_option))
    if value is None:
        if getattr(req, other_field) is None:
            ctx.add(ctx.anchor, "error", "group-missing",
                    tr("no group: add `#PBS {option}` with {how}", option=own_option, how=how))
        return
    why = placeholder_reason(value)
    if why:
        ctx.add(req.lines[own_field], "warning" if ctx.template else "error", "placeholder",
                tr("group `{value}` is a placeholder ({why}): replace it with your own group (`id -ng` on the "
                   "login node); {rule}", value=value, why=why, rule=placeholder_rule())
                if site.group == "group_list" else
                tr("group `{value}` is a placeholder ({why}): replace it with your own group; {rule}",
                   value=value, why=why, rule=placeholder_rule()))


def rule_job_name(ctx):
    req = ctx.req
    if req.name is not None and not re.match(r"^[A-Za-z][^\s/:@]*$", req.name):
        ctx.add(req.lines["name"], "warning", "name",
                tr("a job name starts with a letter and has no spaces, `/`, `:` or `@`"))


def rule_launchers(ctx):
    """Every mpiexec / mpirun with the site's options; several nodes but no launcher."""
    req = ctx.req
    calls = find_launchers(ctx.text)
    for call in calls:
        _check_launcher(call, ctx.site, req, ctx.gpus, req.ranks, ctx.add)
    if req.select and req.nodes > 1 and not calls:
        ctx.add(req.lines["select"], "warning", "no-mpiexec",
                tr("{nodes} nodes but no mpiexec/mpirun: the script runs on the first node only", nodes=req.nodes))


#: Matched line by line: over the whole text, with re.M, a leading `\s*` runs on across every
#: blank line below each line start (100,000 blank lines took half a minute).
WORKDIR_RE = re.compile(r"[ \t]*cd[ \t]+[^#]*PBS_O_WORKDIR")


def rule_workdir(ctx):
    if not any(WORKDIR_RE.match(line) for line in ctx.lines) and ctx.end < len(ctx.lines):
        ctx.add(ctx.end + 1, "warning", "workdir",
                tr("no `cd \"$PBS_O_WORKDIR\"`: the job starts in your HOME, not in the folder you ran qsub in, "
                   "and relative paths point there"))


LINT_RULES = (rule_shebang, rule_directive_lines, rule_stubs, rule_queue, rule_resource_syntax,
              rule_select_missing, rule_select_limits, rule_walltime, rule_group, rule_job_name,
              rule_launchers, rule_workdir)
SEVERITY_ORDER = {"error": 0, "warning": 1}


def lint(text, site=None, template=False):
    """Findings for a job script `text` on `site` (name or :class:`Site`); errors first by line.

    With `template=True` a placeholder group/project is a warning (site templates)."""
    site = site if isinstance(site, Site) else get_site(site)
    if too_large(text):
        return [Finding(1, "error", "too-large",
                        tr("the job script is over {most} KiB: no job script is that long; is this the right file?",
                           most=LARGEST_SCRIPT >> 10))]
    ctx = lint_context(text, site, template)
    for rule in LINT_RULES:
        rule(ctx)
    return sorted(ctx.found, key=lambda f: (f.line, SEVERITY_ORDER[f.severity]))


def _example_queue(site):
    return next(iter(site.queues))


def _gpus(n):
    """`1 GPU`, `4 GPUs`."""
    return tr("1 GPU") if n == 1 else tr("{n} GPUs", n=n)


def _check_launcher(call, site, req, gpus, ranks, add):
    multi = ranks > 1 or not req.select
    name = call.launcher
    if multi:
        for rule in site.mpi:
            if rule.startswith("export:"):
                var = rule.split(":", 1)[1]
                exported = _exports(call)
                if var not in exported and "*" not in exported:
                    add(call.line, "error", "mpi-export",
                        tr("`{launcher}` does not pass {var} to the ranks on other nodes: add `-x {var}` (as "
                           "the seed's job.sh does); without it the remote ranks do not find the packages "
                           "installed with `pip install --user`", launcher=name, var=var))
            elif rule == "hostfile":
                if not _opt(call, "-hostfile", "--hostfile", "-machinefile", "--machinefile", "-f",
                            "--default-hostfile"):
                    src = "$PBS_NODEFILE" if site.key != "cloud" else "hostfile"
                    add(call.line, "error", "mpi-hostfile",
                        tr("`{launcher}` has no `-hostfile {hostfile}`: on {site} every rank would start on the "
                           "first node", launcher=name, hostfile=src, site=site.title))
            elif rule == "np":
                if not _opt(call, "-n", "-np", "--np", "--n", "-c"):
                    add(call.line, "error", "mpi-np",
                        tr("`{launcher}` has no `-np N`: give the number of ranks (select x mpiprocs = {ranks})",
                           launcher=name, ranks=ranks) if ranks else
                        tr("`{launcher}` has no `-np N`: give the number of ranks (select x mpiprocs)",
                           launcher=name))
            elif rule == "ppr":
                if not any(v.startswith("ppr:") for v in _opt(call, "--map-by", "-map-by")):
                    add(call.line, "error", "mpi-ppr",
                        tr("`{launcher}` has no `--map-by ppr:{gpus}:node`: with a hostfile, Open MPI may start "
                           "too few processes per node (seed 001)", launcher=name, gpus=gpus))
    for value in _opt(call, "-n", "-np", "--np", "--n", "-c"):
        if value.isdigit() and req.select and int(value) > ranks:
            add(call.line, "error", "mpi-too-many",
                tr("`{launcher}` starts {n} ranks but the job has {ranks} (select x mpiprocs): ranks beyond that "
                   "share GPUs", launcher=name, n=value, ranks=ranks))
    for value in _opt(call, "--map-by", "-map-by"):
        m = re.match(r"ppr:(\d+):node", value)
        if m and int(m.group(1)) > gpus:
            add(call.line, "error", "mpi-ppr",
                tr("`--map-by {value}` puts {n} ranks on a node with {gpus}", value=value, n=m.group(1),
                   gpus=_gpus(gpus)))
    for value in _opt(call, "-npernode", "--npernode", "-N", "-ppn", "-perhost"):
        if value.isdigit() and int(value) > gpus:
            add(call.line, "error", "mpi-ppr",
                tr("{n} ranks per node on a node with {gpus}", n=value, gpus=_gpus(gpus)))


def lint_file(path, site=None, template=False):
    """(site key, findings) for a file; the site as :func:`site_for_script` finds it."""
    text = read_script(path)
    key = site_for_script(path, text, site)
    return key, lint(text, key, template=template)


def check_before_submit(path, site=None):
    """Error findings that must stop a `qsub` (a placeholder left in, an impossible request)."""
    return errors(lint_file(path, site)[1])


