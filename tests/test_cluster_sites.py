"""The "At your site" steps of Miyabi-G and ABCI 3.0 followed on the local cluster with the site's
queues (`handson cluster up --site miyabi`), issue 40 item 4: the site's skeletons copied as step 4
says, completed, linted, submitted unchanged with qsub to the site's queue (`debug-g`, `rt_HF`),
each job finding its env.sh and the course's environment (steps 2 and 3) and printing what step 7
says to read.

Differences from the site, as the README's steps allow: the course's own .venv stands for the one
`make setup` builds in the course folder (COURSE points at this checkout), env.sh sits in a
temporary folder (ENV_SH, which the job scripts honour), no `module` line is uncommented (no module
command here), and the nodes are the cluster's CPU nodes.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from handson_lib.sites import cluster, generate, site_setup
from handson_lib.sites.table import get_site
from test_at_your_site import commands, sections

pytestmark = [pytest.mark.scheduler]

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
#: The sites whose steps are followed, and a real-looking group for each placeholder.
GROUPS = {"miyabi": ("group_list=xx00", "group_list=gc64"), "abci": ("-P grpname", "-P gab12345")}
def quick(ranks):
    """A short run's arguments: one epoch of at least 5 iterations of 32 images on each of `ranks`
    (ABCI 3.0's 8 GPUs a node make 256 images an iteration), so that the Throughput line is measured."""
    return f"--epoch 1 --train-size {max(400, 32 * ranks * 5)} --test-size 100"


def handson(*args, timeout=300):
    return subprocess.run([str(VENV_BIN / "handson"), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module", params=["miyabi", "abci"])
def site_cluster(request, cluster_turn):
    """The cluster with the site's queues, as many nodes as the site's Task #2 asks for."""
    if os.geteuid() != 0:
        pytest.fail("`handson cluster up` needs root; run the scheduler tests as root")
    site = get_site(request.param)
    result = handson("cluster", "up", "--site", site.key, "--nodes", site.scripts.requests["multi_node"][0])
    assert result.returncode == 0, f"cluster up failed:\n{result.stdout}\n{result.stderr}"
    yield site
    handson("cluster", "down")


@pytest.fixture(scope="module")
def course(site_cluster, tmp_path_factory):
    """A student's course folder after steps 1-5 of the site's section."""
    site = site_cluster
    text = sections("en")[0][site.title]
    lines = commands(text)
    folder = tmp_path_factory.mktemp(site.key) / site_setup.COURSE_FOLDER
    shutil.copytree(ROOT / "exercises", folder / "exercises", ignore=shutil.ignore_patterns("ja"))
    env_sh = folder.parent / "env.sh"                                           # step 2
    shutil.copy(ROOT / "jobscripts" / site.key / "env.sh", env_sh)
    subprocess.run(shlex.split(next(l for l in lines if l.startswith("cp exercises/"))),  # step 4
                   cwd=folder, check=True)
    answers = {"run_multi_gpu_training.sh": re.search(r"Task #1:\s+`([^`]+)`", text).group(1),
               "run_multi_node_training.sh": re.search(r"Task #2:\s+`([^`]+)`", text).group(1)}
    for name, request in answers.items():
        script = folder / "exercises" / name
        script.write_text(script.read_text()
                          .replace("# PUT YOUR CODE HERE\n", f"# PUT YOUR CODE HERE\n#PBS -q {site.scripts.queue}\n"
                                                             f"#PBS -l {request}\n")
                          .replace(*GROUPS[site.key]))
        lint = handson("jobscript", "lint", script)                             # step 5
        assert lint.returncode == 0 and f"checked for {site.title}: 0 error(s)" in lint.stdout, lint.stdout
    for name in ("train_cifar_multi_gpu.py", "train_cifar_multi_node.py"):    # the student's solved scripts
        shutil.copy(ROOT / "solutions" / name, folder / "exercises" / name)
    return folder, env_sh, site


def login_env(env_sh, ranks=1):
    """The student's login shell: no venv on PATH; env.sh where ENV_SH says, the course here."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PBS_", "OMPI_", "PRTE_"))}
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d and Path(d).resolve() != VENV_BIN.resolve())
    env.update(ENV_SH=str(env_sh), COURSE=str(ROOT), EXTRA_ARGS=quick(ranks))
    # env.sh sets HOME to Miyabi-G's /work/<group>/<user>: what the job caches goes here instead
    cache = Path(env_sh).parent / "cache"
    env.update(MPLCONFIGDIR=str(cache / "matplotlib"), XDG_CACHE_HOME=str(cache), XDG_CONFIG_HOME=str(cache))
    return env


@pytest.mark.parametrize("task", ["multi_gpu", "multi_node"])
def test_the_sites_steps_run_the_job_in_its_queue(course, task):
    folder, env_sh, site = course
    name, job = generate.SCRIPTS[task]
    nodes = site.scripts.requests[task][0]
    ranks = nodes * site.gpus if task == "multi_node" else None
    runs = 1 if task == "multi_node" or site.gpus == 1 else 2     # Task #1: one GPU, then all of the node's
    workdir = folder / "exercises"
    jobid = cluster.qsub(name, workdir, "-j", "oe", env=login_env(env_sh, ranks or site.gpus))    # step 6
    state = cluster.wait_job(jobid, timeout=240)
    output = workdir / f"{job}.o{jobid}"                                        # step 7
    assert output.exists(), sorted(p.name for p in workdir.iterdir())
    text = output.read_text(errors="replace")
    assert state == "COMPLETED", text
    assert "chainer 7.8.1" in text and "note: no" not in text, text            # env.sh and .venv found
    assert len(re.findall(r"^Throughput: [\d.]+ \[images/sec\.\]", text, re.M)) == runs, text
    if ranks:
        assert f"Num process (COMM_WORLD): {ranks}" in text, text
    info = cluster.job_info(jobid)
    assert info["Partition"] == site.scripts.queue and info["NumNodes"] == str(nodes), info
    import grp
    import pwd
    base = site_setup.base_folder(site)
    if base.startswith("/"):    # a site folder of its own (Miyabi-G's /work/<group>/<user>), not $HOME
        home = Path(base.replace("$(id -ng)", grp.getgrgid(os.getgid()).gr_name)
                    .replace("$USER", pwd.getpwuid(os.getuid()).pw_name))
        assert not home.exists(), f"the job wrote into {home} on this machine"
