"""`handson release student OUT/`: the edition of the course that is handed to students.

OUT/ holds notebooks/, exercises/ (built from solutions/ as `handson build` does), jobscripts/
(in the edition's language; a site's task scripts ship once, with a gap: in exercises/ where the
site has an exercise, else in jobscripts/<site>/),
the student part of handson_lib with its own pyproject.toml, requirements.txt, constraints.txt,
a Makefile with `make setup` and `make lab`, and a README for students (with one "At your site"
section per exercise site, from the site table). It holds
no solutions/, no solution line, no hidden test, no reference solution and no answer helper, and
no instructor command: the CLI leaves out commands whose module is not installed.

The modules that ship are declared in handson_lib.boundary only (the trust boundary: the same
files are all the grading sandbox shows of the library): the modules of the registry's student
commands (handson_lib.cli.COMMANDS, audience "student"; a package whole) and STUDENT_SUPPORT, what
student scripts, notebooks and those commands import. `verify_imports` fails the release when a
shipped file imports a handson_lib module that does not ship.
"""

import ast
import json
import re
import shutil
from pathlib import Path

from handson_lib import COURSE_ROOT, boundary
from handson_lib.boundary import SKIP, shipped_modules, student_library_files
from handson_lib.authoring import build, jobscript_translations, translations
from handson_lib.sites import generate
from handson_lib.sites.table import DEFAULT_SITE, EXERCISE_SITES, get_site

#: Course requirements the student edition does without (grading server, browser tests).
NOT_FOR_STUDENTS = ("nbgrader", "playwright", "pytest-xdist", "jupyterhub", "batchspawner")

#: One error for an edition that may not be: the boundary's own, and the release's.
ReleaseError = boundary.BoundaryError


# ----------------------------------------------------------------------------- the shipped modules

def _imported_names(tree):
    """(line, handson_lib module or `module:attribute`) for every import in a parsed file, and every
    string constant that names a handson_lib module (`python -m handson_lib.x`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "handson_lib":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] == "handson_lib":
            for alias in node.names:
                yield node.lineno, f"{node.module}:{alias.name}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and re.fullmatch(r"handson_lib(\.\w+)+", node.value):
            yield node.lineno, node.value


def _unresolved(imported, shipped, root):
    """Why `imported` does not resolve inside the shipped set, or None."""
    module, _, attribute = imported.partition(":")
    if attribute:
        submodule = f"{module}.{attribute}"
        if boundary.module_file(submodule, root) is not None:  # `from pkg import module`
            module = submodule
    if module in shipped or module in boundary.OPTIONAL_IMPORTS:
        return None
    if boundary.module_file(module, root) is None:
        return f"{module}, which does not exist"
    return f"{module}, which is not shipped"


def _python_sources(path):
    """The Python texts of a file: the file itself, or a notebook's code cells (magics removed)."""
    if path.suffix == ".py":
        return [path.read_text()]
    cells = json.loads(path.read_text())["cells"]
    return ["\n".join(line for line in "".join(c["source"]).splitlines() if not line.lstrip().startswith(("%", "!")))
            for c in cells if c["cell_type"] == "code"]


def verify_imports(files, shipped, root=COURSE_ROOT, shown_root=None):
    """Every handson_lib import in `files` (.py and .ipynb) resolves inside `shipped`; else raise
    ReleaseError naming each file, line and import."""
    problems = []
    for path in files:
        for text in _python_sources(path):
            try:
                tree = ast.parse(text)
            except SyntaxError as error:
                problems.append(f"{path.relative_to(shown_root or root)}: does not parse ({error.msg})")
                continue
            for line, imported in _imported_names(tree):
                why = _unresolved(imported, shipped, root)
                problem = f"{path.relative_to(shown_root or root)}:{line}: imports {why}"
                if why and problem not in problems:
                    problems.append(problem)
    if problems:
        raise ReleaseError("the student edition would not import:\n  " + "\n  ".join(problems))


# ----------------------------------------------------------------------------- writing the edition

def _copy_library(out, shipped, root=COURSE_ROOT):
    """The student library's files (boundary.student_library_files: what the sandbox mounts, too)."""
    written = []
    for rel in student_library_files(root, shipped):
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, dest)
        if rel.suffix == ".py":
            written.append(dest)
    return written


