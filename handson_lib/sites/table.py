"""The one table of sites (machines): queues and limits, MPI rules, grading thresholds, and what
the generated job scripts need.

A site is always a machine: Reedbush-H (the course's site), Miyabi-G, ABCI 3.0, a hostfile cloud
cluster, and `local` (this machine, or the local Slurm cluster of `handson cluster`, whose queues
mirror Reedbush-H's). Its users:

- the job-script linter (`handson jobscript lint --site NAME`): queues, GPUs, group, MPI rules;
- the course's local Slurm cluster: the `local` site's queues become partitions;
- the generated job scripts under jobscripts/<site>/ (written by the course's build, handson_lib.sites.generate);
- the graders (`handson check --site`, the course's autograding, HANDSON_SITE): thresholds.

The numbers are the course's assumptions from the sites' public user guides (Reedbush-H retired in
2021; queue limits change every fiscal year and differ per contract): check `qstat -Q` or the
site's guide and edit this table, then regenerate the job scripts with the course's build.
"""

import re
from dataclasses import asdict, dataclass

from handson_lib.messages import tr

WALLTIME_RE = re.compile(r"^\d+(:\d+){0,2}(\.\d+)?$")


def parse_walltime(value):
    """PBS walltime `[[hours:]minutes:]seconds` in seconds; ValueError when malformed."""
    value = str(value).strip()
    if not WALLTIME_RE.match(value):
        raise ValueError(f"walltime {value!r} is not [[HH:]MM:]SS")
    numbers = [int(p) for p in value.split(".")[0].split(":")]
    if any(later >= 60 for later in numbers[1:]):
        raise ValueError(f"walltime {value!r}: minutes and seconds must be below 60")
    seconds = 0
    for n in numbers:
        seconds = seconds * 60 + n
    return seconds


def format_walltime(seconds):
    seconds = int(seconds)
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


@dataclass(frozen=True)
class LinkProfile:
    """A network link between nodes, as the local cluster shapes it (`handson cluster up --link`)."""
    name: str
    rate_bps: int | None        # bits per second, each direction; None: no network at all
    title: str

    @property
    def rate_text(self):
        if self.rate_bps is None:
            return "no network (loopback and shared memory)"
        if self.rate_bps >= 10 ** 9:
            return f"{self.rate_bps / 1e9:g} Gbit/s"
        return f"{self.rate_bps / 1e6:g} Mbit/s"

    @property
    def rate_bytes(self):
        return None if self.rate_bps is None else self.rate_bps / 8


LINKS = {
    "none": LinkProfile("none", None, "no network: every node on the host's loopback, ranks share "
                                      "memory across nodes (the cluster without --link)"),
    "1gbe": LinkProfile("1gbe", 10 ** 9, "1 Gigabit Ethernet"),
    "10gbe": LinkProfile("10gbe", 10 ** 10, "10 Gigabit Ethernet, seed 001's rented nodes"),
    "ib-edr": LinkProfile("ib-edr", 10 ** 11, "InfiniBand EDR 4x (100 Gbit/s per port), Reedbush-H's "
                                              "interconnect; above what a veth moves on this machine"),
}


def get_link(name) -> LinkProfile:
    """The link profile called `name`; ValueError, with the list of profiles, for any other."""
    key = str(name).strip().lower()
    if key not in LINKS:
        choices = ", ".join(f"{p.name} ({p.rate_text})" for p in LINKS.values())
        raise ValueError(f"unknown link profile {name!r}; choose one of: {choices}")
    return LINKS[key]


@dataclass(frozen=True)
class Queue:
    name: str
    max_nodes: int
    max_walltime: int           # seconds
    gpus: int                   # GPUs per node in this queue


@dataclass(frozen=True)
class Thresholds:
    """What the graders accept on a site. A laptop or CI machine is noisy, a reserved node is not."""
    min_accuracy: float
    min_scaling_ratio: float
    #: ((lowest ratio of the student's throughput to the reference's, share of the points), ...);
    #: the first band's ratio is the pass mark of the throughput and scaling checks.
    throughput_bands: tuple
    #: ((lowest speed-up of a 2-device / 2-rank run over the student's own 1-device / 1-rank run,
    #: share of the points), ...).
    speedup_bands: tuple

    @property
    def min_throughput_ratio(self):
        return self.throughput_bands[0][0]

    def as_dict(self):
        return {"min_throughput_ratio": self.min_throughput_ratio, **asdict(self)}


