"""`handson jobscript run FILE`: a job script run on this machine as PBS would run it (no scheduler).

Lint first (refuse on any error), then `bash FILE` with the environment a PBS job sees
(PBS_O_WORKDIR, PBS_JOBID, PBS_NODEFILE with select x mpiprocs lines, ...), the walltime as a
watchdog, and the output written to `<job name>.o<sequence>` like `qsub -j oe` does.
"""

import os
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from handson_lib import launch
from handson_lib.messages import tr
from handson_lib.sites.jobscript_linter import errors, lint_file
from handson_lib.sites.jobscript_parser import Chunk, JobRequest, parse_request
from handson_lib.sites.table import format_walltime, get_site


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