def _student_requirements(text):
    kept = [line for line in text.splitlines()
            if not any(re.match(rf"\s*(-\s*)?{name}\b", line) for name in NOT_FOR_STUDENTS)]
    return "\n".join(kept) + "\n"


#: The edition README's section that says which Pythons it takes (the course README's "Supported
#: stacks", which the edition does not have), by language.
EDITION_REQUIREMENTS = {"en": "What you need", "ja": "必要なもの"}


def _makefile(course_makefile, lang="en"):
    """`make setup` as the course's Makefile has it (same pins), and `make lab`; in another
    language, HANDSON_LANG set for both (messages, and JupyterLab's interface in that language)."""
    text = course_makefile.read_text()
    head = text[text.index("SHELL :="):text.index(".PHONY")]
    rule = re.search(r"^\$\(STAMP\):.*?^\ttouch \$@\n", text, re.M | re.S)
    if not rule:
        raise ReleaseError(f"{course_makefile}: no `$(STAMP):` set-up rule ending in `touch $@` to copy")
    wheel = re.search(r"^# A Chainer wheel for .*?^chainer-wheel:.*?\n\n", text, re.M | re.S)
    if not wheel:
        raise ReleaseError(f"{course_makefile}: no `chainer-wheel:` rule to copy (the job scripts' env.sh use it)")
    language = "" if lang == "en" else f"export HANDSON_LANG := {lang}\n"
    made = ("# The student edition's two commands: `make setup` (once) and `make lab`.\n" + language + head
            + ".PHONY: setup lab chainer-wheel\n\nsetup: $(STAMP)\n\n" + rule.group(0) + "\n" + wheel.group(0)
            + "lab: setup\n\t$(BIN)/handson lab\n")
    # The course README's section on Pythons is, in the edition's README, its section on what you need.
    return made.replace("Supported stacks", EDITION_REQUIREMENTS[lang])


PYPROJECT = """[build-system]
requires = ["setuptools>=61,<70"]
build-backend = "setuptools.build_meta"

[project]
name = "handson-lib-student"
version = "{version}"
description = "Student edition of the distributed deep-learning hands-on course (Chainer / ChainerMN)"
requires-python = ">=3.11,<3.14"

[project.scripts]
handson = "handson_lib.cli:main"

[tool.setuptools.packages.find]
include = ["handson_lib*"]

[tool.setuptools.package-data]
"handson_lib.profiling" = ["sample_profiles/*"]
"""