@dataclass(frozen=True)
class JobScripts:
    """What the generated job scripts under jobscripts/<site>/ ask for and how they start ranks."""
    queue: str                  # the queue of the two task scripts
    #: script kind -> (nodes, walltime); one process per GPU (Task #1: one process per node).
    #: Task #1 on one node, Task #2 across nodes, a profile within one node (two on a one-GPU
    #: site), a sweep over a debug allocation.
    requests: dict
    submit: str                 # "qsub", or "bash" where no scheduler runs (the #PBS lines still lint)
    launcher: str               # the MPI launch up to the program, for "$NP" ranks
    launcher_why: str           # a comment above it in the scripts
    ranks: str                  # how the scripts count ranks: "nodefile-or-np", "nodefile", "hostfile"
    env_sh: str                 # where env.sh lives, as shell words
    profiler_hint: str          # how to get the profiler on PATH
    env: dict                   # env.sh's site parts: about, home, modules, python, extra
    #: the queue of the measurement scripts (profile, sweep); "" means `queue`. Where it differs,
    #: the shipped measurement scripts do not repeat a task's answer lines (the student edition).
    measure_queue: str = ""


@dataclass(frozen=True)
class Site:
    key: str
    title: str
    scheduler: str
    gpus: int                   # GPUs per node: at most one MPI process per GPU (`mpiprocs`)
    gpu_model: str
    #: how a job names the group charged: "group_list" (`#PBS -W group_list=G`), "P" (`#PBS -P G`)
    #: or None (nothing to charge)
    group: str
    placeholder: str            # the sample group the shipped scripts carry
    #: options every multi-rank `mpiexec`/`mpirun` must carry: "export:VAR" (`-x VAR`, `-genv VAR`),
    #: "hostfile" (`-hostfile $PBS_NODEFILE`), "np" (`-np N`), "ppr" (`--map-by ppr:N:node`)
    mpi: tuple
    queue_required: bool
    profiler: str               # "nvprof" or "nsys"
    home: str                   # where HOME is in jobs
    queues: dict                # name -> Queue
    thresholds: Thresholds
    scripts: JobScripts = None  # None: no generated job scripts (the local site)
    #: whether a `select` chunk may ask for GPUs (`ngpus=G`); False: a chunk is a whole node (or
    #: the queue's share of one) and its GPUs come with it, so `ngpus` is a mistake (the course's
    #: assumption for the PBS Pro sites of the table, from their guides' job scripts)
    ngpus_resource: bool = False


def ranks_per_node(site, kind):
    """MPI processes per node of a job-script kind: one for Task #1 (MultiprocessParallelUpdater
    forks its own worker per GPU), one per GPU otherwise."""
    return 1 if kind == "multi_gpu" else site.gpus


def _queues(default_gpus, *rows):
    """Queue rows (name, max nodes, max walltime[, GPUs per node if not the site's])."""
    return {row[0]: Queue(row[0], row[1], parse_walltime(row[2]), row[3] if len(row) > 3 else default_gpus)
            for row in rows}


#: A laptop, CI or the local Slurm cluster: several processes share a few cores.
SHARED_CPU = Thresholds(min_accuracy=0.3, min_scaling_ratio=0.75,
                        throughput_bands=((0.7, 1.0), (0.4, 0.5)),
                        speedup_bands=((1.25, 1.0), (1.05, 0.5)))
#: A reserved GPU node: little noise; seed 002 measured 1.71x on 2 P100s.
RESERVED_GPU = Thresholds(min_accuracy=0.3, min_scaling_ratio=0.9,
                          throughput_bands=((0.85, 1.0), (0.6, 0.5)),
                          speedup_bands=((1.6, 1.0), (1.3, 0.5)))

REEDBUSH_QUEUES = _queues(2, ("h-debug", 4, "00:30:00"), ("h-short", 8, "02:00:00"),
                          ("h-small", 16, "24:00:00"), ("h-regular", 64, "48:00:00"))

#: Ranks fill a node before the next (seed 001: without it Open MPI may start one per node).
PPR_MAPPING = "--map-by ppr:${PPN}:node"

