"""`handson jobscript lint|run`: the shipped job scripts, planted mistakes, and local runs."""

import argparse
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from handson_lib.checking import checks
from handson_lib.sites import cluster, generate, jobscript, table
from handson_lib.sites.jobscript import lint

from conftest import ROOT

SOLUTION_GPU = ROOT / "solutions" / "run_multi_gpu_training.sh"
SOLUTION_NODE = ROOT / "solutions" / "run_multi_node_training.sh"
EXERCISES = sorted((ROOT / "exercises").glob("run_*.sh"))
SITE_SCRIPTS = sorted((ROOT / "jobscripts").glob("*/run_*.sh"))
ALL_SHELL = sorted((ROOT / "jobscripts").glob("*/*.sh"))
#: The sites with job scripts, and the sample group each one's scripts carry: from the site table.
SITES = tuple(site.key for site in table.script_sites())
PLACEHOLDER = {site.key: site.placeholder for site in table.script_sites()}
QUICK = "--epoch 1 --train-size 400 --test-size 100"


def line_of(path_or_text, needle):
    text = path_or_text.read_text() if isinstance(path_or_text, Path) else path_or_text
    numbers = [i + 1 for i, line in enumerate(text.splitlines()) if needle in line]
    assert numbers, f"{needle!r} not found"
    return numbers[0]


def codes(findings, severity="error"):
    return [(f.code, f.line) for f in findings if f.severity == severity]


def solution_text(path=SOLUTION_NODE, group="gz42"):
    return path.read_text().replace("group_list=gt00", f"group_list={group}")


def mutate(text, old, new):
    assert old in text, f"{old!r} is no longer in the script"
    return text.replace(old, new)


# ------------------------------------------------------------------------------ shipped scripts

@pytest.mark.parametrize("path", [SOLUTION_GPU, SOLUTION_NODE], ids=lambda p: p.name)
def test_solution_job_scripts_fail_only_on_the_group_placeholder(path):
    findings = lint(path.read_text(), "reedbush")
    group_line = line_of(path, "#PBS -W group_list=gt00")
    assert codes(findings) == [("placeholder", group_line)]
    assert codes(findings, "warning") == []
    assert "gt00" in findings[0].message and "id -ng" in findings[0].message
    assert findings[0].text == "#PBS -W group_list=gt00"
    # With the group filled in, nothing is left.
    assert lint(solution_text(path), "reedbush") == []


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.name)
def test_student_skeletons_are_refused_at_the_stub(path):
    findings = lint(path.read_text(), "reedbush")
    stub_line = line_of(path, "# PUT YOUR CODE HERE")
    assert codes(findings) == [("stub", stub_line),
                               ("placeholder", line_of(path, "group_list=gt00"))]
    stub = findings[0]
    assert "complete the #PBS lines" in stub.message
    assert "#PBS -q h-debug" in stub.message and "select=N:mpiprocs=M" in stub.message
    # Once the student fills the resource lines in, only the group is left to do.
    done = mutate(path.read_text(), "# PUT YOUR CODE HERE",
                  "#PBS -q h-debug\n#PBS -l select=1:mpiprocs=1")
    assert [c for c, _ in codes(lint(done, "reedbush"))] == ["placeholder"]
    # ... also with the marker left where the skeleton put it, the lines written under it (as the
    # Python skeletons are filled): a warning that the line may go, never an error.
    under = mutate(path.read_text(), "# PUT YOUR CODE HERE",
                   "# PUT YOUR CODE HERE\n#PBS -q h-debug\n#PBS -l select=1:mpiprocs=1")
    assert [c for c, _ in codes(lint(under, "reedbush"))] == ["placeholder"]
    assert [c for c, _ in codes(lint(under, "reedbush"), "warning")] == ["stub-left"]


def test_there_are_site_templates_for_every_site():
    names = {"run_multi_gpu_training.sh", "run_multi_node_training.sh", "run_profile.sh",
             "run_scaling_sweep.sh", "env.sh"}
    assert table.DEFAULT_SITE in SITES and len(SITES) > 1, SITES
    for site in SITES:
        assert {p.name for p in (ROOT / "jobscripts" / site).glob("*.sh")} == names, site
    readme = (ROOT / "jobscripts" / "README.md").read_text()
    for title in (table.get_site(site).title for site in SITES):
        assert title in readme