README = """# Distributed deep learning hands-on (student edition)

## What is here

- `notebooks/`: the course, one notebook per part (00 set-up ... 06 large batches, 07 the ending).
  Work through them in order; the cells marked `# PUT YOUR CODE HERE` are yours. The course map at
  the top of `00_setup` gives each notebook's time: a half-day session covers 00, 01, 02 and 07, a
  full day all of them; the optional parts are reading or homework.
- `exercises/`: the training scripts and job scripts you complete (`train_cifar_multi_gpu.py`,
  `train_cifar_multi_node.py`, `train_mnist_multi_node.py`, `run_multi_gpu_training.sh`,
  `run_multi_node_training.sh`). The job scripts are written for Reedbush-H;
  `exercises/miyabi/` and `exercises/abci/` hold the same two for Miyabi-G and ABCI 3.0 (*At your
  site* below).
- `jobscripts/<site>/`: each site's job scripts and `env.sh`: ready to submit for profiling and
  scaling sweeps. The task scripts of Reedbush-H, Miyabi-G and ABCI 3.0 are the ones in
  `exercises/` only; `jobscripts/cloud/` (a hostfile cloud cluster) has its own two, which leave
  their queue and resource lines to you, as `exercises/` does.
- `handson_lib/`: the course's library (the CPU stand-in of MultiprocessParallelUpdater, offline
  data, the self-check). You do not need to change it.

## What you need

- Linux (tested on Debian 12; on Windows, WSL 2) with `make` and Python **3.11, 3.12 or 3.13**
  (3.11: NumPy 1.23.5; 3.12 and 3.13: NumPy 2). `make setup` uses `python3.11` where there is one,
  else `python3`; to choose, run `make setup PYTHON=/path/to/python3.12`. Where `python3` is
  another version, install one of these beside it (your distribution's `python3.11` and
  `python3.11-venv`, conda, or `uv python install 3.12`) and run `make setup PYTHON=/path/to/python3.11`.
  `make setup` builds Chainer 7.8.1 with the course's patches for today's Python and NumPy.
- No GPU: every exercise runs on a CPU; where the real thing needs GPUs the course runs a CPU
  stand-in and says so on screen.
- On a machine with NVIDIA GPUs, add CuPy and NCCL after `make setup`:
  `.venv/bin/pip install 'cupy-cuda12x>=13.5,<14' nvidia-nccl-cu12` (CuPy 13 is the newest that
  works with Chainer 7.8.1), then `.venv/bin/handson doctor` says what it found.

## Two commands

    make setup    # once: .venv with Chainer 7.8.1 (patched), NumPy, Open MPI, JupyterLab
    make lab      # opens JupyterLab on this folder

On a GPU site, the same `make setup` builds the course's environment on the login node: see
*At your site* below.

## Check your work

    .venv/bin/handson check multi-gpu exercises/train_cifar_multi_gpu.py
    .venv/bin/handson check multi-node exercises/train_cifar_multi_node.py
    .venv/bin/handson check mnist-multi-node exercises/train_mnist_multi_node.py

Each check runs your script under the grader's launcher and says what is still wrong: the
processes, the data each one trained on, the parameters after training, the accuracy. Speed is
judged against your own runs: the speed-up of two devices (or two ranks) over one device (one rank)
of the same script, in the bands of the site (`--site`, default `local`). The notebooks' check
cells call the same code. The course's grader may also compare your throughput with its reference
solution on the grading machine.

## Submit job scripts

Lint a job script before submitting it, then submit it from the folder that holds your training
script (the job runs there):

    .venv/bin/handson jobscript lint exercises/run_multi_gpu_training.sh
    cd exercises && qsub -j oe run_multi_gpu_training.sh     # then: qstat -u $USER; cat *.o<jobid>

Replace the group placeholder (`-W group_list=...`) with your group first. Without a scheduler,
`handson jobscript run exercises/run_multi_gpu_training.sh` runs it here with the `#PBS` settings.

## At your site

To run the tasks at a GPU site, follow your site's numbered steps below once, from a fresh copy
of the course to a job that runs. You choose your site once: `exercises/run_*.sh` are written
for Reedbush-H, `exercises/miyabi/` and `exercises/abci/` hold Miyabi-G's and ABCI 3.0's, each
with a `# handson-site: NAME` line that `handson jobscript lint`, `handson check jobscript-*` and
the grader read (`--site NAME` overrides it for lint and the check). Queues, paths and module
names are the course's assumptions from its site table: check them against your site's guide.

**One install route, at every site**: the course's own `make setup` on the login node, into
`.venv` inside the course folder, then CuPy, NCCL and (where the site has its own MPI) mpi4py
into that `.venv`; `env.sh` activates it in every job. It works at every site because it needs
only the site's Python and compiler: the venv lives on the file system the jobs see and every
rank finds it through `env.sh`. `pip install --user` does not work inside a venv and mixes with
other courses' packages in one `~/.local`; a conda environment brings its own MPI and CUDA
libraries, which clash with the site's modules.

{{AT_YOUR_SITE}}

## Hand in

In the course's JupyterHub: Nbgrader > Assignment List, Fetch an assignment (its notebook and the
scripts it asks for arrive in a folder of your home), work there, and Submit. You may submit again:
the latest submission is graded. The grader runs your notebook and the scripts next to it, and your
instructor releases the feedback in the same list. Where the course runs without a hub, your
instructor says where to hand in the same files.

Where your class grades as you submit, the hub's page Services > grading (`/services/grading/`)
shows each of your submissions as it goes: submitted, queued (with your place), grading started,
graded, feedback released, each with its time; then your score per part and a link to the
feedback, which Fetch Feedback also brings to your Assignment List. Only your latest submission is
graded, one at a time: submitting again while one waits replaces it. Nobody else sees your page.
"""


