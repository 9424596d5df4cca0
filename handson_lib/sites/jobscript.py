"""`handson jobscript lint|run`: PBS job scripts checked against a site, or run here without one.

    handson jobscript lint run_multi_node_training.sh [--site reedbush] [--template]
    handson jobscript run  run_multi_node_training.sh            # no scheduler: run it here

`lint(text, site)` returns a list of :class:`Finding` (line number, error or warning, message,
the line itself). It refuses what qsub would accept but the job would get wrong, and what the
scheduler would refuse only after a wait in the queue:

- a placeholder left in (the course's `gt00`, the seed's `pz0xxx`, `xx00`, `<group>`,
  `YOUR_GROUP`, ABCI's `-P grpname`) -- with `template=True` (`--template`) this one is a warning,
  for the site templates in jobscripts/ that are shipped with the placeholder;
- a student skeleton whose resource lines are still `# PUT YOUR CODE HERE`;
- an impossible request: more MPI processes per node than the node has GPUs, a walltime over
  the queue's limit, an unknown queue, more nodes than the queue allows, a malformed
  `select` / `walltime`, Torque's `nodes=N:ppn=M` on a PBS Pro site;
- a missing queue, walltime or group;
- an `mpiexec` / `mpirun` of a multi-rank job without the options the site needs (Reedbush:
  `-x PYTHONUSERBASE`; ABCI 3.0: `-hostfile $PBS_NODEFILE` and `-np`; hostfile cloud:
  `--hostfile` and `--map-by ppr:N:node`);
- `#PBS` lines after the first command (qsub ignores them), shell variables in `#PBS` lines
  (qsub does not expand them), an en dash copied from the slides (`–W`).

A script over 256 KiB (LARGEST_SCRIPT) is one error, and no rule reads it: every rule is linear in
the script's size, and a grader lints whatever a student hands in.

Warnings (the job runs, but probably not as meant): no `cd $PBS_O_WORKDIR`, no `#!` line,
`# PBS` with a space (a comment, not a directive), several nodes but no `mpiexec`.

The site's rules come from `--site`, else a `# handson-site: NAME` line in the script (the
templates in jobscripts/<site>/ carry one), else the path `jobscripts/<site>/...`, else
Reedbush-H (the course's site; `--site local`, this machine and its Slurm cluster, has the same
queues). The limits are in the one site table, handson_lib/sites/table.py: the course's
assumptions, to be checked against the site's guide. Each rule is one function (LINT_RULES).

`handson jobscript run FILE` is the fallback without a scheduler: lint (refuse on any error),
then run `bash FILE` with the environment a PBS job sees (PBS_O_WORKDIR, PBS_JOBID,
PBS_JOBNAME, PBS_QUEUE, PBS_NODEFILE with select x mpiprocs lines), the venv first on PATH,
Open MPI allowed to run as root and to put more ranks than cores on this machine, the walltime
as a watchdog, and the output written to `<job name>.o<sequence>` like `qsub -j oe` does.
"""

import difflib
import os
import re
import shlex
import socket
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from handson_lib import launch
from handson_lib.messages import tr
from handson_lib.sites.table import (DEFAULT_SITE, EXERCISE_SITES, SITES, Queue, Site, format_walltime,
                                     get_site, parse_walltime, site_key)


def site_for_path(path, default=DEFAULT_SITE):
    """`jobscripts/<site>/...` names its site; anything else is Reedbush-H's."""
    parts = Path(os.path.abspath(path)).parts
    for i, part in enumerate(parts[:-1]):
        if part == "jobscripts" and i + 1 < len(parts) - 1:
            try:
                return site_key(parts[i + 1])
            except ValueError:
                continue
    return default


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
# Parsing
# ============================================================================================

@dataclass
class Chunk:
    count: int
    resources: dict

    @property
    def mpiprocs(self):
        return int(self.resources.get("mpiprocs", 1))


