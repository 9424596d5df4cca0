"""Where one training iteration spends its time: forward, backward, allreduce, update (seed 001).

Seed 001 put timers into ChainerMN's `_MultiNodeOptimizer.update` to split every iteration into
compute, allreduce and optimize. `instrument(updater_or_optimizer)` does the same from outside,
by wrapping methods of the *instances* (Chainer's code stays as it is):

- forward:   the loss function the optimizer calls (the model's `__call__`),
- backward:  `loss.backward()` on the Variable that forward returned,
- allreduce: the communicator's `multi_node_mean_grad` (ChainerMN averages the gradients),
- update:    the wrapped optimizer's own `update()` (MomentumSGD's parameter step); with a plain
             optimizer, from the end of backward to the end of `update()`,
- iteration: the updater's `update()` (data loading included) or else the optimizer's; what the
             four phases leave is reported as `other` (data, conversion, `cleargrads`).

Each phase is also an NVTX range of the same name when CuPy imports, so that Nsight Systems /
nvprof timelines show it. On a GPU the device is synchronised before each clock reading.

`measure(np=2, ...)` runs a short ChainerMN training on local CPU ranks (`naive` communicator)
and returns the per-phase medians of every rank, the throughput, the gradient size L and a
`chainer.function_hooks.TimerHook` table of rank 0: `handson profile breakdown` on the command
line. Training scripts switch the instrumentation on with HANDSON_PHASES=1 (see
`training.instrument_phases`).

The package: `worker` (one rank, under mpiexec), `runs` (`measure`, `sweep`, `load_sweep`),
`report` (tables, figures, the JSON form), `command` (`handson profile breakdown`). The names
below are the ones the notebooks, the tests and the reports use.
"""

from handson_lib.experiments.breakdown.command import add_arguments, main
from handson_lib.experiments.breakdown.report import (as_json, format_phase_table, format_timer_table, from_json,
                                                      link_text, phase_figure, report_figure, report_table,
                                                      report_title, scaling_figure)
from handson_lib.experiments.breakdown.runs import busy_processes, cpu_fillers, load_sweep, measure, sweep
from handson_lib.experiments.breakdown.worker import timer_table

__all__ = [
    "add_arguments", "as_json", "busy_processes", "cpu_fillers", "format_phase_table", "format_timer_table",
    "from_json", "link_text", "load_sweep", "main", "measure", "phase_figure", "report_figure", "report_table",
    "report_title", "scaling_figure", "sweep", "timer_table",
]