README_JA = """# 分散深層学習ハンズオン（受講者版・日本語）

## 中身

- `notebooks/`: 講義ノートブック（00 セットアップから 06 ラージバッチ、07 まとめまで）。順に進めてください。`# PUT YOUR CODE HERE` のセルがあなたの書く部分です。用語集は `notebooks/README.md` にあります。`00_setup` の冒頭のコースの全体像に、各ノートブックの時間があります。半日のコースでは 00、01、02、07 を、1 日のコースではすべてを扱います。オプションの部分は読み物か宿題です。
- `exercises/`: 完成させる学習スクリプトとジョブスクリプト（`train_cifar_multi_gpu.py`、`train_cifar_multi_node.py`、`train_mnist_multi_node.py`、`run_multi_gpu_training.sh`、`run_multi_node_training.sh`）。ジョブスクリプトは Reedbush-H 用です。`exercises/miyabi/` と `exercises/abci/` に、Miyabi-G 用と ABCI 3.0 用の同じ 2 つがあります（下の「各サイトでの手順」）。
- `jobscripts/<site>/`: 各サイトのジョブスクリプトと `env.sh`。プロファイリングやスケーリングの測定にそのまま投入できます。Reedbush-H、Miyabi-G、ABCI 3.0 のタスクのスクリプトは `exercises/` にだけあります。`jobscripts/cloud/`（hostfile のクラウドクラスタ）には 2 つのタスクのスクリプトがあり、`exercises/` と同じく実行環境指定（キューと資源の行）をあなたが書く形になっています。
- `handson_lib/`: 講義のライブラリ（MultiprocessParallelUpdater の CPU 代替実装、オフラインのデータ、セルフチェック）。変更する必要はありません。

## 必要なもの

- `make` と Python **3.11、3.12、3.13** のどれかがある Linux（Debian 12 で確認しています。Windows では WSL 2）。3.11 では NumPy 1.23.5、3.12 と 3.13 では NumPy 2 を使います。`make setup` は `python3.11` があればそれを、なければ `python3` を使います。選ぶときは `make setup PYTHON=/path/to/python3.12` のように実行してください。`python3` が別のバージョンなら、これらのどれかを並べてインストールし（ディストリビューションの `python3.11` と `python3.11-venv`、conda、または `uv python install 3.12`）、`make setup PYTHON=/path/to/python3.11` を実行してください。`make setup` は、今の Python と NumPy で動くようにコースのパッチを当てた Chainer 7.8.1 をビルドします。
- GPU は不要です。どの演習も CPU で動きます。本来 GPU が必要な部分では、コースが CPU 代替実装で実行し、そのことを画面に表示します。
- 図の日本語を表示するための日本語フォント（Debian や Ubuntu では `sudo apt-get install fonts-noto-cjk`）。ないと図のラベルが空の四角になります。`handson doctor` が確認します。
- NVIDIA GPU のあるマシンでは、`make setup` の後に CuPy と NCCL を追加します: `.venv/bin/pip install 'cupy-cuda12x>=13.5,<14' nvidia-nccl-cu12`（Chainer 7.8.1 で動く最新の CuPy は 13 です）。その後 `.venv/bin/handson doctor` が、見つかったものを表示します。

## 2 つのコマンド

    make setup    # 最初に一度: Chainer 7.8.1（パッチ済み）、NumPy、Open MPI、JupyterLab の .venv
    make lab      # このフォルダーで JupyterLab を開きます（画面もメッセージも日本語）

GPU のあるサイトでも、ログインノードで同じ `make setup` がコースの環境を作ります。下の「各サイトでの手順」を見てください。

## 作業を確認する

    HANDSON_LANG=ja .venv/bin/handson check multi-gpu exercises/train_cifar_multi_gpu.py
    HANDSON_LANG=ja .venv/bin/handson check multi-node exercises/train_cifar_multi_node.py
    HANDSON_LANG=ja .venv/bin/handson check mnist-multi-node exercises/train_mnist_multi_node.py

それぞれ、採点用ランチャーのもとであなたのスクリプトを実行し、まだ直すべき点を答えます（プロセス、各プロセスが学習したデータ、学習後のパラメータ、精度）。速度は、あなた自身の実行と比べて判定します: 同じスクリプトの 1 デバイス（1 ランク）に対する 2 デバイス（2 ランク）の速度向上を、サイトの基準（`--site`、既定は `local`）で判定します。ノートブックのチェックのセルも同じコードを呼びます。コースの採点では、採点用のマシンで、あなたのスループットを模範解答のスループットと比べることもあります。

## ジョブスクリプトを投入する

投入の前にジョブスクリプトを検査し、学習スクリプトのあるフォルダーから投入します（ジョブはそこで実行されます）:

    HANDSON_LANG=ja .venv/bin/handson jobscript lint exercises/run_multi_gpu_training.sh
    cd exercises && qsub -j oe run_multi_gpu_training.sh     # その後: qstat -u $USER; cat *.o<jobid>

グループのプレースホルダー（`-W group_list=...`）は先に自分のグループに書き換えてください。スケジューラのない環境では `handson jobscript run exercises/run_multi_gpu_training.sh` が `#PBS` の設定でここで実行します。

## 各サイトでの手順

GPU のあるサイトでタスクを実行するには、下にあるあなたのサイトの番号付きの手順に、一度だけ従ってください。
コースのコピーから、ジョブが動くところまでを扱います。サイトの選択は一度だけです: `exercises/run_*.sh` は
Reedbush-H 用で、`exercises/miyabi/` と `exercises/abci/` に Miyabi-G 用と ABCI 3.0 用があります。どれにも
`# handson-site: NAME` の行があり、`handson jobscript lint`、`handson check jobscript-*`、採点がこの行を読みます
（lint とチェックでは `--site NAME` がこの行より優先されます）。キュー、パス、モジュール名は、コースのサイト表に
あるコースの想定です。サイトの利用案内で確かめてください。

**インストールの手順は、どのサイトでも 1 つです**: ログインノードでコースの `make setup` を実行してコースのフォルダーの
中に `.venv` を作り、その `.venv` に CuPy、NCCL、（サイトに独自の MPI があれば）mpi4py を加えます。`env.sh` がジョブ
ごとにこの環境を有効にします。サイトの Python とコンパイラだけで済むので、どのサイトでも使えます。venv はジョブから
見えるファイルシステム上にあり、すべてのランクが `env.sh` を通して見つけられます。`pip install --user` は venv の中
では使えず、ほかのコースのパッケージと 1 つの `~/.local` で混ざります。conda の環境は独自の MPI と CUDA のライブラリを
持ち込み、サイトのモジュールとぶつかります。

{{AT_YOUR_SITE}}

## 提出

コースの JupyterHub で、Nbgrader > Assignment List から課題を取得（Fetch）します。ノートブックと、その課題で求められるスクリプトが、ホームのフォルダーに届きます。そこで作業し、提出（Submit）してください。何度でも提出でき、採点されるのは最後の提出です。採点ではノートブックと、その隣のスクリプトを実行します。フィードバックは講師が同じ一覧に返却します。JupyterHub を使わないコースでは、同じファイルをどこに提出するかを講師が伝えます。

提出するとすぐに採点するクラスでは、JupyterHub の Services > grading（`/services/grading/`）のページに、あなたの提出ごとの経過が表示されます: 提出、キューで待機中（何番目か）、採点開始、採点済み、フィードバック返却済み、それぞれの時刻です。そのあと、部分ごとの得点とフィードバックへのリンクが表示されます。フィードバックは Assignment List の Fetch Feedback でも取得できます。採点されるのは最後の提出だけで、1 つずつ採点します: 待機中にもう一度提出すると、新しい提出に置き換わります。あなたのページは、ほかの人には見えません。
"""