def parse_select(value):
    """`2:mpiprocs=2:ompthreads=1[+1:ncpus=4]` into chunks; ValueError when malformed."""
    chunks = []
    if not value:
        raise ValueError(tr("select is empty"))
    for spec in value.split("+"):
        fields = spec.split(":")
        count = 1
        if fields and re.fullmatch(r"\d+", fields[0]):
            count = int(fields.pop(0))
        elif fields and "=" not in fields[0]:
            raise ValueError(tr("`{value}` is not a node count (select=N:mpiprocs=M)", value=fields[0]))
        resources = {}
        for f in fields:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=[^=:]+", f):
                raise ValueError(tr("`{value}` is not resource=value (select=N:mpiprocs=M)", value=f))
            key, val = f.split("=", 1)
            resources[key] = val
        for key in ("mpiprocs", "ompthreads", "ncpus", "ngpus"):
            if key in resources and not re.fullmatch(r"\d+", resources[key]):
                raise ValueError(tr("{key}={value} is not a whole number", key=key, value=resources[key]))
        if count < 1:
            raise ValueError(tr("select asks for 0 nodes"))
        chunks.append(Chunk(count, resources))
    return chunks


@dataclass
class Directive:
    line: int
    text: str
    option: str
    value: str


@dataclass
class JobRequest:
    """What the #PBS lines ask for (one value per option: the last wins, as in qsub)."""
    queue: str = None
    select: list = None                 # list of Chunk, None when absent or malformed
    walltime: int = None                # seconds
    name: str = None
    group: str = None
    project: str = None
    join: str = None
    output: str = None
    lines: dict = field(default_factory=dict)   # what -> line number
    directives: list = field(default_factory=list)

    @property
    def nodes(self):
        return sum(c.count for c in self.select) if self.select else 0

    @property
    def ranks(self):
        return sum(c.count * c.mpiprocs for c in self.select) if self.select else 0

    @property
    def mpiprocs(self):
        """Processes per node (the largest chunk's)."""
        return max((c.mpiprocs for c in self.select), default=0) if self.select else 0

    @property
    def ompthreads(self):
        if not self.select:
            return None
        values = [int(c.resources["ompthreads"]) for c in self.select if "ompthreads" in c.resources]
        return values[0] if values else None


#: The largest job script lint reads: no real one comes near it, and every rule then stays cheap
#: (each is linear in the script's size, but a grader lints whatever a student hands in).
LARGEST_SCRIPT = 256 << 10

DIRECTIVE_RE = re.compile(r"^#PBS(\s|$)")
LOOSE_DIRECTIVE_RE = re.compile(r"^\s*#\s*pbs\s+[-\u2013\u2014\u2212]", re.IGNORECASE)
STUB_RE = re.compile(r"PUT\s+YOUR\s+CODE\s+HERE", re.IGNORECASE)
DASHES = "\u2013\u2014\u2212\u2010\u2011"
VALUE_OPTIONS = set("qlWNPAjoemMvSJrapkucC")


def read_script(path):
    """The text of a job script, at most LARGEST_SCRIPT + 1 bytes of it (lint refuses a longer one)."""
    with open(path, "rb") as f:
        return f.read(LARGEST_SCRIPT + 1).decode(errors="replace")


def too_large(text):
    """True when `text` is over LARGEST_SCRIPT bytes (then no rule reads it)."""
    return len(text) > LARGEST_SCRIPT or len(text.encode(errors="surrogatepass")) > LARGEST_SCRIPT


def _strip_comment(text):
    """`#PBS -q h-debug   # <--- comment` (the seed's style) without the comment."""
    body = text[4:]
    match = re.search(r"\s#", body)
    return body[:match.start()] if match else body


def _tokens(text):
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _split_directive(body):
    """Tokens of a directive into (option, value) pairs; `-lwalltime=1:00:00` works too."""
    tokens = _tokens(body)
    pairs, i = [], 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.startswith("-") and len(tok) >= 2:
            opt = tok[:2]
            if len(tok) > 2:
                pairs.append((opt, tok[2:]))
            elif opt[1] in VALUE_OPTIONS and i + 1 < len(tokens):
                pairs.append((opt, tokens[i + 1]))
                i += 1
            else:
                pairs.append((opt, ""))
        else:
            pairs.append(("", tok))
        i += 1
    return pairs


