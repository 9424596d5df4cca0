"""Large-batch training (seed 003): linear scaling rule, gradual warmup, and the ChainerMN options
that go with many workers (FP16 allreduce, double buffering, multi-node batch normalization).

With N workers of batch b, every update averages N*b examples: the *total* batch grows with the
number of workers (in Chainer 7 without batch normalization, N workers of batch b update exactly
like one process with batch N*b; the Task #1 tests check that). So the effect of more workers on
accuracy can be studied in one process by growing its batch, which is what :func:`run` does.

The learning-rate rules are the student's to write (notebook 06): the linear scaling rule
``scaling_rule(base_lr, base_batch, batch)`` and a warmup extension made by
``lr_schedule_factory(base_lr=, base_batch=, batch=, warmup_iterations=)``. :func:`run`,
:func:`lr_trace` and :func:`imagenet_table` take them as parameters; this package has no rule of
its own (the instructor's are in handson_lib.autograder.answers, which the student edition does not
ship).

The package: `imagenet` (the seed's table), `schedules` (a schedule's rates), `train` (one run),
`experiment` (:func:`run`), `simulation` (FP16 allreduce and double buffering on CPU), `worker`
and `mpi_runs` (the ChainerMN options on MPI ranks), `report` (table, figure), `command`
(`handson bench large-batch`'s arguments and run). The names below are the ones the notebooks,
the autograder and the reports use.
"""

from handson_lib.experiments.large_batch.command import add_arguments, run_command
from handson_lib.experiments.large_batch.experiment import DEFAULT_BATCHES, SCHEDULES, run
from handson_lib.experiments.large_batch.imagenet import (GOYAL_BASE_BATCH, GOYAL_BASE_LR, IMAGENET_IN_15_MINUTES,
                                                          IMAGENET_TRAIN_IMAGES, imagenet_table,
                                                          print_imagenet_table)
from handson_lib.experiments.large_batch.mpi_runs import (bn_compare, print_bn_compare, print_gpu_options,
                                                          run_gpu_options, try_gpu_options)
from handson_lib.experiments.large_batch.report import accuracy_figure, format_table
from handson_lib.experiments.large_batch.schedules import check_positive, lr_trace, rate_at
from handson_lib.experiments.large_batch.simulation import simulate_gpu_options
from handson_lib.experiments.large_batch.train import train_once, warmup_iterations_for
from handson_lib.experiments.large_batch.worker import GPU_OPTIONS

# The grader runs the functions a grade cell passes to `on_answers` by module and name, and only
# from the modules the notebooks import: these answer to the package's name, where they are found.
for _function in (lr_trace, rate_at):
    _function.__module__ = __name__
del _function

__all__ = [
    "DEFAULT_BATCHES", "GOYAL_BASE_BATCH", "GOYAL_BASE_LR", "GPU_OPTIONS", "IMAGENET_IN_15_MINUTES",
    "IMAGENET_TRAIN_IMAGES", "SCHEDULES", "accuracy_figure", "add_arguments", "bn_compare", "check_positive",
    "format_table", "imagenet_table", "lr_trace", "print_bn_compare", "print_gpu_options",
    "print_imagenet_table", "rate_at", "run", "run_command", "run_gpu_options", "simulate_gpu_options",
    "train_once", "try_gpu_options", "warmup_iterations_for",
]
