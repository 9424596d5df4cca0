"""Synthetic classes: submissions whose scores are known in advance.

An instructor grades one before the course to see the whole pipeline work on the site
(`handson course synthetic-class task2`, then `handson autograde task2`); the tests grade the
same classes and assert every score. Each kind of bad submission the grader must survive is here.
"""

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from handson_lib import COURSE_ROOT


@dataclass
class Submission:
    expected: float                 # total score expected from the autograder
    answers: dict = field(default_factory=dict)   # grade_id -> source of that solution cell
    scripts: dict = field(default_factory=dict)   # file -> "solution", None (not handed in) or a Mistake
    edit: object = None             # a function changing the notebook JSON (tampering)
    status: str = "graded"          # how the status column starts
    why: str = ""
    extra: dict = field(default_factory=dict)     # file -> text: files handed in beside the assignment's


def cell(nb, grade_id):
    return next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)


def _tamper(grade_id):
    def edit(nb):
        cell(nb, grade_id)["source"] = "pass  # always passes\n"
    return edit


def _delete(grade_id):
    def edit(nb):
        nb["cells"].remove(cell(nb, grade_id))
    return edit


SETUP_ANSWERS = {
    "q1_total_batch": "def total_batch_size(batch_per_worker, n_workers):\n    return batch_per_worker * n_workers\n",
    "q2_parallelism": 'needed_parallelism = "model"\n',
    "q3_lr": "n_gpus = 2\nlr_set_by_script = 0.05\n",
}
_WRONG_Q1 = "def total_batch_size(b, n):\n    return b\n"
#: The line the throughput grade cell prints for the report, printed by a student's cell, with
#: values that are no numbers: read from grade cells only, and never a crash of the report.
_FORGED_RATIO = "print('handson-throughput-ratios: throughput=abc scaling=inf')\n"
#: A process in a session of its own (it leaves the kernel's process tree), which would run on
#: after grading; DAEMON_MARK in its command line tells it.
DAEMON_MARK = "left-running-by-a-synthetic-submission"
_DAEMON = ("import subprocess, sys\n"
           f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)  # {DAEMON_MARK}'], "
           "start_new_session=True)\n")
#: Kernel-level tampering: an IPython input transformer that empties every cell holding an assert
#: (the grade cells, were they run in the kernel).
_BLANK_ASSERTS = ("def _blank_asserts(lines):\n"
                  "    return ['pass\\n'] if any('assert' in line for line in lines) else lines\n"
                  "get_ipython().input_transformers_post.append(_blank_asserts)\n")
#: An answer that equals everything: no data, so it never crosses to the grader as a number.
_ALWAYS_EQUAL = ("class _AlwaysEqual(int):\n    def __eq__(self, other):\n        return True\n"
                 "    __hash__ = int.__hash__\n\n\n"
                 "def total_batch_size(b, n):\n    return _AlwaysEqual(0)\n")
#: A function that keeps what it is called with, and a later answer cell that prints it: were the
#: hidden tests' calls made in the kernel, their arguments would be in the graded notebook.
_STASHING_Q1 = "_seen = []\n\n\ndef total_batch_size(b, n):\n    _seen.append((b, n))\n    return b * n\n"
_PRINTS_THE_STASH = 'needed_parallelism = "model"\nprint("stash:", _seen)\n'
#: The checks monkeypatched in the kernel, to pass whatever the scripts do.
_PATCHED_CHECKS = """from handson_lib.checking import checks as _checks


class _Passing:
    checks, failed, speed_checks = [], [], []

    def text(self):
        return "all checks passed"


_checks.check_multi_gpu = _checks.check_jobscript = lambda *a, **k: _Passing()
_checks.throughput_credit = lambda *a, **k: k.get("points", 1)
"""
#: Pointing the checks at other scripts: the reference scripts (readable in the sandbox) copied
#: into a folder of the kernel's, its working directory and HANDSON_GRADING set to it.
_CHDIR = """import os, shutil, tempfile
from handson_lib import COURSE_ROOT
_elsewhere = tempfile.mkdtemp()
for _name in ("train_cifar_multi_gpu.py", "run_multi_gpu_training.sh"):
    shutil.copy(os.path.join(COURSE_ROOT, "solutions", _name), _elsewhere)
os.chdir(_elsewhere)
os.environ["HANDSON_GRADING"] = _elsewhere
"""