def header_end(lines):
    """Index (0-based) of the first executable line: qsub reads #PBS lines only above it."""
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return i
    return len(lines)


def parse_request(text):
    """The #PBS directives of a job script (above the first command) as a :class:`JobRequest`.

    Raises nothing: malformed values are left None (the linter says why).
    """
    lines = text.splitlines()
    end = header_end(lines)
    req = JobRequest()
    for i, line in enumerate(lines[:end]):
        if not DIRECTIVE_RE.match(line):
            continue
        for opt, value in _split_directive(_strip_comment(line)):
            d = Directive(i + 1, line, opt, value)
            req.directives.append(d)
            if opt == "-q":
                # `queue@server` names a queue of another server: the queue is what counts.
                req.queue, req.lines["queue"] = value.split("@", 1)[0], i + 1
            elif opt == "-N":
                req.name, req.lines["name"] = value, i + 1
            elif opt == "-P":
                req.project, req.lines["project"] = value, i + 1
            elif opt == "-j":
                req.join = value
            elif opt == "-o":
                req.output = value
            elif opt == "-W":
                for attr in value.split(","):
                    if attr.startswith("group_list="):
                        req.group, req.lines["group"] = attr.split("=", 1)[1], i + 1
            elif opt == "-l":
                for res in value.split(","):
                    key, _, val = res.partition("=")
                    if key == "select":
                        req.lines["select"] = i + 1
                        try:
                            req.select = parse_select(val)
                        except ValueError:
                            req.select = None
                    elif key == "walltime":
                        req.lines["walltime"] = i + 1
                        try:
                            req.walltime = parse_walltime(val)
                        except ValueError:
                            req.walltime = None
    return req


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
# mpiexec / mpirun lines
# ============================================================================================

LAUNCHERS = {"mpiexec", "mpirun", "mpiexec.hydra", "mpiexec_mpt", "orterun", "prterun"}
NOT_A_CALL = {"which", "type", "echo", "printf", "hash", "module", "alias"}
# Launcher options that take a value (Open MPI, PRRTE, MPICH/Intel MPI hydra); two for -genv.
_MPI_VALUE_OPTS = {
    "-n", "-np", "--np", "--n", "-c", "-x", "-H", "-host", "--host", "-hostfile", "--hostfile",
    "-machinefile", "--machinefile", "-f", "--default-hostfile", "-map-by", "--map-by",
    "-bind-to", "--bind-to", "-rank-by", "--rank-by", "-npernode", "--npernode", "-N", "-ppn",
    "-perhost", "-genvlist", "-envlist", "--prefix", "-prefix", "-wdir", "--wdir", "-wd",
    "--personality", "--output", "--runtime-options", "-hosts", "-rf", "--rankfile",
    "-output-filename", "--output-filename", "-tag-output", "--app",
}
_MPI_TWO_VALUE_OPTS = {"-mca", "--mca", "-gmca", "--gmca", "-genv", "-env", "--prtemca", "--pmixmca"}


@dataclass
class LauncherCall:
    line: int
    text: str
    launcher: str
    options: list       # (option, value) pairs before the program


def logical_lines(lines, start=0):
    """(first line number, joined text) of the shell commands, `\\` continuations joined."""
    out, i = [], start
    while i < len(lines):
        first, parts = i, []
        while True:
            line = lines[i]
            if line.rstrip().endswith("\\"):
                parts.append(line.rstrip()[:-1])
                i += 1
                if i < len(lines):
                    continue
            else:
                parts.append(line)
                i += 1
            break
        joined = " ".join(parts)
        if joined.strip() and not joined.lstrip().startswith("#"):
            out.append((first + 1, joined))
    return out


def _shell_tokens(text):
    try:
        lex = shlex.shlex(text, posix=True, punctuation_chars=";&|()")
        lex.whitespace_split = True
        lex.commenters = "#"
        return list(lex)
    except ValueError:
        return text.split()