#: The README of each language's edition.
READMES = {"en": README, "ja": README_JA}
#: Where a README takes the sites' sections (generated from the site table).
AT_YOUR_SITE_SLOT = "{{AT_YOUR_SITE}}"


def student_readme(lang="en"):
    """The edition's README in `lang`, with one numbered "At your site" section per exercise site."""
    return READMES[lang].replace(AT_YOUR_SITE_SLOT, generate.at_your_site(lang))


def _keep_language(out, lang):
    """notebooks/ and exercises/ of one language: `lang`'s copies (built into notebooks/<lang>/ and
    exercises/<lang>/) take the English ones' place; other languages' folders go."""
    for top in ("notebooks", "exercises"):
        folder = out / top
        for other in translations.LANGUAGES:
            if other != lang:
                shutil.rmtree(folder / other, ignore_errors=True)
        if lang == "en":
            continue
        translated = folder / lang
        for item in list(folder.iterdir()):
            if item != translated:
                shutil.rmtree(item) if item.is_dir() else item.unlink()
        for item in list(translated.iterdir()):
            item.rename(folder / item.name)
        translated.rmdir()


def _leaks(path, shown, secrets):
    """Markers and solution / hidden-test lines in one file."""
    found = []
    for text in build.texts_of(path):
        for line in text.split("\n"):
            marker = next((m for m in build.MARKERS if m in line), None)
            if marker:
                found.append(f"{shown}: marker {marker!r}")
            if build.significant(line) in secrets:
                found.append(f"{shown}: solution line {line.strip()!r}")
    return found