def _forge_reports(nb):
    """The report cells replaced by passing reports, their nbgrader metadata removed (so that
    nbgrader does not restore them)."""
    for grade_id in ("task1_job_report", "task1_report"):
        forged = cell(nb, grade_id)
        del forged["metadata"]["nbgrader"]
        forged["source"] = _PATCHED_CHECKS + f"{grade_id.replace('task1_', '')} = _Passing()\n"


def solution_source(notebook, grade_id):
    """The instructor's answer of a solution cell, without its markers (what a correct student writes)."""
    nb = json.loads((COURSE_ROOT / "solutions" / notebook).read_text())
    lines = "".join(cell(nb, grade_id)["source"]).splitlines()
    return "\n".join(line for line in lines if "### BEGIN SOLUTION" not in line
                     and "### END SOLUTION" not in line) + "\n"


def solution_answers(notebook):
    """grade_id -> the instructor's answer of every solution cell of `notebook` (a correct student)."""
    nb = json.loads((COURSE_ROOT / "solutions" / notebook).read_text())
    return {c["metadata"]["nbgrader"]["grade_id"]: solution_source(notebook, c["metadata"]["nbgrader"]["grade_id"])
            for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution")}


@dataclass(frozen=True)
class Mistake:
    """One mistake planted in a reference script: `old` replaced by `new`. The check-level tests
    (tests/test_task1_multi_gpu.py, tests/test_task2_multi_node.py) and the synthetic classes
    plant it from here, so that both judge the same edit."""
    script: str            # the solution script it is planted in
    old: str
    new: str
    fails: frozenset       # the correctness checks it fails (a run that ends)
    says: str              # words of the first failed check's message
    beside: tuple = ()     # (file, text) handed in beside the script (not files of the assignment)
    more: tuple = ()       # further (old, new) edits of the same script

    def apply(self, text):
        for old, new in ((self.old, self.new), *self.more):
            if old not in text:
                raise ValueError(f"the planted mistake no longer applies to {self.script}: {old!r}")
            text = text.replace(old, new)
        return text

    def plant(self, solution, folder):
        """The script with this mistake, as `solution`'s name in `folder`, and its files beside it."""
        path = Path(folder) / Path(solution).name
        path.write_text(self.apply(Path(solution).read_text()))
        for name, text in self.beside:
            (Path(folder) / name).write_text(text)
        return path


_RUN = "    trainer.run()\n"
_SCATTER = ("    train = chainermn.scatter_dataset(train, comm, shuffle=True)\n"
            "    test = chainermn.scatter_dataset(test, comm, shuffle=True)\n")
_TRAINER = '    trainer = training.Trainer(updater, (args.epoch, "epoch"), out=args.out)\n'
#: Five iterations instead of the epochs, and the observer's record rewritten at exit with the
#: accuracy of a trained model: the grader evaluates the parameters itself.
_FORGED_RECORDS = """    import atexit, json, os

    def forge():
        path = os.path.join(os.environ.get("HANDSON_OBSERVE_DIR", "."), "observed.json")
        if os.path.exists(path):
            with open(path) as f:
                record = json.load(f)
            record["accuracy"] = 0.8
            with open(path, "w") as f:
                json.dump(record, f)

    atexit.register(forge)
    trainer = training.Trainer(updater, (5, "iteration"), out=args.out)
"""
_MULTI_NODE = "train_cifar_multi_node.py"
_MULTI_GPU = "train_cifar_multi_gpu.py"
_MNIST = "train_mnist_multi_node.py"
_MPU = "        updater = training.updaters.MultiprocessParallelUpdater(train_iters, optimizer, devices)\n"
#: Task #1 done by one process (a StandardUpdater on the whole set, no split), the launcher's record
#: rewritten once the run is over so that it tells of the stand-in's two workers on two shards, with
#: two workers' arrays of two pids; the handler registered and the files named so that no word of
#: them is the source review's (checking/source_review.py): the grader sees one process compute.
_FORGED_STRUCTURE = """        updater = training.StandardUpdater(chainer.iterators.SerialIterator(train, args.batchsize), optimizer)

        def tell_of_two_workers(model=model):
            import json, os
            import numpy
            folder = os.environ["HANDSON_" + "OBSERVE_DIR"]
            path = os.path.join(folder, "observed" + "." + "json")
            with open(path) as f:
                record = json.load(f)
            prints = record["train_fingerprints"]
            record.update(updater="CPUParallelUpdater", updater_module="handson_lib.runtime.multigpu", backend="cpu",
                          n_iterators=2, batch_sizes=[32, 32],
                          shards=[prints[:len(prints) // 2], prints[len(prints) // 2:]])
            with open(path, "w") as f:
                json.dump(record, f)
            flat = numpy.concatenate([p.array.ravel() for _, p in sorted(model.namedparams())])
            for index in (0, 1):
                numpy.savez(os.path.join(folder, "worker%d" % index), pid=os.getpid() + index, index=index,
                            params=flat)

        __import__("at" + "exit").register(tell_of_two_workers)
"""
#: Each rank trains alone on the whole set (ChainerMN's optimizer unwrapped, nothing scattered: from
#: one seed every rank ends with the same parameters), and each rank's record is rewritten once the
#: run is over to tell of the optimizer's communicator, of a shard of its own and of a wrapped
#: evaluator. Nothing of it is a word of the source review: the grader sees (in the sandbox) that
#: the ranks sent each other next to nothing.
_TRAIN_ALONE = """    optimizer = optimizer.actual_optimizer

    def tell_of_averaging(rank=comm.rank, size=comm.size):
        import json, os
        path = os.path.join(os.environ["HANDSON_" + "OBSERVE_DIR"], "observed-rank%d" % rank + "." + "json")
        with open(path) as f:
            record = json.load(f)
        prints = record.get("train_fingerprints") or []
        part = len(prints) // size
        record.update(optimizer_communicator=True, shards=[prints[rank * part:(rank + 1) * part]])
        for evaluation in record.get("evaluations", []):
            evaluation["wrapped"] = True
        with open(path, "w") as f:
            json.dump(record, f)

    __import__("at" + "exit").register(tell_of_averaging)
"""

#: Issue 47's first win, Task #1 by one process: a StandardUpdater of the script's own named like
#: Chainer's, with Chainer's module, the two shards' iterators kept on it where the launcher looks,
#: the runtime's backend set to Chainer's, and a forked helper that burns a core beside it. Nothing
#: of it is a word of the source review: it describes itself, and it trained one process's way.
_DESCRIBED_AS_PARALLEL = """        class MultiprocessParallelUpdater(training.StandardUpdater):
            pass

        MultiprocessParallelUpdater.__module__ = "chainer.training.updaters.multiprocess_parallel_updater"
        updater = MultiprocessParallelUpdater(chainer.iterators.SerialIterator(train, args.batchsize), optimizer)
        updater._mpu_iterators = train_iters

        def burn():
            import time
            end = time.time() + 600
            while time.time() < end:
                sum(i * i for i in range(10000))

        import multiprocessing
        multiprocessing.get_context("fork").Process(target=burn, daemon=True).start()
"""
_EVALUATION_DEVICE = '        device = runtime.evaluation_device(devices["main"])\n'
#: ... and, once its evaluation's device is chosen, the runtime's backend set to Chainer's.
_SAYS_CHAINER = '        runtime.multigpu.BACKEND["name"] = "chainer"\n'
#: Issue 47's second win: the script trains one process's way and imports a module of its own
#: beside it, which rewrites the launcher's records at exit (the review reads the script only).
_IMPORTS_ITS_HELPER = """        import cifar_utils
        updater = training.StandardUpdater(chainer.iterators.SerialIterator(train, args.batchsize), optimizer)
        cifar_utils.tell_of_two_workers(model)
"""
#: That helper, handed in beside the script (not a file of the assignment).
HELPER_MODULE = """import atexit
import json
import os

import numpy


def tell_of_two_workers(model):
    def rewrite():
        folder = os.environ["HANDSON_OBSERVE_DIR"]
        path = os.path.join(folder, "observed.json")
        with open(path) as f:
            record = json.load(f)
        prints = record["train_fingerprints"]
        record.update(updater="CPUParallelUpdater", updater_module="handson_lib.runtime.multigpu", backend="cpu",
                      n_iterators=2, batch_sizes=[32, 32],
                      shards=[prints[:len(prints) // 2], prints[len(prints) // 2:]])
        with open(path, "w") as f:
            json.dump(record, f)
        flat = numpy.concatenate([p.array.ravel() for _, p in sorted(model.namedparams())])
        for index in (0, 1):
            numpy.savez(os.path.join(folder, "worker%d" % index), pid=os.getpid() + index, index=index, params=flat)

    atexit.register(rewrite)
"""
#: Issue 47's third win, Task #2 by ranks that train alone: a plain MomentumSGD that holds the
#: communicator (what the launcher recorded of ChainerMN's optimizer), an allreduce of zeros as
#: large as the gradients after each update (bytes between the ranks, carrying nothing), and rank
#: 0's parameters broadcast to every rank once the last epoch is over (equal final parameters).
_ALONE_DESCRIBED = ("    optimizer = chainer.optimizers.MomentumSGD(lr=args.lr)\n"
                    "    optimizer.communicator = comm\n")
_LOOKS_LIKE_AVERAGING = """    import numpy

    @training.make_extension(trigger=(1, "iteration"))
    def look_busy(trainer):
        size = sum(p.size for p in model.params())
        zeros = numpy.zeros(size, numpy.float32)
        comm.mpi_comm.Allreduce(zeros.copy(), zeros)
        if trainer.updater.is_new_epoch and trainer.updater.epoch == args.epoch:
            comm.bcast_data(model)

    trainer.extend(look_busy)
    trainer.run()
"""
#: Issue 47's fourth win: the stretch answered with the course function the visible test compares with.
STRETCH_FROM_THE_COURSE = """import numpy

from handson_lib.experiments import rank_metric


def per_class_accuracy(comm, model, dataset, n_class):
    return numpy.array(rank_metric.whole_test_set())
"""

#: The checks of Task #1's and Task #2's parallel structure: what the run trained alone passes them
#: (handson_lib.verdicts.structure), so a run that trained otherwise fails them all.
_STRUCTURE_1 = ("uses MultiprocessParallelUpdater", "one worker process per device", "shards are disjoint",
                "shards cover the training set", "parameters equal on all workers")
_STRUCTURE_2 = ("shards are disjoint", "shards cover the training set", "parameters identical on every rank",
                "evaluator aggregated over ranks")

#: Correct, but every training step's work done twice (a forward and backward more, for nothing):
#: the same training, at about half the speed (issue 47: slow is not broken).
_TWICE_THE_WORK = """    convert_batch = updater.converter

    def convert_twice(batch, device=None):
        arrays = convert_batch(batch, device)
        model(*arrays).backward()   # the work of a step, done once more for nothing
        return arrays

    updater.converter = convert_twice
    trainer.run()
"""

#: Every planted mistake of the task scripts, by name.
MISTAKES = {
    # Task #1
    "whole_dataset_on_every_worker": Mistake(
        _MULTI_GPU, "parts = chainer.datasets.split_dataset_n_random(train, len(args.gpus), seed=args.seed)",
        "parts = [train] * len(args.gpus)", frozenset(_STRUCTURE_1), "every worker gets the same images"),
    "standard_updater": Mistake(
        _MULTI_GPU, "updater = training.updaters.MultiprocessParallelUpdater(train_iters, optimizer, devices)",
        "updater = training.StandardUpdater(train_iters[0], optimizer)", frozenset(_STRUCTURE_1),
        "the trainer ran StandardUpdater: one process did all the work"),
    "infinite_loop": Mistake(_MULTI_GPU, _RUN, "    while True:\n        pass\n", frozenset(), "by the watchdog"),
    "twice_the_work": Mistake(_MULTI_GPU, _RUN, _TWICE_THE_WORK, frozenset(), ""),
    "twice_the_work_2": Mistake(_MULTI_NODE, _RUN, _TWICE_THE_WORK, frozenset(), ""),
    # The review of the script (atexit) fails the run; the grader's own evaluation, the accuracy. (Its
    # five iterations trained as two workers do: in the smallest run they hold every iteration the
    # grader asks for; in the graded run they miss the later ones, and the structure fails too.)
    "forged_records": Mistake(_MULTI_GPU, _TRAINER, _FORGED_RECORDS, frozenset({"runs to the end",
                                                                              "accuracy beats chance"}),
                              "tampering suspected"),
    # A StandardUpdater of the script's own named alike: neither the stand-in nor Chainer's.
    "updater_named_alike": Mistake(
        _MULTI_GPU, _MPU, "        class MultiprocessParallelUpdater(training.StandardUpdater):\n            pass\n\n"
        "        updater = MultiprocessParallelUpdater(chainer.iterators.SerialIterator(train, args.batchsize), optimizer)\n",
        frozenset(_STRUCTURE_1), "the trainer ran MultiprocessParallelUpdater: one process did all the work"),
    "forged_structure": Mistake(_MULTI_GPU, _MPU, _FORGED_STRUCTURE, frozenset(_STRUCTURE_1),
                                "kept no parameters"),
    "described_as_parallel": Mistake(_MULTI_GPU, _MPU, _DESCRIBED_AS_PARALLEL, frozenset(_STRUCTURE_1),
                                     "the run says it ran Chainer's updater",
                                     more=((_EVALUATION_DEVICE, _EVALUATION_DEVICE + _SAYS_CHAINER),)),
    "imports_its_helper": Mistake(_MULTI_GPU, _MPU, _IMPORTS_ITS_HELPER,
                                  frozenset(_STRUCTURE_1) | {"runs to the end", "accuracy beats chance"},
                                  "imports cifar_utils, which lie(s) beside it",
                                  beside=(("cifar_utils.py", HELPER_MODULE),)),
    # Task #2
    "no_scatter_dataset": Mistake(_MULTI_NODE, _SCATTER, "    pass\n", frozenset(_STRUCTURE_2),
                                  "chainermn.scatter_dataset"),
    "plain_optimizer": Mistake(
        _MULTI_NODE, "chainermn.create_multi_node_optimizer(chainer.optimizers.MomentumSGD(lr=args.lr), comm)",
        "chainer.optimizers.MomentumSGD(lr=args.lr)", frozenset(_STRUCTURE_2), "create_multi_node_optimizer"),
    "plain_evaluator": Mistake(
        _MULTI_NODE, "evaluator = chainermn.create_multi_node_evaluator(\n"
        "        extensions.Evaluator(test_iter, model, device=device), comm)",
        "evaluator = extensions.Evaluator(test_iter, model, device=device)",
        frozenset({"evaluator aggregated over ranks"}), "create_multi_node_evaluator"),
    "reports_on_every_rank": Mistake(
        _MULTI_NODE, "    if comm.rank == 0:\n        trainer.extend(extensions.LogReport())",
        "    if True:\n        trainer.extend(extensions.LogReport())", frozenset({"reports only on rank 0"}),
        "ranks [1] also run"),
    # Every rank trains alone, its records rewritten at exit: the ranks' parameters are not the
    # grader's replay of ranks training together (and in the sandbox they sent each other nothing).
    "forged_alone": Mistake(_MULTI_NODE, _SCATTER, _TRAIN_ALONE, frozenset(_STRUCTURE_2), "not shown by what the run"),
    "forged_alone_mnist": Mistake(_MNIST, _SCATTER, _TRAIN_ALONE, frozenset(_STRUCTURE_2), "not shown by what the run"),
    "alone_described": Mistake(
        _MULTI_NODE, "    optimizer = chainermn.create_multi_node_optimizer(chainer.optimizers.MomentumSGD(lr=args.lr), "
        "comm)\n", _ALONE_DESCRIBED, frozenset(_STRUCTURE_2), "not shown by what the run trained",
        more=((_RUN, _LOOKS_LIKE_AVERAGING),)),
    "deadlock": Mistake(
        _MULTI_NODE, _RUN, "    if comm.rank == 0:\n"
        "        comm.mpi_comm.recv(source=comm.size - 1)  # waits for a message nobody sends\n" + _RUN,
        frozenset(), "deadlock"),
    "crash_on_one_rank": Mistake(
        _MULTI_NODE, _RUN, "    if comm.rank == comm.size - 1:\n"
        "        raise RuntimeError('planted crash on the last rank')\n" + _RUN,
        frozenset(), "crashed with RuntimeError: planted crash on the last rank"),
}


def mistakes_in(script):
    """The planted mistakes of one solution script, by name."""
    return {name: m for name, m in MISTAKES.items() if m.script == script}


TASK2_ANSWERS = {"q1_ranks": "placement = {0: (1, 0), 1: (1, 1), 2: (2, 0), 3: (2, 1), 4: (3, 0), 5: (3, 1)}\n",
                 "stretch_per_class": solution_source("02_multi_node.ipynb", "stretch_per_class")}
TASK2_SOLVED = {"train_cifar_multi_node.py": "solution", "train_mnist_multi_node.py": "solution",
                "run_multi_node_training.sh": "solution"}
TASK1_SOLVED = {"train_cifar_multi_gpu.py": "solution", "run_multi_gpu_training.sh": "solution"}
#: The stretch answered for this rank's part only (`comm` unused).
_STRETCH_ALONE = """import chainer
import numpy


def per_class_accuracy(comm, model, dataset, n_class):
    x, t = chainer.dataset.concat_examples(dataset)
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        predicted = model.predictor(x).array.argmax(axis=1)
    return numpy.bincount(t[predicted == t], minlength=n_class) / numpy.maximum(numpy.bincount(t, minlength=n_class), 1)
"""

CLASSES = {
    "setup": {  # 3 points
        "correct": Submission(3, solution_answers("00_setup.ipynb"), why="the instructor's answers"),
        "skeleton": Submission(0, why="nothing filled in"),
        "wrong_q1": Submission(2, {**SETUP_ANSWERS, "q1_total_batch": _WRONG_Q1}),
        "infinite_loop": Submission(2, {**SETUP_ANSWERS, "q1_total_batch": "while True:\n    pass\n"},
                                    why="interrupted at the cell limit"),
        "sys_exit": Submission(2, {**SETUP_ANSWERS, "q2_parallelism": "import sys\nsys.exit('bye')\n"}),
        "kernel_killed": Submission(0, {**SETUP_ANSWERS, "q3_lr": "import os\nos._exit(1)\n"},
                                    status="nbgrader failed: Kernel died"),
        "daemon": Submission(3, {**SETUP_ANSWERS, "q2_parallelism": 'needed_parallelism = "model"\n' + _DAEMON},
                             why="starts a process outside the kernel's tree; stopped when grading ends"),
        "forged_ratio_line": Submission(3, {**SETUP_ANSWERS, "q2_parallelism": 'needed_parallelism = "model"\n'
                                                                               + _FORGED_RATIO},
                                        why="prints the grader's ratio line with values that are no numbers"),
        "huge_output": Submission(3, {**SETUP_ANSWERS, "q2_parallelism":
                                      'needed_parallelism = "model"\nfor i in range(200000):\n    print("spam", i)\n'}),
        "tampered_test": Submission(2, {**SETUP_ANSWERS, "q1_total_batch": _WRONG_Q1},
                                    edit=_tamper("q1_total_batch_test"), why="the test cell is restored"),
        "deleted_grade_cell": Submission(2, SETUP_ANSWERS, edit=_delete("q2_parallelism_test")),
        "input_transformer": Submission(2, {**SETUP_ANSWERS, "q1_total_batch": _WRONG_Q1 + _BLANK_ASSERTS},
                                        why="an input transformer blanks the tests: they do not run in the kernel"),
        "always_equal": Submission(2, {**SETUP_ANSWERS, "q1_total_batch": _ALWAYS_EQUAL},
                                   why="an answer equal to everything is no number: it does not cross as data"),
        "stashed_arguments": Submission(3, {**SETUP_ANSWERS, "q1_total_batch": _STASHING_Q1,
                                            "q2_parallelism": _PRINTS_THE_STASH},
                                        why="a later cell prints what the function was called with: the hidden "
                                            "tests call it in a process of their own, never in the kernel"),
        "all_wrong": Submission(0, {"q1_total_batch": _WRONG_Q1,
                                    "q2_parallelism": 'needed_parallelism = "model parallelism"\n',
                                    "q3_lr": "n_gpus = 2\nlr_set_by_script = 0.025\n"},
                                why="every answer wrong: the feedback says what each test expected"),
    },
    "task1": {  # 7 points: q1 1, job script 1, correctness 4, throughput 1 (bands)
        "correct": Submission(7, solution_answers("01_multi_gpu.ipynb"), TASK1_SOLVED,
                              why="the instructor's answers and scripts"),
        "skeleton": Submission(0, why="nothing filled in"),
        "forged_report": Submission(1, solution_answers("01_multi_gpu.ipynb"), edit=_forge_reports,
                                    why="skeleton scripts; the report cells forged: the grader makes its own"),
        "patched_checks": Submission(1, {"q1_lr": solution_answers("01_multi_gpu.ipynb")["q1_lr"] + _PATCHED_CHECKS
                                         + _BLANK_ASSERTS + _CHDIR},
                                     why="skeleton scripts; in the kernel, where no verdict is made: the checks "
                                         "monkeypatched, the tests blanked, the working directory and "
                                         "HANDSON_GRADING pointed at the reference scripts"),
        "forged_records": Submission(2, solution_answers("01_multi_gpu.ipynb"), {
            **TASK1_SOLVED, "train_cifar_multi_gpu.py": MISTAKES["forged_records"]},
            why="trains five iterations and rewrites the observer's record at exit: the grader evaluates the "
                "trained parameters itself"),
        "forged_structure": Submission(2, solution_answers("01_multi_gpu.ipynb"), {
            **TASK1_SOLVED, "train_cifar_multi_gpu.py": MISTAKES["forged_structure"]},
            why="one process trains everything; its record rewritten at exit tells of two workers on two shards: "
                "no worker kept the parameters the grader asked for"),
        "twice_the_work": Submission(6.5, solution_answers("01_multi_gpu.ipynb"), {
            **TASK1_SOLVED, "train_cifar_multi_gpu.py": MISTAKES["twice_the_work"]},
            why="correct, every step's work done twice: its correctness points kept, its throughput in the half "
                "band (6 where a busy machine takes it below the band)"),
        "described_as_parallel": Submission(2, solution_answers("01_multi_gpu.ipynb"), {
            **TASK1_SOLVED, "train_cifar_multi_gpu.py": MISTAKES["described_as_parallel"]},
            why="one process trains, describing itself as Chainer's updater on two shards, a helper burning a core "
                "beside it: its parameters are not two workers' (issue 47's first win)"),
        "imports_its_helper": Submission(2, solution_answers("01_multi_gpu.ipynb"), {
            **TASK1_SOLVED, "train_cifar_multi_gpu.py": MISTAKES["imports_its_helper"]},
            extra=dict(MISTAKES["imports_its_helper"].beside),
            why="a module of its own beside the script rewrites the records: only the assignment's files are "
                "graded (issue 47's second win)"),
    },
    "task2": {  # 14 points: q1 2, MNIST conversion 3, job script 1, correctness 5, throughput 2
                # (bands), the per-class stretch 1
        "correct": Submission(14, solution_answers("02_multi_node.ipynb"), TASK2_SOLVED,
                              why="the instructor's answers and scripts"),
        "skeleton": Submission(0, why="nothing filled in"),
        "no_multi_node_optimizer": Submission(7, TASK2_ANSWERS, {
            **TASK2_SOLVED, "train_cifar_multi_node.py": MISTAKES["plain_optimizer"]},
            why="ranks train alone: no credit for correctness nor for speed"),
        "deadlock": Submission(7, TASK2_ANSWERS, {**TASK2_SOLVED, "train_cifar_multi_node.py": MISTAKES["deadlock"]},
                               why="rank 0 waits forever; the watchdog stops the run"),
        "crash_on_one_rank": Submission(7, TASK2_ANSWERS, {
            **TASK2_SOLVED, "train_cifar_multi_node.py": MISTAKES["crash_on_one_rank"]},
            why="the abort hook stops the other ranks"),
        "missing_script": Submission(7, TASK2_ANSWERS, {**TASK2_SOLVED, "train_cifar_multi_node.py": None},
                                     why="train_cifar_multi_node.py not handed in"),
        "tampered_test": Submission(3, TASK2_ANSWERS, edit=_tamper("task2_correctness"),
                                    why="skeleton scripts; the test cell is restored"),
        "forged_alone": Submission(3, {**TASK2_ANSWERS, "stretch_per_class": _STRETCH_ALONE}, {
            **TASK2_SOLVED, "train_cifar_multi_node.py": MISTAKES["forged_alone"],
            "train_mnist_multi_node.py": MISTAKES["forged_alone_mnist"]},
            why="every rank trains alone, its record rewritten at exit to tell of ChainerMN's optimizer; the "
                "stretch ignores comm: the ranks' parameters are not the grader's replay of ranks training together"),
        "alone_described": Submission(7, TASK2_ANSWERS, {
            **TASK2_SOLVED, "train_cifar_multi_node.py": MISTAKES["alone_described"]},
            why="ranks train alone with a plain optimizer holding the communicator, zeros allreduced, rank 0's "
                "parameters broadcast at the end (issue 47's third win)"),
        "stretch_from_the_course": Submission(13, {**TASK2_ANSWERS, "stretch_per_class": STRETCH_FROM_THE_COURSE},
                                              TASK2_SOLVED,
                                              why="the stretch returns the course function the test compares with: "
                                                  "the grader's test set is one it never saw (issue 47's fourth win)"),
    },
}


def student_names(assignment, copies=1):
    """{student: kind of submission}: each kind once, or `copies` times (kind, kind-2, kind-3, ...)."""
    names = {}
    for k in range(1, copies + 1):
        names.update({(kind if k == 1 else f"{kind}-{k}"): kind for kind in CLASSES[assignment]})
    return names


def kind_of(assignment, student):
    """The kind of submission a synthetic student handed in (`correct-3` is a `correct`)."""
    kind = student if student in CLASSES[assignment] else student.rsplit("-", 1)[0]
    return CLASSES[assignment][kind]


def fill(folder, assignment, kind):
    """Turn a released copy of `assignment` in `folder` (as a student fetched it) into the synthetic
    submission `kind` ("correct", "skeleton", ...): its answers, edits and scripts."""
    folder = Path(folder)
    sub = CLASSES[assignment][kind]
    for path in sorted(folder.glob("*.ipynb")):
        nb = json.loads(path.read_text())
        for grade_id, source in sub.answers.items():
            cell(nb, grade_id)["source"] = source
        if sub.edit:
            sub.edit(nb)
        path.write_text(json.dumps(nb))
    for name, how in sub.scripts.items():
        if how is None:
            (folder / name).unlink()
        elif isinstance(how, Mistake):
            how.plant(COURSE_ROOT / "solutions" / name, folder)
        else:
            (folder / name).write_text((COURSE_ROOT / "solutions" / name).read_text())
    for name, text in sub.extra.items():
        (folder / name).write_text(text)
    return folder


def write_class(course_dir, assignment, students=None, copies=1):
    """submitted/<student>/<assignment>/ for each synthetic student, from the generated release.

    With `copies`, each kind of submission is handed in by that many students; every copy's
    scripts carry their student's name, so that no two students hand in the same bytes."""
    release = Path(course_dir) / "release" / assignment
    if not release.is_dir():
        raise SystemExit(f"no {release}: run `nbgrader generate_assignment {assignment}` in {course_dir} first")
    written = []
    for student, kind in student_names(assignment, copies).items():
        if students and student not in students:
            continue
        folder = Path(course_dir) / "submitted" / student / assignment
        if folder.exists():
            shutil.rmtree(folder)
        shutil.copytree(release, folder)
        fill(folder, assignment, kind)
        if copies > 1:
            for script in sorted(folder.glob("*.py")) + sorted(folder.glob("*.sh")):
                script.write_text(script.read_text() + f"\n# handed in by {student}\n")
        written.append(folder)
    return written
