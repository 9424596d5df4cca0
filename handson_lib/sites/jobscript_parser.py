"""Reading a PBS job script: its #PBS request (queue, select, walltime, group, ...), its
`mpiexec` / `mpirun` calls, and the site it is for (`# handson-site:` line, else its path).

Nothing here judges the script: handson_lib.sites.jobscript_linter does, from what this returns.
"""

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from handson_lib.messages import tr
from handson_lib.sites.table import DEFAULT_SITE, get_site, parse_walltime, site_key


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


def strip_comment(text):
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
        for opt, value in _split_directive(strip_comment(line)):
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