def student_task_script(site, kind, lang="en", root=COURSE_ROOT):
    """A site's task job script with its queue and resource lines left for the student to write
    (they are the exercise's answer at every site), as the exercise asks for them; in `lang`, its
    comments translated (jobscript_translations.translated_jobscript), its shell lines as they are."""
    text = generate.site_script(site, kind)
    answer = "\n".join(generate.resource_directives(site, kind))
    assert answer in text, f"{site.key}/{generate.SCRIPTS[kind][0]}: no resource lines to leave out"
    if lang == "en":
        gap = [f"# {generate.resource_request(site, kind)}"]
    else:
        text = jobscript_translations.translated_jobscript(text, lang, root)
        gap = jobscript_translations.jobscript_comment(jobscript_translations.gap_comment(site, kind), lang, root)
    return text.replace(answer, "\n".join([*gap, build.STUB]))


#: What the edition's jobscripts/README.md adds before its table of files, in each language: the
#: task scripts of a site with an exercise copy ship once, in exercises/ (issue 40, item 6).
TASK_SCRIPTS_NOTE = {
    "en": {"note": "**In this edition** the task scripts (`run_multi_gpu_training.sh`, `run_multi_node_training.sh`) "
                   "of a site with an exercise are in `exercises/` only, the one copy you complete: {exercises}. "
                   "That site's folder here holds its other scripts and `env.sh`.{kept}",
           "exercise": "`{path}` ({title})", "sep": ", ",
           "kept": " `{key}/` keeps its two, with their queue and resource lines left to you."},
    "ja": {"note": "**この受講者版では**、演習のあるサイトのタスクのスクリプト（`run_multi_gpu_training.sh`、"
                   "`run_multi_node_training.sh`）は `exercises/` にだけあります。あなたが完成させる 1 つのコピーです: "
                   "{exercises}。ここにあるそのサイトのフォルダーには、ほかのスクリプトと `env.sh` があります。{kept}",
           "exercise": "`{path}`（{title}）", "sep": "、",
           "kept": "`{key}/` には 2 つのタスクのスクリプトがあり、キューと資源の行をあなたが書く形になっています。"},
}


def task_scripts_note(lang="en"):
    """The paragraph that says where the edition's task scripts are (TASK_SCRIPTS_NOTE)."""
    words = TASK_SCRIPTS_NOTE[lang]
    exercises = words["sep"].join(
        words["exercise"].format(path="exercises/run_*.sh" if key == DEFAULT_SITE else f"exercises/{key}/run_*.sh",
                                 title=get_site(key).title) for key in EXERCISE_SITES)
    kept = "".join(words["kept"].format(key=site.key) for site in generate.script_sites()
                   if site.key not in EXERCISE_SITES)
    return words["note"].format(exercises=exercises, kept=kept)


