"""`handson jobscript lint|run`: PBS job scripts checked against a site, or run here without one.

    handson jobscript lint run_multi_node_training.sh [--site reedbush] [--template]
    handson jobscript run  run_multi_node_training.sh            # no scheduler: run it here

`lint(text, site)` returns a list of :class:`Finding` (line number, error or warning, message,
the line itself). It refuses what qsub would accept but the job would get wrong, and what the
scheduler would refuse only after a wait in the queue:

- a placeholder left in (the course's `gt00`, the seed's `pz0xxx`, `xx00`, `<group>`,
  `YOUR_GROUP`, ABCI's `-P grpname`): an error before qsub that costs no point in the graded
  check (`placeholder_rule`, said the same way everywhere); with `template=True` (`--template`,
  for the site templates in jobscripts/ that are shipped with the placeholder) it is listed as a
  warning;
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

This module is the command; the parts are modules of their own: reading a script
(jobscript_parser), the rules (jobscript_linter) and the run without a scheduler (jobscript_local).
"""

import sys
from pathlib import Path

from handson_lib.messages import tr
from handson_lib.sites.jobscript_linter import (LINT_RULES, Finding, check_before_submit, errors, lint,
                                                lint_file, placeholder_reason, placeholder_rule)
from handson_lib.sites.jobscript_local import LocalJob, job_environment, local_nodefile_lines, run_main
from handson_lib.sites.jobscript_parser import (LARGEST_SCRIPT, JobRequest, header_end, parse_request,
                                                parse_select, read_script, site_for_path, site_for_script,
                                                too_large)
from handson_lib.sites.table import DEFAULT_SITE, SITES, get_site, parse_walltime

#: What the checks, the notebooks' helpers and the tests read from here: the command's face over
#: the parser, the linter and the local runner.
__all__ = ["LARGEST_SCRIPT", "LINT_RULES", "Finding", "JobRequest", "LocalJob", "check_before_submit", "errors",
           "get_site", "header_end", "job_environment", "lint", "lint_file", "lint_main", "local_nodefile_lines",
           "parse_request", "parse_select", "parse_walltime", "placeholder_reason", "placeholder_rule", "read_script",
           "run_main",
           "site_for_path", "site_for_script", "too_large", "add_lint_arguments", "add_run_arguments",
           "lint_command", "run_command"]


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