SITES = {
    "reedbush": Site(
        key="reedbush", title="Reedbush-H", scheduler="PBS Pro", gpus=2, gpu_model="P100",
        group="group_list", placeholder="gt00", mpi=("export:PYTHONUSERBASE",), queue_required=True,
        profiler="nvprof", home="Lustre (/lustre/$(id -ng)/$USER) is HOME on compute nodes",
        queues=REEDBUSH_QUEUES, thresholds=RESERVED_GPU,
        scripts=JobScripts(
            queue="h-debug",
            requests={"multi_gpu": (1, "00:10:00"), "multi_node": (2, "00:15:00"),
                      "profile": (1, "00:20:00"), "scaling": (4, "00:30:00")},
            measure_queue="h-short",    # a 4-node sweep of 1..8 ranks (seed 001), a profile
            submit="qsub", launcher='mpiexec -n "$NP"',
            launcher_why="# -x passes the variables to the ranks on the other node (seed 000's job.sh); "
                         "Reedbush's\n# Open MPI reads the nodes from PBS itself.",
            ranks="nodefile-or-np", env_sh="/lustre/$(id -ng)/${USER:-$(id -un)}/env.sh",
            profiler_hint="module load cuda9/..., see env.sh",
            env={
                "about": "# env.sh for Reedbush-H (seed 000): copy it to /lustre/$(id -ng)/$USER/env.sh "
                         "and source it on the\n# login node at every login (put `. /lustre/$(id -ng)/"
                         "$USER/env.sh` in ~/.bash_profile); the job\n# scripts in this folder source it "
                         "too (ENV_SH=... overrides where they look).\n#\n# Compute nodes do not see "
                         "/home: Lustre serves as HOME there, so everything the jobs need\n# (Python "
                         "packages, the course, the data) lives under /lustre/$(id -ng)/$USER.",
                "home": "export HOME=/lustre/$(id -ng)/${USER:-$(id -un)}\n\n# Python's user folder on "
                        "Lustre: the job scripts pass it to every rank (`mpiexec -x PYTHONUSERBASE`,\n# seed "
                        "000's job.sh). The course installs nothing there: its packages are in $COURSE/.venv."
                        "\nexport PYTHONUSERBASE=$HOME/.local",
                "modules": "# Modules (the course's assumption; check `module avail` on the login node):\n"
                           "# module load cuda9/9.1.85 openmpi/gdr/2.1.2/gnu",
                "python": "# (P100s on 2018's CUDA 9 need the CuPy of that time, e.g. cupy-cuda91, in place "
                          "of cupy-cuda12x.)",
                "extra": "",
            })),
    "miyabi": Site(
        key="miyabi", title="Miyabi-G", scheduler="PBS Pro", gpus=1, gpu_model="GH200",
        group="group_list", placeholder="xx00", mpi=(), queue_required=True,
        profiler="nsys", home="/work/$(id -ng)/$USER (no /home on compute nodes)",
        queues=_queues(1, ("debug-g", 8, "00:30:00"), ("regular-g", 256, "48:00:00")),
        thresholds=RESERVED_GPU,
        scripts=JobScripts(
            queue="debug-g",
            requests={"multi_gpu": (1, "00:10:00"), "multi_node": (4, "00:15:00"),
                      "profile": (2, "00:20:00"), "scaling": (8, "00:30:00")},
            submit="qsub", launcher=f'mpirun -n "$NP" --hostfile "$NODEFILE" {PPR_MAPPING}',
            launcher_why="# HPC-X's Open MPI reads the nodes from PBS; the node file and ppr say it "
                         "explicitly.",
            ranks="nodefile", env_sh="/work/$(id -ng)/${USER:-$(id -un)}/env.sh",
            profiler_hint="module load nvidia, see env.sh",
            env={
                "about": "# env.sh for Miyabi-G (GH200: one Grace CPU + one H100-class GPU per node): "
                         "copy it to\n# /work/$(id -ng)/$USER/env.sh and source it on the login node; "
                         "the job scripts in this folder\n# source it too (ENV_SH=... overrides where "
                         "they look).\n#\n# Compute nodes do not mount /home: the /work file system "
                         "serves as HOME in jobs, so the Python\n# packages, the course and the data all "
                         "live under /work/$(id -ng)/$USER.",
                "home": "export HOME=/work/$(id -ng)/${USER:-$(id -un)}\nexport PYTHONUSERBASE=$HOME/.local",
                "modules": "# Modules (the course's assumption; check `module avail`):\n# module purge\n"
                           "# module load nvidia nv-hpcx                   # NVIDIA HPC SDK + HPC-X "
                           "(Open MPI, CUDA-aware)",
                "python": "# The GH200 nodes are aarch64: build .venv where `uname -m` says aarch64 too "
                          "(the course\n# assumes the Miyabi-G login node does; unverified), or its wheels "
                          "do not run in the jobs.",
                "extra": "",
            })),
    "abci": Site(
        key="abci", title="ABCI 3.0", scheduler="PBS Pro", gpus=8, gpu_model="H200", group="P",
        placeholder="grpname", mpi=("hostfile", "np"), queue_required=True,
        profiler="nsys", home="HOME is shared with the compute nodes",
        queues=_queues(8, ("rt_HF", 32, "168:00:00"),        # full nodes, 8 GPUs each
                       ("rt_HG", 1, "168:00:00", 1)),        # one GPU of a shared node
        thresholds=RESERVED_GPU,
        scripts=JobScripts(
            queue="rt_HF",
            # The sweep on 4 nodes: on 2 its request would be Task #2's answer, which the student
            # edition does not hand out.
            requests={"multi_gpu": (1, "00:10:00"), "multi_node": (2, "00:15:00"),
                      "profile": (1, "00:20:00"), "scaling": (4, "01:00:00")},
            submit="qsub", launcher=f'mpirun -np "$NP" -hostfile "$NODEFILE" {PPR_MAPPING}',
            launcher_why="# ABCI: the node file and the rank count are given explicitly.",
            ranks="nodefile", env_sh="$HOME/env.sh",
            profiler_hint="module load cuda, see env.sh",
            env={
                "about": "# env.sh for ABCI 3.0 (8 x H200 per node, PBS Pro): copy it to $HOME/env.sh "
                         "and source it on the\n# login node; the job scripts in this folder source it "
                         "too (ENV_SH=... overrides where they look).\n#\n# HOME is on the shared file "
                         "system and visible from the compute nodes; keep the venv, the\n# course and the "
                         "data there (or in your group area).",
                "home": "source /etc/profile.d/modules.sh 2> /dev/null || true",
                "modules": "# Modules (the course's assumption; check `module avail`):\n"
                           "# module load cuda/12.6 cudnn nccl hpcx          # HPC-X: Open MPI with "
                           "CUDA support",
                "python": "",
                "extra": "",
            })),
    "cloud": Site(
        key="cloud", title="hostfile cloud cluster (seed 001)", scheduler="none, or OpenPBS", gpus=4,
        gpu_model="TITAN X (Pascal)", group=None, placeholder=None, mpi=("hostfile", "ppr"), ngpus_resource=True,
        queue_required=False, profiler="nsys", home="HOME shared over NFS",
        queues=_queues(4, ("workq", 4, "24:00:00")),         # OpenPBS's default queue, if one runs
        thresholds=RESERVED_GPU,
        scripts=JobScripts(
            queue="workq",
            requests={"multi_gpu": (1, "00:10:00"), "multi_node": (2, "00:15:00"),
                      "profile": (1, "00:20:00"), "scaling": (4, "01:00:00")},
            submit="bash", launcher=f'mpiexec -n "$NP" --hostfile "$HOSTFILE" {PPR_MAPPING}',
            launcher_why="# seed 001: --map-by ppr:4:node, or Open MPI may start one process per node "
                         "only.",
            ranks="hostfile", env_sh="$HOME/env.sh",
            profiler_hint="install Nsight Systems, see env.sh",
            env={
                "about": "# env.sh for a hostfile cloud cluster (seed 001: GPU servers on a private "
                         "network, 4 GPUs each,\n# no scheduler): put it in the HOME that every node "
                         "shares over NFS and source it on the head\n# node; the job scripts in this "
                         "folder source it too (ENV_SH=... overrides where they look).\n#\n# Every node "
                         "must reach the others with ssh without a password or a host-key question, and "
                         "see\n# the same HOME (NFS): mpiexec starts the remote ranks over ssh in the "
                         "same folder.",
                "home": "",
                "modules": "# Modules, if the image has them:\n# module load cuda",
                "python": "",
                "extra": "# The hostfile lists the nodes, with the number of processes each may take "
                         "(seed 001: without\n# slots= only one process started per node):\n"
                         "#   192.168.0.1 slots=4\n#   192.168.0.2 slots=4\n"
                         "export HOSTFILE=${HOSTFILE:-$HOME/hostfile}",
            })),
    # This machine, or `handson cluster`'s local Slurm cluster: Reedbush-H's queues and rules (the
    # cluster caps each queue's nodes by the nodes it has), the CPU stand-in's two workers per node.
    "local": Site(
        key="local", title="this machine (local Slurm cluster or `handson jobscript run`)",
        scheduler="Slurm with PBS commands, or none", gpus=2, gpu_model="CPU stand-in",
        group="group_list", placeholder="gt00", mpi=("export:PYTHONUSERBASE",), queue_required=True,
        profiler="nvprof", home="this machine's HOME", queues=REEDBUSH_QUEUES,
        thresholds=SHARED_CPU),
}