def student_jobscripts_readme(text, lang="en", root=COURSE_ROOT):
    """jobscripts/README.md as the edition has it: in `lang`, with the task-scripts note before its
    first table."""
    if lang != "en":
        text = jobscript_translations.translated_jobscripts_readme(text, lang, root)
    lines = text.split("\n")
    first_table = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    if first_table is None:
        raise ReleaseError("jobscripts/README.md: no table of files to put the task-scripts note before")
    return "\n".join([*lines[:first_table], task_scripts_note(lang), "", *lines[first_table:]])


def _student_jobscripts(root, lang="en"):
    """{relative path: text} of jobscripts/ as students get it (jobscript_translations.edition_jobscripts):
    the task scripts of a site without an exercise copy with a gap, in `lang`."""
    files = {}
    for rel, (site, kind) in jobscript_translations.edition_jobscripts(root).items():
        if kind:
            files[rel] = student_task_script(site, kind, lang, root)
        elif rel == Path("jobscripts") / "README.md":
            files[rel] = student_jobscripts_readme((root / rel).read_text(), lang, root)
        elif lang != "en" and rel.suffix == ".sh":
            files[rel] = jobscript_translations.translated_jobscript((root / rel).read_text(), lang, root)
        else:
            files[rel] = (root / rel).read_text()
    return files


def _copy_jobscripts(out, root, secrets, lang="en"):
    """jobscripts/ as students get it, less any file that would still hand out an exercise's
    answer (a solution line). Returns the withheld files and why."""
    withheld = {}
    for rel, text in _student_jobscripts(root, lang).items():
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        leaks = _leaks(target, rel, secrets)
        if leaks:
            target.unlink()
            withheld[rel] = leaks[0].split(": ", 1)[1]
        elif target.name.startswith("run_"):
            target.chmod(0o755)
    return withheld


def release_student(out, root=COURSE_ROOT, lang="en"):
    """Write the student edition into `out` (a new or empty folder), in `lang` (en, or one of
    translations.LANGUAGES: its notebooks, scripts' comments, README, messages and JupyterLab's
    interface). Returns the shipped modules and the job scripts withheld because they repeat an
    exercise's answer."""
    out = Path(out)
    if lang not in READMES:
        raise ReleaseError(f"no {lang!r} edition: the course is written in {', '.join(READMES)}")
    if out.exists() and any(out.iterdir()):
        raise ReleaseError(f"{out} is not empty: give a new folder (the edition is written whole)")
    shipped, _ = shipped_modules(root)
    out.mkdir(parents=True, exist_ok=True)
    library = _copy_library(out, shipped, root)
    build.build_into(out, root)
    _keep_language(out, lang)
    withheld = _copy_jobscripts(out, root, build.secret_lines(root), lang)
    # One install route (`make setup`, README "At your site"): no environment.yml for conda beside it.
    (out / "requirements.txt").write_text(_student_requirements((root / "requirements.txt").read_text()))
    shutil.copy2(root / "constraints.txt", out / "constraints.txt")
    (out / "Makefile").write_text(_makefile(root / "Makefile", lang))
    (out / "pyproject.toml").write_text(PYPROJECT.format(version=_version(root)))
    (out / "README.md").write_text(student_readme(lang))
    (out / ".gitignore").write_text(".venv/\nresult/\ndata/\n__pycache__/\n.ipynb_checkpoints/\n")
    student_files = [*library, *sorted((out / "exercises").rglob("*.py")), *sorted((out / "notebooks").glob("*.ipynb"))]
    verify_imports(student_files, shipped, root, shown_root=out)
    verify_no_secrets(out, root)
    return shipped, withheld


def _version(root):
    return re.search(r'^version = "([^"]+)"', (root / "pyproject.toml").read_text(), re.M).group(1)


def verify_no_secrets(out, root=COURSE_ROOT):
    """No solutions/ folder, marker, solution or hidden-test line anywhere in the edition."""
    problems = [f"{p.relative_to(out)}: a solutions folder" for p in out.rglob("solutions") if p.is_dir()]
    secrets = build.secret_lines(root)
    for path in sorted(out.rglob("*")):
        if path.is_file() and not SKIP & set(path.relative_to(out).parts):
            problems += _leaks(path, path.relative_to(out), secrets)
    if problems:
        raise ReleaseError("the student edition leaks:\n  " + "\n  ".join(problems))