def find_launchers(text):
    """Every `mpiexec` / `mpirun` call below the #PBS lines, with its options."""
    lines = text.splitlines()
    calls = []
    for number, joined in logical_lines(lines, header_end(lines)):
        tokens = _shell_tokens(joined)
        options_end = 0     # a launcher's name among another's options is a value, not a call
        for k, tok in enumerate(tokens):
            if k < options_end or os.path.basename(tok) not in LAUNCHERS:
                continue
            if k > 0 and tokens[k - 1] in NOT_A_CALL:
                continue
            if k > 0 and tokens[k - 1] in ("-v",) and k > 1 and tokens[k - 2] == "command":
                continue
            options, j = [], k + 1
            while j < len(tokens):
                t = tokens[j]
                if t in (";", "&&", "||", "|", "&", ")"):
                    break
                if not t.startswith("-"):
                    break
                if "=" in t and t.startswith("--"):
                    opt, value = t.split("=", 1)
                    options.append((opt, value))
                elif t in _MPI_TWO_VALUE_OPTS:
                    options.append((t, " ".join(tokens[j + 1:j + 3])))
                    j += 2
                elif t in _MPI_VALUE_OPTS:
                    options.append((t, tokens[j + 1] if j + 1 < len(tokens) else ""))
                    j += 1
                else:
                    options.append((t, ""))
                j += 1
            options_end = j
            calls.append(LauncherCall(number, lines[number - 1], os.path.basename(tok), options))
    return calls


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
            body = _strip_comment(line)
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
        if ngpus is not None and int(ngpus) > gpus:
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
                   "login node) before qsub", value=value, why=why) if site.group == "group_list" else
                tr("group `{value}` is a placeholder ({why}): replace it with your own group before qsub",
                   value=value, why=why))


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


SITE_MARK_RE = re.compile(r"^#[ \t]*handson-site:[ \t]*([\w.-]+)", re.M | re.I)


def site_for_script(path, text=None, site=None):
    """The site a job script is for: `site` (--site), else a `# handson-site: NAME` line in it
    (the templates in jobscripts/<site>/ carry one, so a copy elsewhere keeps its site), else
    the path `jobscripts/<site>/...`, else Reedbush-H."""
    if site:
        return get_site(site).key
    if text is None:
        text = read_script(path)
    mark = SITE_MARK_RE.search(text) if not too_large(text) else None
    if mark:
        return get_site(mark.group(1)).key
    return site_for_path(path)


def lint_file(path, site=None, template=False):
    """(site key, findings) for a file; the site as :func:`site_for_script` finds it."""
    text = read_script(path)
    key = site_for_script(path, text, site)
    return key, lint(text, key, template=template)


def check_before_submit(path, site=None):
    """Error findings that must stop a `qsub` (a placeholder left in, an impossible request)."""
    return errors(lint_file(path, site)[1])


# ============================================================================================
# Command line
# ============================================================================================

#: The file the job scripts source (jobscripts/<site>/env.sh): no #PBS lines to check.
ENV_SH = "env.sh"


def lint_main(files, site=None, template=False, out=None):
    out = out or sys.stdout
    if site:
        try:
            get_site(site)
        except ValueError as exc:
            print(f"handson jobscript lint: {exc}", file=sys.stderr)
            return 2
    n_err = n_warn = 0
    sites = set()
    sourced = [path for path in files if Path(path).name == ENV_SH]
    for path in sourced:
        print(f"{path}: skipped: the site's environment, sourced by the job scripts (not submitted)",
              file=out)
    files = [path for path in files if path not in sourced]
    for path in files:
        try:
            key, findings = lint_file(path, site, template=template)
        except OSError as exc:
            print(f"{path}:0: error: " + tr("cannot read: {error}", error=exc.strerror or exc), file=out)
            n_err += 1
            continue
        except ValueError as exc:           # an unknown site named in the file
            print(f"{path}:1: error: {exc}", file=out)
            n_err += 1
            continue
        sites.add(get_site(key).title)
        for f in findings:
            print(f.format(path), file=out)
        n_err += len(errors(findings))
        n_warn += len(findings) - len(errors(findings))
    fields = dict(files=len(files), sites=", ".join(sorted(sites)) or "-", errors=n_err, warnings=n_warn)
    print("handson jobscript lint: " + (
        tr("{files} file(s) checked for {sites}: {errors} error(s), {warnings} warning(s): fix the errors "
           "before qsub", **fields) if n_err else
        tr("{files} file(s) checked for {sites}: {errors} error(s), {warnings} warning(s): ready to submit",
           **fields)), file=out)
    return 1 if n_err else 0


