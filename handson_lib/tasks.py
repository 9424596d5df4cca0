"""The course's graded work in one registry: each assignment (an nbgrader assignment: its
notebook and the student files that travel with it) and each task (a check of one student file:
`handson check NAME`, run by a locked report cell of its assignment).

Everything that lists them derives from here: the nbgrader course's assignments and the reference
runs measured before the students (handson_lib.autograder.nbgrader_course), the report cells the
judge runs in the grader (autograder.judge), `handson check`'s tasks and their run arguments
(checking.checks), the exercises' job scripts (sites.generate), the assignments a classroom
hands out first (classroom.command). Adding a graded notebook is an Assignment here (and a Task
for each script it checks) plus its own files (the instructor guide, "Adding to the course").

Data only: it imports nothing of the library, so every layer can read it.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Assignment:
    name: str                    # nbgrader's assignment (course/source/<name>/)
    notebook: str                # the notebook's file name (the instructor's copy holds its answers)
    files: tuple = ()            # the student files from exercises/ that travel with it
    title: str = ""              # how the course names it ("Task #1")
    handed_out_first: bool = False   # released first when a classroom starts without a list


@dataclass(frozen=True)
class Task:
    name: str                    # `handson check NAME`
    assignment: str              # the assignment whose report cell runs it
    report_cell: str             # the grade id of that locked report cell (the judge runs it)
    check: str                   # its function in handson_lib.checking.checks
    script: str                  # the file checked: exercises/<script> (the reference solution has the same name)
    run_args: tuple = ()         # the script's arguments in the check's runs
    graded_args: tuple = ()      # ... in its runs judged against the reference, where they differ (see args_against_reference)
    gpus: int = 0                # the reference run measured before the students: one process on this many devices,
    ranks: int = 0               # ... or this many MPI ranks (neither: no reference run)
    jobscript: str = ""          # a job-script task: its kind (sites.pbs_lines.SCRIPTS) ...
    runs: str = ""               # ... the task whose script it runs ...
    layout: str = ""             # ... and the resources the exercise asks for, as its comment says them

    def args_against_reference(self):
        """The script's arguments in the runs judged against the reference (the autograder's): a
        shorter training may do there, since the grader sets it beside the reference's under the
        same seed and needs no more accuracy than the reference reached; `run_args` elsewhere."""
        return self.graded_args or self.run_args

    def reference_run(self):
        """(script, arguments, ranks or None) of the reference run measured before the students,
        or None."""
        if self.gpus:
            return self.script, ["--gpus", *map(str, range(self.gpus)), *self.args_against_reference()], None
        if self.ranks:
            return self.script, list(self.args_against_reference()), self.ranks
        return None


ASSIGNMENTS = (
    Assignment("setup", "00_setup.ipynb", handed_out_first=True),
    Assignment("task1", "01_multi_gpu.ipynb", ("train_cifar_multi_gpu.py", "run_multi_gpu_training.sh"),
               title="Task #1"),
    Assignment("task2", "02_multi_node.ipynb", ("train_cifar_multi_node.py", "run_multi_node_training.sh",
                                                "train_mnist.py", "train_mnist_multi_node.py"),
               title="Task #2", handed_out_first=True),
    Assignment("profiling", "03_profiling.ipynb"),
    Assignment("scaling", "04_scaling.ipynb"),
    Assignment("tuning", "05_tuning.ipynb"),
    Assignment("large_batch", "06_large_batch.ipynb"),
    Assignment("predict", "08_predict.ipynb"),
)

TASKS = (
    # Task #1's runs: 3 epochs of a small set, enough for the accuracy check.
    Task("multi-gpu", "task1", "task1_report", "check_multi_gpu", "train_cifar_multi_gpu.py",
         ("--epoch", "3", "--train-size", "2000", "--test-size", "500", "--batchsize", "32", "--no-progress"),
         gpus=2),
    # Task #2's correctness run in the self-check (and the notebook's runs): enough steps to beat
    # min_accuracy surely (4 epochs: 0.63-0.70 over 10 runs on 2 ranks; after 3 the accuracy still
    # swung, 0.18-0.68, in runs of an earlier commit). Against the reference, 2 epochs (0.41-0.76
    # over 16 seeds passed as the grader passes its own, on 2 ranks, at 46339de):
    # every step the grader compares with its replay lies in the first epoch or just after it, and
    # the accuracy needed is at most a share of the reference's own under the same seed. Its test set
    # of 272 gives each rank 4 minibatches and a short one: the whole set's value then differs from
    # the mean over the ranks' parts, so the grader's evaluation tells an Evaluator that ran alone on
    # every rank from the multi-node one (with 256, whole minibatches, the two were the same number).
    Task("multi-node", "task2", "task2_report", "check_multi_node", "train_cifar_multi_node.py",
         ("--epoch", "4", "--train-size", "1280", "--test-size", "256", "--batchsize", "32", "--no-progress"),
         ("--epoch", "2", "--train-size", "1280", "--test-size", "272", "--batchsize", "32", "--no-progress"),
         ranks=2),
    # accuracy 0.88-0.92 already after 2 epochs: the rest is start-up
    Task("mnist-multi-node", "task2", "task2_mnist_report", "check_mnist_multi_node", "train_mnist_multi_node.py",
         ("--epoch", "2", "--no-progress"), ranks=2),
    Task("jobscript-multi-gpu", "task1", "task1_job_report", "check_jobscript", "run_multi_gpu_training.sh",
         jobscript="multi_gpu", runs="multi-gpu",
         layout="one node, one MPI process with one\n#     OpenMP thread "
                "(MultiprocessParallelUpdater starts its own worker processes, one per GPU)"),
    Task("jobscript-multi-node", "task2", "task2_job_report", "check_jobscript", "run_multi_node_training.sh",
         jobscript="multi_node", runs="multi-node",
         layout="{nodes} nodes with {gpus} MPI {processes} each\n#     (one per GPU) "
                "and one OpenMP thread per process: {ranks} ranks in all"),
)


def assignment(name):
    return next(a for a in ASSIGNMENTS if a.name == name)


def task(name):
    return next(t for t in TASKS if t.name == name)


def tasks_of(assignment_name):
    return [t for t in TASKS if t.assignment == assignment_name]