SITE_ALIASES = {"reedbush-h": "reedbush", "rb": "reedbush", "miyabi-g": "miyabi", "abci3": "abci",
                "abci-3": "abci", "abci-3.0": "abci", "abci3.0": "abci", "hostfile": "cloud",
                "sakura": "cloud", "localhost": "local"}
#: The site a job script is for unless it says otherwise: the course's.
DEFAULT_SITE = "reedbush"
#: The sites with the two tasks' job scripts as exercises (exercises/run_*.sh for the default site,
#: exercises/<site>/ for the others): the ones a student may choose with `# handson-site: NAME`, and
#: the only ones the grader grades a job script for (the hostfile cloud runs no scheduler; `local` is
#: this machine).
EXERCISE_SITES = ("reedbush", "miyabi", "abci")


def site_key(name):
    """The table's key for a site name or alias; ValueError naming the valid sites."""
    key = str(name).strip().lower()
    key = SITE_ALIASES.get(key, key)
    if key not in SITES:
        raise ValueError(tr("unknown site {name!r}: choose one of {sites}", name=name, sites=", ".join(SITES)))
    return key


def get_site(name=None):
    """A :class:`Site` by name or alias (default: Reedbush-H, the course's site)."""
    return SITES[site_key(name or DEFAULT_SITE)]