def local_nodefile_lines(req, host="localhost"):
    """One line per rank, as PBS writes $PBS_NODEFILE (select x mpiprocs)."""
    lines = []
    for chunk in req.select or [Chunk(1, {})]:
        for _ in range(chunk.count):
            lines += [host] * chunk.mpiprocs
    return lines


def job_environment(script, req, jobid, nodefile, base=None):
    """The environment a PBS job sees, plus what Open MPI needs on this one machine."""
    env = dict(os.environ if base is None else base)
    workdir = str(Path(script).resolve().parent)
    name = req.name or Path(script).name
    env.update({
        "PBS_O_WORKDIR": workdir,
        "PBS_O_HOME": env.get("HOME", workdir),
        "PBS_O_PATH": env.get("PATH", ""),
        "PBS_O_HOST": socket.gethostname(),
        "PBS_O_SHELL": env.get("SHELL", "/bin/bash"),
        "PBS_O_QUEUE": req.queue or "workq",
        "PBS_QUEUE": req.queue or "workq",
        "PBS_JOBID": jobid,
        "PBS_JOBNAME": name,
        "PBS_NODEFILE": str(nodefile),
        "PBS_ENVIRONMENT": "PBS_BATCH",
        "PBS_JOBDIR": env.get("HOME", workdir),
        "NCPUS": str((req.select[0].resources.get("ncpus") if req.select else None)
                     or req.ompthreads or 1),
        # PBS Pro sets OMP_NUM_THREADS from ompthreads; one thread per rank otherwise (here).
        "OMP_NUM_THREADS": str(req.ompthreads or 1),
        "PATH": f"{launch.venv_bin()}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",
    })
    if os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    # More ranks than cores on this machine: Open MPI 4 reads the OMPI_MCA_ name, Open MPI 5's
    # runtime (PRRTE) only the PRTE_MCA_ one (tested: `mpiexec -n 4` on 2 cores).
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    env.setdefault("PRTE_MCA_rmaps_default_mapping_policy", ":oversubscribe")
    env.setdefault("OMPI_MCA_hwloc_base_binding_policy", "none")
    env.setdefault("PRTE_MCA_hwloc_default_binding_policy", "none")
    return env


def run_main(path, timeout=None, site=None, out=None):
    """`handson jobscript run FILE`: 0 or the script's exit code; 2 refused; 124 walltime."""
    out = out or sys.stdout
    script = Path(path)
    if not script.is_file():
        print("handson jobscript run: " + tr("{file}: no such file", file=path), file=sys.stderr)
        return 2
    try:
        key, findings = lint_file(script, site)
    except ValueError as exc:
        print(f"handson jobscript run: {exc}", file=sys.stderr)
        return 2
    site_obj = get_site(key)
    for f in findings:
        print(f.format(path), file=out)
    if errors(findings):
        print("handson jobscript run: " + tr(
            "refused: {n} error(s) above; fix them first, as qsub on {site} would need "
            "(`handson jobscript lint {path}`)", n=len(errors(findings)), site=site_obj.title, path=path),
              file=out)
        return 2
    job = LocalJob.of(script, timeout)
    job.describe(site_obj, timeout, out)
    return job.run(out)


