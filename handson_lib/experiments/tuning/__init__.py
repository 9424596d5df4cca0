"""Seed 004's speed-up levers, switched on in turn in one training script, measured here.

The talk (GTC Japan 2018, "Chainer における深層学習の高速化", Preferred Networks) took ResNet-50
training on one V100 from 4.18 to 15.54 iterations/sec (about 3.7x) with eight changed lines:
cuDNN, cuDNN autotune (+ workspace), FP16, a MultiprocessIterator, `@static_graph`, and, as a
bonus, a bigger batch. The package holds

* `levers`: the levers as data (`LEVERS`): the talk's exact lines, the lines this course runs on
  Chainer 7.8.1, whether the lever needs a GPU, and a function that switches it on in a `RunConfig`;
* `images`: the JPEG images the loader decodes and augments;
* `worker`: one training script (`python -m handson_lib.experiments.tuning --levers cudnn,autotune,...`)
  that trains with a set of levers and reports iterations/sec and images/sec with the warm-up excluded;
* `measure`: `run_levers()`, every cumulative step in a fresh process, repeats alternating
  (A B C A B C), median and spread; `talk`: `talk_result()` holds the seed's numbers in the same form;
* `report`: `table()`, `bars_figure()` and `effects()`;
* `exercise`: `compare_iterators()` measures a student's iterator against `SerialIterator` (its
  result carries the measurements, not the speed-up: computing that is the notebook's question);
* `command`: `handson bench tuning`.

A lever that needs a GPU is never measured on a CPU: its step says "needs a GPU: not applied" and
carries no figure. The loader decodes JPEG images and augments them (random crop, resize, flip) in
float32, as the talk's ImageNet loader does, so that `MultiprocessIterator` has work to hide.

No CuPy or matplotlib at import time: the `handson` command line imports this package. The names
below are the ones the notebooks, the autograder and the reports use (`tuning.table`, ...).
"""

from handson_lib.experiments.tuning.command import add_arguments, main
from handson_lib.experiments.tuning.exercise import compare_iterators, iterator_facts
from handson_lib.experiments.tuning.images import DecodeAugment, encoded_dataset
from handson_lib.experiments.tuning.levers import (BATCH_FACTOR, LEVER_NAMES, LEVERS, LEVERS_BY_NAME,
                                                   WORKSPACE_BYTES, Lever, RunConfig, configure,
                                                   describe_levers, parse_levers)
from handson_lib.experiments.tuning.measure import parse_report, plan_steps, run_levers, worker_command
from handson_lib.experiments.tuning.report import SHOWN_TEXTS, bars_figure, effects, shown_text, table
from handson_lib.experiments.tuning.talk import TALK_SOURCE, TALK_STEPS, talk_result
from handson_lib.experiments.tuning.worker import (REPORT_PREFIX, default_n_processes, train_and_measure,
                                                   worker_main)

# The grader runs the functions a grade cell passes to `on_answers` by module and name, and only
# from the modules the notebooks import: these answer to the package's name, where they are found.
for _function in (iterator_facts,):
    _function.__module__ = __name__
del _function

__all__ = [
    "BATCH_FACTOR", "DecodeAugment", "LEVERS", "LEVERS_BY_NAME", "LEVER_NAMES", "Lever", "REPORT_PREFIX",
    "RunConfig", "SHOWN_TEXTS", "TALK_SOURCE", "TALK_STEPS", "WORKSPACE_BYTES", "add_arguments",
    "bars_figure", "compare_iterators", "configure", "default_n_processes", "describe_levers", "effects",
    "encoded_dataset", "iterator_facts", "main", "parse_levers", "parse_report", "plan_steps", "run_levers",
    "shown_text", "table", "talk_result", "train_and_measure", "worker_command", "worker_main",
]