def script_sites():
    """The sites that get generated job scripts under jobscripts/<site>/."""
    return [site for site in SITES.values() if site.scripts is not None]


def where_tasks_run():
    """Per site with job scripts: what the course's two tasks get there (notebook 07's table).
    Task #1 needs two GPUs of one node (MultiprocessParallelUpdater); Task #2 is the shipped
    script's request, one rank per GPU."""
    rows = []
    for site in SITES.values():
        if site.scripts is None:
            continue
        nodes = site.scripts.requests["multi_node"][0]
        rows.append({
            "site": site.title, "gpus": f"{site.gpus} x {site.gpu_model}", "scheduler": site.scheduler,
            "task1_gpus": site.gpus if site.gpus >= 2 else 0,
            "task2_ranks": nodes * ranks_per_node(site, "multi_node"), "task2_nodes": nodes,
            "profiler": site.profiler, "submit": site.scripts.submit,
        })
    return rows


def _shown(words):
    """A site table's words (a title, a scheduler) in the reader's language: the sites' names
    stay; the few words around them are translated."""
    shown = {"hostfile cloud cluster (seed 001)": lambda: tr("hostfile cloud cluster (seed 001)"),
             "none, or OpenPBS": lambda: tr("none, or OpenPBS")}
    return shown[words]() if words in shown else words


def print_where_tasks_run(print_fn=print):
    for row in where_tasks_run():
        task1 = (tr("Task #1 on {gpus} GPUs of one node", gpus=row["task1_gpus"]) if row["task1_gpus"]
                 else tr("Task #1: one GPU per node, no second GPU to add"))
        print_fn(f"{_shown(row['site'])}: {row['gpus']}, {_shown(row['scheduler'])} ({row['submit']}), "
                 f"{row['profiler']}")
        print_fn(f"  {task1}")
        print_fn("  " + tr("Task #2 on {ranks} ranks of {nodes} nodes", ranks=row["task2_ranks"], nodes=row["task2_nodes"]))