@pytest.mark.parametrize("path", SITE_SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_site_templates_pass_as_templates_and_fail_only_on_their_placeholder(path):
    site = path.parent.name
    assert jobscript.site_for_path(path) == site
    assert jobscript.site_for_script(path) == site
    text = path.read_text()
    as_template = lint(text, site, template=True)
    assert all(f.severity == "warning" and f.code == "placeholder" for f in as_template)
    findings = lint(text, site)
    if PLACEHOLDER[site] is None:
        assert findings == []
    else:
        assert [f.code for f in findings] == ["placeholder"]
        assert PLACEHOLDER[site] in findings[0].text
        option = "-P" if table.get_site(site).group == "P" else "-W group_list="
        assert findings[0].line == line_of(path, f"#PBS {option}")
        assert [f.severity for f in lint(text, site, template=True)] == ["warning"]


@pytest.mark.parametrize("path", ALL_SHELL + [SOLUTION_GPU, SOLUTION_NODE],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_shell_file_parses(path):
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_site_rules_matter():
    cloud = (ROOT / "jobscripts" / "cloud" / "run_multi_node_training.sh").read_text()
    on_reedbush = {f.code for f in errors_of(cloud, "reedbush")}
    assert {"queue-unknown", "mpiprocs", "group-missing"} <= on_reedbush
    abci = (ROOT / "jobscripts" / "abci" / "run_multi_node_training.sh").read_text()
    assert "mpiprocs" in {f.code for f in errors_of(abci, "miyabi")}


def errors_of(text, site):
    return [f for f in lint(text, site) if f.is_error]


# ------------------------------------------------------------------------------ planted mistakes

@pytest.mark.parametrize("old,new,code,needle", [
    ("select=2:mpiprocs=2:ompthreads=1", "select=2:mpiprocs=4:ompthreads=1", "mpiprocs", "select="),
    ("walltime=00:15:00", "walltime=01:00:00", "walltime-limit", "walltime="),
    ("#PBS -q h-debug", "#PBS -q h-debugg", "queue-unknown", "#PBS -q"),
    ("select=2:mpiprocs=2:ompthreads=1", "select=8:mpiprocs=2", "nodes-limit", "select="),
    ("select=2:mpiprocs=2:ompthreads=1", "select=two:mpiprocs=2", "select-malformed", "select="),
    ("walltime=00:15:00", "walltime=00:75:00", "walltime-malformed", "walltime="),
    ("walltime=00:15:00", "walltime=quarter", "walltime-malformed", "walltime="),
    ("select=2:mpiprocs=2:ompthreads=1", "nodes=2:ppn=2", "select-torque", "nodes="),
    # Reedbush-H gives whole nodes with their 2 GPUs: the node's GPUs are not asked for (issue 49)
    ("select=2:mpiprocs=2:ompthreads=1", "select=2:ngpus=2:mpiprocs=2:ompthreads=1", "ngpus", "select="),
    ("-x PYTHONUSERBASE ", "", "mpi-export", 'mpiexec -n "$NP"'),
    ("group_list=gz42", "group_list=pz0xxx", "placeholder", "group_list="),
    ("group_list=gz42", "group_list=<group>", "placeholder", "group_list="),
    ("group_list=gz42", "group_list=YOUR_GROUP", "placeholder", "group_list="),
    ("group_list=gz42", "group_list=xx00", "placeholder", "group_list="),
    ("group_list=gz42", "group_list=$GROUP", "variable", "group_list="),
    ("#PBS -W group_list", "#PBS \u2013W group_list", "dash", "group_list="),
    ('mpiexec -n "$NP"', 'mpiexec -n 8', "mpi-too-many", "mpiexec -n 8"),
])
def test_planted_mistake_is_refused_at_its_line(old, new, code, needle):
    text = mutate(solution_text(), old, new)
    findings = errors_of(text, "reedbush")
    want = line_of(text, needle)
    assert (code, want) in codes(findings), [str(f) for f in findings]
    hit = next(f for f in findings if f.code == code)
    assert hit.text == text.splitlines()[want - 1]
    assert f"line {want}:" in str(hit)


def test_ngpus_is_refused_where_a_chunk_is_a_node_and_checked_where_a_site_takes_it():
    """Issue 49: lint accepted `ngpus=2` on Reedbush-H, where a chunk is a whole node with its GPUs."""
    text = mutate(solution_text(), "select=2:mpiprocs=2:ompthreads=1", "select=2:ngpus=2:mpiprocs=2:ompthreads=1")
    [finding] = errors_of(text, "reedbush")
    assert finding.code == "ngpus" and "its 2 GPUs come with it; leave `ngpus` out" in finding.message
    cloud = (ROOT / "jobscripts" / "cloud" / "run_multi_node_training.sh").read_text()
    select = re.search(r"select=\S+", cloud).group(0)
    assert "ngpus" not in {f.code for f in errors_of(cloud.replace(select, select + ":ngpus=4"), "cloud")}
    assert "ngpus" in {f.code for f in errors_of(cloud.replace(select, select + ":ngpus=8"), "cloud")}


def test_messages_say_what_is_possible():
    text = mutate(solution_text(), "mpiprocs=2:", "mpiprocs=4:")
    [finding] = errors_of(text, "reedbush")
    assert "2 GPUs" in finding.message and "mpiprocs=4" in finding.message
    text = mutate(solution_text(), "walltime=00:15:00", "walltime=01:00:00")
    assert "00:30:00" in errors_of(text, "reedbush")[0].message
    text = mutate(solution_text(), "-q h-debug", "-q h_debug")
    assert "did you mean h-debug" in errors_of(text, "reedbush")[0].message


@pytest.mark.parametrize("drop,code", [
    ("#PBS -l walltime=00:15:00\n", "walltime-missing"),
    ("#PBS -q h-debug\n", "queue-missing"),
    ("#PBS -W group_list=gz42\n", "group-missing"),
])
def test_a_missing_directive_is_an_error_at_the_end_of_the_pbs_lines(drop, code):
    text = mutate(solution_text(), drop, "")
    findings = errors_of(text, "reedbush")
    assert [f.code for f in findings] == [code]
    assert findings[0].line == line_of(text, "#PBS -N multi_node")


def test_directives_after_the_first_command_are_refused():
    text = solution_text() + "#PBS -l walltime=00:20:00\n"
    findings = errors_of(text, "reedbush")
    assert codes(findings) == [("late-directive", len(text.splitlines()))]


def test_warnings_do_not_fail():
    text = mutate(solution_text(), 'cd "${PBS_O_WORKDIR:-$(dirname "$0")}"', "true")
    findings = lint(text, "reedbush")
    assert [(f.severity, f.code) for f in findings] == [("warning", "workdir")]
    text = mutate(solution_text(), "#PBS -N multi_node", "# PBS -N multi_node")
    assert [(f.severity, f.code) for f in lint(text, "reedbush")] == [("warning", "not-a-directive")]


def test_site_specific_rules():
    abci = (ROOT / "jobscripts" / "abci" / "run_multi_node_training.sh").read_text()
    abci = abci.replace("-P grpname", "-P gaa50042")
    assert lint(abci, "abci") == []
    no_hostfile = mutate(abci, '-hostfile "$NODEFILE" ', "")
    assert codes(errors_of(no_hostfile, "abci")) == [("mpi-hostfile", line_of(abci, "mpirun -np"))]
    no_np = mutate(abci, '-np "$NP" ', "")
    assert [f.code for f in errors_of(no_np, "abci")] == ["mpi-np"]
    wrong_group = mutate(abci, "#PBS -P gaa50042", "#PBS -W group_list=gaa50042")
    assert codes(errors_of(wrong_group, "abci")) == [("group-option", line_of(abci, "#PBS -P"))]
    too_many = mutate(abci, "select=2:mpiprocs=8", "select=2:mpiprocs=9")
    assert [f.code for f in errors_of(too_many, "abci")] == ["mpiprocs"]

    cloud = (ROOT / "jobscripts" / "cloud" / "run_multi_node_training.sh").read_text()
    no_ppr = mutate(cloud, "--map-by ppr:${PPN}:node ", "")
    assert [f.code for f in errors_of(no_ppr, "cloud")] == ["mpi-ppr"]
    five = mutate(cloud, "ppr:${PPN}:node", "ppr:5:node")
    assert [f.code for f in errors_of(five, "cloud")] == ["mpi-ppr"]
    no_hostfile = mutate(cloud, '--hostfile "$HOSTFILE" ', "")
    assert [f.code for f in errors_of(no_hostfile, "cloud")] == ["mpi-hostfile"]

    miyabi = (ROOT / "jobscripts" / "miyabi" / "run_multi_node_training.sh").read_text()
    miyabi = miyabi.replace("group_list=xx00", "group_list=gz42")
    assert lint(miyabi, "miyabi") == []
    two = mutate(miyabi, "select=4:mpiprocs=1", "select=2:mpiprocs=2")
    [finding] = errors_of(two, "miyabi")
    assert finding.code == "mpiprocs" and "1 GPU" in finding.message
    regular = mutate(miyabi, "-q debug-g", "-q regular-g")
    assert lint(regular, "miyabi") == []


#: Job scripts that once cost lint time quadratic in their size: blank lines (rule_workdir's
#: `^\s*` ran on over every blank line below each line start) and launcher names among a
#: launcher's options (each was scanned as a call of its own, to the line's end).
SLOW_SHAPES = {
    "100,000 blank lines": "#!/bin/bash\necho\n" + "\n" * 100_000,
    "blank lines to the cap": "#!/bin/bash\necho\n" + "\n" * (jobscript.LARGEST_SCRIPT - 20),
    "launcher names as options": "#!/bin/bash\nmpiexec " + "-x/mpiexec " * (jobscript.LARGEST_SCRIPT // 12),
    "a 1 MB script": "#!/bin/bash\necho\n" + "\n" * (1 << 20),
}


@pytest.mark.parametrize("shape", SLOW_SHAPES)
def test_lint_takes_time_linear_in_the_script(shape):
    """A bound in seconds: it guards against a quadratic blow-up (minutes), not a speed."""
    started = time.process_time()
    lint(SLOW_SHAPES[shape], "reedbush")
    assert time.process_time() - started < 5


def test_a_script_over_the_cap_is_one_error_and_no_rule_reads_it():
    text = solution_text() + "#" * jobscript.LARGEST_SCRIPT
    assert [(f.code, f.line) for f in lint(text, "reedbush")] == [("too-large", 1)]
    assert f"over {jobscript.LARGEST_SCRIPT >> 10} KiB" in lint(text, "reedbush")[0].message
    assert lint(solution_text() + "#" * (jobscript.LARGEST_SCRIPT - len(solution_text()) - 1),
                "reedbush", template=True) == lint(solution_text(), "reedbush", template=True)


def test_parsers():
    assert jobscript.parse_walltime("00:15:00") == 900
    assert jobscript.parse_walltime("1:00:00") == 3600
    assert jobscript.parse_walltime("30:00") == 1800
    assert jobscript.parse_walltime("45") == 45
    for bad in ("1:60:00", "ten", "", "1::0"):
        with pytest.raises(ValueError):
            jobscript.parse_walltime(bad)
    chunks = jobscript.parse_select("2:mpiprocs=2:ompthreads=1+1:mpiprocs=1")
    assert [(c.count, c.mpiprocs) for c in chunks] == [(2, 2), (1, 1)]
    req = jobscript.parse_request(solution_text())
    assert (req.queue, req.nodes, req.ranks, req.walltime, req.name, req.group) == \
        ("h-debug", 2, 4, 900, "multi_node", "gz42")
    assert jobscript.local_nodefile_lines(req) == ["localhost"] * 4
    assert jobscript.placeholder_reason("gz42") is None
    assert jobscript.placeholder_reason("gt00") and jobscript.placeholder_reason("grpname")


def test_site_choice(tmp_path):
    plain = tmp_path / "run.sh"
    plain.write_text(solution_text())
    assert jobscript.site_for_script(plain) == "reedbush"
    assert jobscript.site_for_script(plain, site="ABCI") == "abci"
    nested = tmp_path / "jobscripts" / "miyabi" / "run.sh"
    nested.parent.mkdir(parents=True)
    nested.write_text("#!/bin/bash\n")
    assert jobscript.site_for_path(nested) == "miyabi"
    with pytest.raises(ValueError, match="unknown site"):
        jobscript.get_site("fugaku")


def test_check_before_submit(tmp_path):
    script = tmp_path / "run_multi_node_training.sh"
    shutil.copy(SOLUTION_NODE, script)
    [error] = jobscript.check_before_submit(script)
    assert error.code == "placeholder"
    script.write_text(solution_text())
    assert jobscript.check_before_submit(script) == []


# ------------------------------------------------------------------------------ command line

def test_lint_command_line(run_handson, tmp_path):
    good = tmp_path / "good.sh"
    good.write_text(solution_text())
    result = run_handson("jobscript", "lint", SOLUTION_GPU, SOLUTION_NODE, good, timeout=60)
    assert result.returncode == 1
    lines = result.stdout.strip().splitlines()
    group_line = line_of(SOLUTION_GPU, "group_list=gt00")
    assert lines[0].startswith(f"{SOLUTION_GPU}:{group_line}: error: group `gt00` is a placeholder")
    assert len(lines) == 3 and "2 error(s), 0 warning(s)" in lines[-1]
    result = run_handson("jobscript", "lint", good, timeout=60)
    assert result.returncode == 0 and "ready to submit" in result.stdout
    result = run_handson("jobscript", "lint", "--site", "miyabi", good, timeout=60)
    assert result.returncode == 1 and "unknown queue `h-debug` on Miyabi-G" in result.stdout


def test_lint_skips_the_sourced_env_sh(capsys):
    """`handson jobscript lint jobscripts/reedbush/*.sh` checks the job scripts, not env.sh."""
    folder = ROOT / "jobscripts" / "reedbush"
    args = argparse.Namespace(file=[str(p) for p in sorted(folder.glob("*.sh"))], site=None, template=True)
    assert jobscript.lint_command(args) == 0
    out = capsys.readouterr().out
    assert f"{folder / 'env.sh'}: skipped: the site's environment" in out
    assert "env.sh:" not in out.replace(f"{folder / 'env.sh'}: skipped", "")
    assert "4 file(s) checked" in out


def test_lint_template_option(capsys):
    """`--template` (site templates): the placeholder is a warning, nothing else is allowed."""
    files = [str(p) for p in SITE_SCRIPTS]
    args = argparse.Namespace(file=files, site=None, template=True)
    assert jobscript.lint_command(args) == 0
    out = capsys.readouterr().out
    assert "0 error(s), 12 warning(s)" in out
    assert out.count(": warning: ") == 12 and ": error: " not in out
    args.template = False
    assert jobscript.lint_command(args) == 1
    flagged = [line for line in capsys.readouterr().out.splitlines() if ": error: " in line]
    assert len(flagged) == 4 * 3 and all("is a placeholder" in line for line in flagged)


# ------------------------------------------------------------------------------ jobscript run

def _job_folder(tmp_path, script, *tasks, group="gz42"):
    """A submit folder like a student's: the job script (group filled in) and the task scripts."""
    folder = tmp_path
    for task in tasks:
        shutil.copy(ROOT / "solutions" / task, folder / task)
    text = Path(script).read_text()
    for placeholder in ("gt00", "xx00", "grpname"):
        text = text.replace(f"group_list={placeholder}", f"group_list={group}")
        text = text.replace(f"-P {placeholder}", f"-P {group}")
    target = folder / Path(script).name
    target.write_text(text)
    return target


def _output_file(folder, name):
    files = sorted(folder.glob(f"{name}.o*"))
    assert len(files) == 1, files
    assert re.fullmatch(rf"{re.escape(name)}\.o\d+", files[0].name)
    return files[0]


QUICK_ENV = {"DATASET": "synthetic", "EXTRA_ARGS": QUICK}


def test_run_refuses_a_placeholder(run_handson, tmp_path):
    script = tmp_path / SOLUTION_NODE.name
    shutil.copy(SOLUTION_NODE, script)
    result = run_handson("jobscript", "run", script, timeout=60)
    assert result.returncode == 2
    assert "group `gt00` is a placeholder" in result.stdout and "refused" in result.stdout
    assert not list(tmp_path.glob("*.o*"))


def test_run_task1_job_script(run_handson, tmp_path):
    script = _job_folder(tmp_path, SOLUTION_GPU, "train_cifar_multi_gpu.py")
    result = run_handson("jobscript", "run", script, env=QUICK_ENV, timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "queue      h-debug" in result.stdout and "1 node x 1 mpiprocs" in result.stdout
    output = _output_file(tmp_path, "multi_gpu").read_text()
    assert len(re.findall(r"^Throughput: [\d.]+ \[images/sec\.\]", output, re.M)) == 2, output[-3000:]
    assert (tmp_path / "result" / "multi").is_dir()


def test_a_job_without_the_students_script_stops_and_never_runs_another_copy(run_handson, tmp_path):
    """Submitted from a folder without train_cifar_multi_gpu.py, even with COURSE pointing at a
    checkout that holds the solutions: the job says where to submit from and runs nothing."""
    script = _job_folder(tmp_path, SOLUTION_GPU)
    result = run_handson("jobscript", "run", script, env={**QUICK_ENV, "COURSE": str(ROOT)}, timeout=120)
    output = _output_file(tmp_path, "multi_gpu").read_text()
    assert "no train_cifar_multi_gpu.py in" in output and "submit from the folder that holds your" in output, output
    assert "Throughput:" not in output and result.returncode != 0


@pytest.mark.parametrize("path", sorted({*(ROOT / "jobscripts").rglob("*.sh"), *(ROOT / "solutions").glob("*.sh"),
                                         *(ROOT / "exercises").rglob("*.sh")}), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_job_script_names_the_solutions(path):
    assert "solutions" not in path.read_text(), path


@pytest.mark.slow
def test_run_task2_job_script_on_four_ranks(run_handson, tmp_path):
    script = _job_folder(tmp_path, SOLUTION_NODE, "train_cifar_multi_node.py")
    result = run_handson("jobscript", "run", script, env=QUICK_ENV, timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "4 rank(s)" in result.stdout
    output = _output_file(tmp_path, "multi_node").read_text()
    assert "Num process (COMM_WORLD): 4" in output
    assert re.search(r"^Throughput: [\d.]+ \[images/sec\.\]", output, re.M), output[-3000:]


def test_run_sets_the_pbs_environment(run_handson, tmp_path):
    script = tmp_path / "env_job.sh"
    script.write_text(
        "#!/bin/bash\n#PBS -q h-short\n#PBS -l select=2:mpiprocs=2:ompthreads=1\n"
        "#PBS -W group_list=gz42\n#PBS -l walltime=00:02:00\n#PBS -N envcheck\n"
        'cd "$PBS_O_WORKDIR"\n'
        'echo "WORKDIR=$PBS_O_WORKDIR JOBID=$PBS_JOBID NAME=$PBS_JOBNAME QUEUE=$PBS_QUEUE"\n'
        'echo "NODES=$(wc -l < "$PBS_NODEFILE") UNIQUE=$(sort -u "$PBS_NODEFILE")"\n'
        'echo "PYTHON=$(command -v python) OMP=$OMP_NUM_THREADS"\n'
        'mpiexec -n "$(wc -l < "$PBS_NODEFILE")" -x PYTHONUSERBASE python -c '
        '"from mpi4py import MPI; print(\'size\', MPI.COMM_WORLD.Get_size())"\n')
    result = run_handson("jobscript", "run", script, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    output = _output_file(tmp_path, "envcheck").read_text()
    jobid = re.search(r"JOBID=(\S+)", output).group(1)
    assert _output_file(tmp_path, "envcheck").name == f"envcheck.o{jobid.split('.')[0]}"
    assert f"WORKDIR={tmp_path} " in output and "NAME=envcheck QUEUE=h-short" in output
    assert "NODES=4 UNIQUE=localhost" in output
    assert f"PYTHON={Path(sys.executable).parent / 'python'}" in output
    assert "OMP=1" in output
    assert output.count("size 4") == 4        # 4 ranks on this 2-core machine: oversubscribed


def test_run_kills_a_job_past_its_walltime(run_handson, tmp_path):
    script = tmp_path / "sleeper.sh"
    script.write_text(
        "#!/bin/bash\n#PBS -q h-debug\n#PBS -l select=1:mpiprocs=1\n#PBS -W group_list=gz42\n"
        "#PBS -l walltime=00:00:03\n#PBS -N sleeper\n"
        'cd "$PBS_O_WORKDIR"\necho $$ > shell.pid\nsleep 60.5 &\necho $! > child.pid\n'
        "echo started\nwait\n")
    # (the job sleeps 60.5 s: past the 60 s given here unless its 3-s walltime killed it)
    result = run_handson("jobscript", "run", script, timeout=60)
    assert result.returncode == 124
    assert "walltime exceeded: killed" in result.stdout
    output = _output_file(tmp_path, "sleeper").read_text()
    assert "started" in output and "PBS: job killed: walltime" in output
    for name in ("shell.pid", "child.pid"):
        pid = int((tmp_path / name).read_text())
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    leftovers = [p for p in psutil.process_iter(["cmdline"])
                 if (p.info["cmdline"] or [])[-1:] == ["60.5"]]
    assert leftovers == []


@pytest.mark.slow
def test_run_scaling_sweep_collects_throughput(run_handson, tmp_path):
    source = ROOT / "jobscripts" / "reedbush" / "run_scaling_sweep.sh"
    script = _job_folder(tmp_path, source, "train_cifar_multi_node.py")
    script.write_text(mutate(script.read_text(), "select=4:mpiprocs=2", "select=1:mpiprocs=2"))
    result = run_handson("jobscript", "run", script, env=QUICK_ENV, timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    [tsv] = tmp_path.glob("result/scaling_*/throughput.tsv")
    rows = [line.split("\t") for line in tsv.read_text().strip().splitlines()]
    assert rows[0] == ["ranks", "images_per_sec", "images", "seconds"]
    assert [r[0] for r in rows[1:]] == ["1", "2"]
    assert all(float(r[1]) > 0 for r in rows[1:]), rows
    assert "speedup" in _output_file(tmp_path, "scaling").read_text()


@pytest.mark.parametrize("site,select", [("cloud", "select=2:mpiprocs=4"),
                                         ("abci", "select=2:mpiprocs=8")])
@pytest.mark.slow
def test_run_site_task2_templates(run_handson, tmp_path, site, select):
    source = ROOT / "jobscripts" / site / "run_multi_node_training.sh"
    script = _job_folder(tmp_path, source, "train_cifar_multi_node.py")
    # Fewer ranks than on the real nodes, to keep the test short on 2 cores.
    script.write_text(mutate(script.read_text(), select, "select=2:mpiprocs=2"))
    result = run_handson("jobscript", "run", script, env=QUICK_ENV, timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert f"({jobscript.get_site(site).title} rules)" in result.stdout
    output = _output_file(tmp_path, "multi_node").read_text()
    assert "Num process (COMM_WORLD): 4" in output
    assert re.search(r"^Throughput: [\d.]+ \[images/sec\.\]", output, re.M), output[-3000:]


# ------------------------------------------------------------------------------ one site table

def _body(text):
    """A job script from its first command on."""
    lines = text.splitlines()
    return lines[jobscript.header_end(lines):]


@pytest.mark.parametrize("name", ["run_multi_gpu_training.sh", "run_multi_node_training.sh"])
def test_exercise_job_scripts_share_the_reedbush_body(name):
    solution = (ROOT / "solutions" / name).read_text()
    site_copy = (ROOT / "jobscripts" / "reedbush" / name).read_text()
    assert _body(solution) == _body(site_copy)
    assert len(_body(solution)) > 20
    # The request the student writes is the one the site's script makes.
    assert jobscript.parse_request(solution).select == jobscript.parse_request(site_copy).select


def test_build_check_reports_a_hand_edited_job_script(tmp_path):
    assert generate.write(tmp_path)                       # a fresh tree gets every file
    assert generate.stale(tmp_path) == []
    assert generate.write(tmp_path) == []                 # and a second write changes nothing
    edited = tmp_path / "jobscripts" / "abci" / "run_multi_node_training.sh"
    edited.write_text(edited.read_text().replace("walltime=00:15:00", "walltime=00:20:00"))
    (tmp_path / "solutions" / "run_multi_gpu_training.sh").unlink()
    stale = dict(generate.stale(tmp_path))
    assert set(stale) == {Path("jobscripts/abci/run_multi_node_training.sh"),
                          Path("solutions/run_multi_gpu_training.sh")}
    assert "differs from the site table" in stale[Path("jobscripts/abci/run_multi_node_training.sh")]
    assert "missing" in stale[Path("solutions/run_multi_gpu_training.sh")]
    assert set(generate.write(tmp_path)) == set(stale)
    assert generate.stale(tmp_path) == []


def test_generated_files_are_all_the_site_folders_hold():
    generated = {rel for rel in generate.generated_files() if rel.parts[0] == "jobscripts"}
    on_disk = {p.relative_to(ROOT) for p in (ROOT / "jobscripts").rglob("*") if p.is_file()}
    assert generated == on_disk


def test_template_placeholders_are_all_filled():
    for rel, text in generate.generated_files().items():
        assert "{{" not in text and "#%" not in text, rel
    with pytest.raises(generate.TemplateError, match="no value for {{NOPE}}"):
        generate.fill("echo {{NOPE}}\n", {}, "x.sh")


def test_every_site_carries_grading_thresholds():
    keys = {"min_throughput_ratio", "min_accuracy", "min_scaling_ratio", "throughput_bands",
            "speedup_bands"}
    for name in table.SITES:
        limits = checks.site_thresholds(name)
        assert set(limits) == keys, name
        assert limits["min_throughput_ratio"] == limits["throughput_bands"][0][0]
    local = checks.site_thresholds("local")
    assert local["throughput_bands"] == ((0.7, 1.0), (0.4, 0.5)) and local["min_scaling_ratio"] == 0.75
    assert local["speedup_bands"] == ((1.25, 1.0), (1.05, 0.5))
    reedbush = checks.site_thresholds("reedbush")
    assert reedbush["throughput_bands"] == ((0.85, 1.0), (0.6, 0.5))
    assert reedbush["speedup_bands"] == ((1.6, 1.0), (1.3, 0.5)) and reedbush["min_scaling_ratio"] == 0.9
    with pytest.raises(ValueError, match=f"choose one of {', '.join(table.SITES)}"):
        checks.site_thresholds("fugaku")


def test_thresholds_default_to_handson_site(monkeypatch):
    monkeypatch.delenv("HANDSON_SITE", raising=False)
    assert checks.site_thresholds()["min_scaling_ratio"] == 0.75
    monkeypatch.setenv("HANDSON_SITE", "abci")
    assert checks.site_thresholds()["min_scaling_ratio"] == 0.9


def test_local_cluster_partitions_come_from_the_table(tmp_path):
    assert cluster.SITE.queues == table.get_site("reedbush").queues
    conf = cluster.render_slurm_conf(cluster.Paths(tmp_path), 3)
    partitions = dict(re.findall(r"^PartitionName=(\S+) .*MaxNodes=(\d+)", conf, re.M))
    # The site's queues, and the shared partition of the classroom's notebook servers.
    assert partitions == {"h-debug": "3", "h-short": "3", "h-small": "3", "h-regular": "3",
                          cluster.JUPYTER_PARTITION: "1"}
    assert f"PartitionName={cluster.JUPYTER_PARTITION} Nodes=n[1-3] Default=NO" in conf
    assert "OverSubscribe=FORCE" in conf
    assert "PartitionName=h-debug Nodes=n[1-3] Default=YES MaxTime=00:30:00" in conf
    assert "PartitionName=h-regular Nodes=n[1-3] Default=NO MaxTime=2-00:00:00" in conf
    big = dict((q.name, n) for q, n in cluster.partitions(8))
    assert big == {"h-debug": 4, "h-short": 8, "h-small": 8, "h-regular": 8}
    # The linter of the local site applies Reedbush-H's limits.
    assert jobscript.lint(solution_text(), "local") == []


def test_the_local_cluster_takes_a_sites_queues(tmp_path):
    """`handson cluster up --site miyabi`: the partitions are Miyabi-G's queues, so that a Miyabi-G
    job script is submitted unchanged; the written file tells which site the cluster stands for."""
    paths = cluster.Paths(tmp_path)
    paths.conf.write_text(cluster.render_slurm_conf(paths, 4, site=table.get_site("miyabi")))
    conf = paths.conf.read_text()
    assert "PartitionName=debug-g Nodes=n[1-4] Default=YES MaxTime=00:30:00" in conf
    assert "h-debug" not in conf
    assert cluster.configured_queues(paths) == ["debug-g", "regular-g"]
    assert cluster.configured_site(paths).key == "miyabi"
    paths.conf.write_text(cluster.render_slurm_conf(paths, 4))
    assert cluster.configured_site(paths).key == "local"


def test_where_the_tasks_run_follows_the_site_table():
    """Notebook 07's table: Task #1 needs two GPUs of one node (none on Miyabi-G, one GPU per
    node); Task #2 takes one rank per GPU on the shipped script's nodes."""
    rows = {row["site"]: row for row in table.where_tasks_run()}
    assert rows["Miyabi-G"]["task1_gpus"] == 0
    assert rows["ABCI 3.0"]["task1_gpus"] == 8 and rows["Reedbush-H"]["task1_gpus"] == 2
    for site in table.SITES.values():
        if site.scripts:
            nodes = site.scripts.requests["multi_node"][0]
            assert rows[site.title]["task2_ranks"] == nodes * site.gpus
    assert "this machine" not in " ".join(rows)   # the local site ships no job scripts