@dataclass
class LocalJob:
    """A job script run here as PBS would run it: its request, id, output file and watchdog."""
    script: Path
    req: JobRequest
    seq: int
    limit: float                # seconds: --timeout, else the walltime

    @classmethod
    def of(cls, script, timeout=None):
        req = parse_request(script.read_text(errors="replace"))
        return cls(script, req, os.getpid(), float(timeout) if timeout else float(req.walltime))

    @property
    def jobid(self):
        return f"{self.seq}.local"

    @property
    def name(self):
        return self.req.name or self.script.name

    @property
    def workdir(self):
        return self.script.resolve().parent

    @property
    def output(self):
        """`-o FILE` (relative to the work folder), else `<job name>.o<sequence>` as PBS names it."""
        if self.req.output:
            output = Path(self.req.output)
            return output if output.is_absolute() else self.workdir / output
        return self.workdir / f"{self.name}.o{self.seq}"

    def describe(self, site, timeout, out):
        req, cores = self.req, launch.cpu_count()
        # PBS's own words (select, mpiprocs, -j oe) stay as they are in every language.
        chunks = " + ".join(f"{c.count} node{'s' if c.count != 1 else ''} x {c.mpiprocs} mpiprocs"
                            for c in req.select)
        print("handson jobscript run: " + tr(
            "no scheduler here: running {script} as a PBS job would run ({site} rules)",
            script=self.script.name, site=site.title), file=out)
        print(f"  job id     {self.jobid}", file=out)
        print(f"  job name   {self.name}", file=out)
        print(f"  queue      {req.queue or tr('(default)')} " + tr("(not queued: runs here now)"), file=out)
        where = (tr("{ranks} rank(s), all on this machine ({cores} cores; oversubscribed)", ranks=req.ranks,
                    cores=cores) if req.ranks > cores else
                 tr("{ranks} rank(s), all on this machine ({cores} cores)", ranks=req.ranks, cores=cores))
        print(f"  nodes      {chunks} = {where}", file=out)
        if req.ompthreads:
            print(f"  ompthreads {req.ompthreads}", file=out)
        watchdog = (tr("(watchdog: {limit:g} s from --timeout)", limit=self.limit) if timeout
                    else tr("(watchdog)"))
        print(f"  walltime   {format_walltime(req.walltime)} {watchdog}", file=out)
        print(f"  workdir    {self.workdir} ($PBS_O_WORKDIR)", file=out)
        print(f"  output     {self.output} " + tr("(stdout and stderr, like -j oe)"), file=out)
        out.flush()

    def run(self, out):
        """Run the script under the watchdog; the exit code (124 past the walltime)."""
        fd, nodefile = tempfile.mkstemp(prefix=f"pbs_nodefile.{self.seq}.", text=True)
        with os.fdopen(fd, "w") as handle:
            handle.write("\n".join(local_nodefile_lines(self.req)) + "\n")
        env = job_environment(self.script, self.req, self.jobid, nodefile)
        try:
            result = launch.run_watched(["bash", str(self.script.resolve())], self.limit, env=env,
                                        cwd=str(self.workdir), echo=True)
        finally:
            os.unlink(nodefile)
        return self.report(result, out)

    def report(self, result, out):
        text = result.output
        if result.timed_out:
            text += (f"=>> PBS: job killed: walltime {result.seconds:.0f} exceeded limit "
                     f"{self.limit:.0f}\n")
        self.output.write_text(text)
        if result.timed_out:
            print("handson jobscript run: " + tr(
                "walltime exceeded: killed after {seconds:.0f} s (limit {limit}); {killed} process(es) "
                "stopped; output in {output}", seconds=result.seconds, limit=format_walltime(self.limit),
                killed=len(result.killed), output=self.output), file=out)
            return 124
        print("handson jobscript run: " + tr(
            "job {jobid} finished with exit status {code} in {seconds:.1f} s; output in {output}",
            jobid=self.jobid, code=result.returncode, seconds=result.seconds, output=self.output), file=out)
        return result.returncode


SITE_HELP = (f"one of {', '.join(SITES)} (default: the script's '# handson-site:' line, its path "
             f"jobscripts/<site>/, else {DEFAULT_SITE})")


def add_lint_arguments(parser):
    parser.add_argument("file", nargs="+")
    parser.add_argument("--site", default=None, help=SITE_HELP)
    parser.add_argument("--template", action="store_true",
                        help="site templates: a group placeholder left in is a warning, not an error")


def add_run_arguments(parser):
    parser.add_argument("file")
    parser.add_argument("--site", default=None, help=SITE_HELP)
    parser.add_argument("--timeout", type=float, default=None, help="seconds (default: the script's walltime)")


def lint_command(args):
    return lint_main(args.file, site=args.site, template=args.template)


def run_command(args):
    return run_main(args.file, timeout=args.timeout, site=args.site)
