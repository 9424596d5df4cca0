"""Every graded question's visible test rejects a wrong answer and says what was expected without
giving the answer away.

The visible part of each graded test cell (the student notebook's copy, hidden tests removed) runs
here in a small namespace holding planted wrong answers and the few objects the cell reads from
earlier cells; no notebook is executed.
"""

import ast
import json
import re
import sqlite3
import textwrap
from dataclasses import dataclass

import pytest

from conftest import ROOT
from handson_lib import profiling
from handson_lib.checking import checks


def _graded_cells(folder):
    """grade_id -> (notebook, source) of every graded test cell of the notebooks in `folder`."""
    cells = {}
    for path in sorted((ROOT / folder).glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade") and cell["cell_type"] == "code":
                cells[meta["grade_id"]] = (path.name, "".join(cell["source"]))
    return cells


def _answer_cells(notebook):
    """Sources of the answer cells of an instructor notebook, in order."""
    nb = json.loads((ROOT / "solutions" / notebook).read_text())
    return ["".join(c["source"]) for c in nb["cells"]
            if c.get("metadata", {}).get("nbgrader", {}).get("solution")]


@dataclass
class Wrong:
    grade_id: str
    answer: str          # code that sets the answer variables to a wrong answer
    secrets: tuple = ()  # how the correct answer would read in a message: never shown


def _results():
    # Two runs of a 2-rank scaling measurement: 90 % efficiency, allreduce 10 ms per iteration.
    return {1: {"throughput": 100.0, "phases_s": {"allreduce": 0.0}},
            2: {"throughput": 180.0, "phases_s": {"allreduce": 0.01}}}


def _report(task, failing):
    report = checks.Report(task, "planted.py")
    report.add("runs to the end", True, "ran")
    report.add(failing, False, "planted failure")
    return report


SCALING = textwrap.dedent("""
    results = _results()
    def allreduce_traffic(nbytes, p):
        return 2 * nbytes * (p - 1) / p
    L = 2180392
    traffic = {p: allreduce_traffic(L, p) for p in (1, 2, 4, 8, 16)}
    busbw_training = traffic[2] / results[2]["phases_s"]["allreduce"] / 1e9
    bench = {"results": [{"path": "allreduce", "busbw_GBps": 1.0}, {"path": "p2p", "busbw_GBps": 0.5}]}
""")

def _planted_measured():
    """08's measurements, planted: the ring with alpha = 20 us and B = 2 GB/s, each time off by up to 3 %."""
    out = {}
    for p in (2, 3):
        out[p] = [[p, s, (2 * (p - 1) * 20e-6 + 2 * (p - 1) / p * s / 2e9) * (1 + 0.03 * ((i % 3) - 1))]
                  for i, s in enumerate((4096, 65536, 1 << 20, 16 << 20, 102228384))]
    return out


PREDICT = textwrap.dedent("""
    from handson_lib.experiments.allreduce import model, seed_link
    measured = _planted_measured()
    sizes = sorted({int(s) for _, s, _ in measured[2]})
    def ring_terms(p, nbytes):
        return (2 * (p - 1), 2 * (p - 1) / p * nbytes)
    fitted = model.fit(measured[2] + measured[3], ring_terms, ("alpha", "seconds_per_byte"))
    alpha = fitted.coefficients["alpha"]
    B_eff = 1 / fitted.coefficients["seconds_per_byte"]
    def predict_allreduce(p, nbytes, alpha, bandwidth):
        return 2 * (p - 1) * alpha + 2 * (p - 1) / p * nbytes / bandwidth
    predicted_p4 = {s: predict_allreduce(4, s, alpha, B_eff) for s in sizes}
    L_001 = seed_link.SEED_001.gradient_bytes
    local_001 = seed_link.intra_node_seconds(L_001, 4, seed_link.INTRA_NODE_LINK)
    B_seed = 8.5 * 2 ** 30 / 8
    seed001_predicted = {n: local_001 + predict_allreduce(n, L_001, 0.0, B_seed) for n in (2, 4)}
    s3 = seed_link.SEED_003
    GPUS_003 = (8, 16, 32, 64, 128, 256, 512, 1024)
    T_node = s3.node_step_seconds()
    def _step(g):
        return T_node + predict_allreduce(g // 8, s3.allreduce_bytes, seed_link.IB_STEP_SECONDS, s3.adapters_bytes_per_s())
    efficiency_003 = {g: _step(8) / _step(g) for g in GPUS_003}
""")

WRONG = [
    # 00 setup
    Wrong("q1_total_batch_test", "def total_batch_size(b, n):\n    return b\n", ("128", "1024")),
    Wrong("q1_total_batch_test", "def total_batch_size(b, n):\n    return b + n\n", ("128", "1024")),
    Wrong("q2_parallelism_test", 'needed_parallelism = "model parallelism"', ('= "model"', '== "model"')),
    Wrong("q2_parallelism_test", 'needed_parallelism = "Model"', ('= "model"', '== "model"')),
    Wrong("q3_lr_test", "n_gpus = 2\nlr_set_by_script = 0.025", ("0.05",)),
    Wrong("q3_lr_test", "n_gpus = 1\nlr_set_by_script = 0.1", ("2", "0.05")),
    Wrong("q3_lr_test", "n_gpus = 2.0\nlr_set_by_script = 0.05", ()),
    Wrong("q3_lr_test", "n_gpus = 1\nlr_set_by_script = 0.025", ("2", "0.05")),  # 'gpu1' taken for the only GPU
    # 01 multi-GPU
    Wrong("q1_lr_test", "lr_after_updater = 0.1\nimages_per_update = 64", ("256", "0.025")),
    Wrong("q1_lr_test", "lr_after_updater = 0.4\nimages_per_update = 256", ("0.025",)),
    Wrong("q1_lr_test", "lr_after_updater = 0.025\nimages_per_update = 128", ("256",)),
    Wrong("q1_lr_test", "lr_after_updater = 0.0125\nimages_per_update = 256", ("0.025",)),
    Wrong("task1_correctness", "report = _report('multi-gpu', 'shards are disjoint')"),
    Wrong("task1_throughput", "report = _report('multi-gpu', 'shards are disjoint')"),
    Wrong("task1_jobscript", "job_report = _report('jobscript-multi-gpu', 'job script lint')"),
    # 02 multi-node
    Wrong("q1_ranks_test", "placement = {0: (1, 0), 1: (1, 1), 2: (2, 2), 3: (2, 3), 4: (3, 4), 5: (3, 5)}",
          ("(2, 0)", "(3, 1)")),
    Wrong("q1_ranks_test", "placement = {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1), 4: (2, 0), 5: (2, 1)}",
          ("(3, 0)",)),
    Wrong("q1_ranks_test", "placement = {1: (1, 0), 2: (1, 1), 3: (2, 0), 4: (2, 1), 5: (3, 0), 6: (3, 1)}", ()),
    Wrong("q1_ranks_test", "placement = {0: (1, 1), 1: (1, 0), 2: (2, 0), 3: (2, 1), 4: (3, 0), 5: (3, 1)}",
          ("(1, 0)",)),
    Wrong("q1_ranks_test", "placement = {0: (1, 0), 1: (1, 1), 2: (2, 0), 3: (2, 1)}", ("(3, 0)",)),  # the 2x2 job
    # round-robin over the nodes (--map-by node): the misconception the question is about
    Wrong("q1_ranks_test", "placement = {0: (1, 0), 1: (2, 0), 2: (3, 0), 3: (1, 1), 4: (2, 1), 5: (3, 1)}",
          ("(1, 1)", "(2, 1)")),
    Wrong("mnist_conversion", "mnist_report = _report('mnist-multi-node', 'parameters identical on every rank')"),
    Wrong("task2_correctness", "report = _report('multi-node', 'reports only on rank 0')"),
    Wrong("task2_throughput", "report = _report('multi-node', 'reports only on rank 0')"),
    Wrong("task2_jobscript", "job_report = _report('jobscript-multi-node', 'resources of the task')"),
    # the mean of the ranks' own accuracies (the single-process value is printed by the run anyway);
    # the 2-rank run is a stand-in here (no_stretch_run)
    Wrong("stretch_per_class_test", "def per_class_accuracy(comm, model, dataset, n_class):\n    return [0.5] * 10\n"),
    Wrong("stretch_per_class_test", "def per_class_accuracy(comm, model, dataset, n_class):\n"
                                    "    return None if comm.rank == 1 else [0.6] * 10\n"),
    # 03 profiling (the SAXPY profile: 5 kernels of one name, 2.62 GB HtoD; the H100 training loop:
    # Kernel2 the most time, busy 0.033, longest gap 328.0 ms, host-bound)
    Wrong("q1_kernel_count_test", "n_kernels = con.execute('SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME').fetchone()[0]", ("5",)),
    Wrong("q1_kernel_count_test", "n_kernels = con.execute('SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()", ("5",)),
    Wrong("q1_kernel_count_test", "n_kernels = con.execute('SELECT COUNT(DISTINCT shortName) FROM "
          "CUPTI_ACTIVITY_KIND_KERNEL').fetchone()[0]", ("5",)),  # kernel names, not launches
    Wrong("q3_top_kernel_test", "top_kernel_name = mlp.execute('SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
          "JOIN StringIds s ON s.id = k.demangledName WHERE s.value LIKE \"%(%\"').fetchone()[0]", ("Kernel2",)),
    Wrong("q3_top_kernel_test", "top_kernel_name = 'the_fastest_kernel'", ("Kernel2",)),
    Wrong("q3_top_kernel_test", "top_kernel_name = mlp.execute('SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()[0]", ("Kernel2",)),
    Wrong("q3_top_kernel_test", "top_kernel_name = 'sgd_update'", ("Kernel2",)),  # the most launches, not the most time
    Wrong("q2_htod_bytes_test", "htod_bytes = con.execute('SELECT SUM(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY').fetchone()[0]", ("2621440000",)),
    Wrong("q2_htod_bytes_test", "htod_bytes = 2.62", ("2621440000",)),
    Wrong("q2_htod_bytes_test", "htod_bytes = con.execute('SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
          "WHERE copyKind = 1').fetchone()[0]", ("2621440000",)),  # copies counted, not bytes
    Wrong("q2_htod_bytes_test", "htod_bytes = 2", ("2621440000",)),  # whole gigabytes
    Wrong("q4_busy_fraction_test", "busy_fraction = 0.038", ("0.033",)),   # copies counted as busy
    Wrong("q4_busy_fraction_test", "busy_fraction = 0.03336", ("0.033",)),  # not rounded
    Wrong("q4_busy_fraction_test", "busy_fraction = 3.3", ("0.033",)),     # a percentage
    Wrong("q4_busy_fraction_test", "busy_fraction = 0.066", ("0.033",)),   # the span from the first kernel to the last
    Wrong("q4_busy_fraction_test", "busy_fraction = 0.035", ("0.033",)),   # overlapping kernels counted twice
    Wrong("q5_longest_gap_test", "longest_gap_ms = 328027885.0", ("328.0",)),  # nanoseconds
    Wrong("q5_longest_gap_test", "longest_gap_ms = 0.328027885", ("328.0",)),  # seconds
    Wrong("q6_bottleneck_test", "bottleneck = 'cpu'", ('= "host"', '== "host"')),
    Wrong("q6_bottleneck_test", "bottleneck = 'Host'", ('= "host"', '== "host"')),
    # (the planted CPU timeline: allreduce 4 ms on rank 0 and 124 ms on rank 1, iterations 374 ms each)
    Wrong("q7_allreduce_wait_test", "allreduce_ms = {0: 0.004, 1: 0.124}\nwaiting_rank = 1", ("124", "4.0")),  # s
    Wrong("q7_allreduce_wait_test", "allreduce_ms = {0: 374.0, 1: 374.0}\nwaiting_rank = 1", ("124",)),  # iterations
    Wrong("q7_allreduce_wait_test", "allreduce_ms = {'node0': 4.0, 'node1': 124.0}\nwaiting_rank = 'node1'", ()),
    Wrong("q7_allreduce_wait_test", "allreduce_ms = [4.0, 124.0]\nwaiting_rank = 1", ()),
    Wrong("q7_allreduce_wait_test", "allreduce_ms = {0: 4.0, 1: 124.0}\nwaiting_rank = 0", ()),
    Wrong("q7_allreduce_wait_test", "allreduce_ms = {0: 4.0, 1: 124.0}\nwaiting_rank = 'rank 1'", ()),
    # 04 scaling
    Wrong("q1_efficiency_test", SCALING + "efficiency_2 = 180.0 / 100.0", ("0.9",)),   # the speed-up
    Wrong("q1_efficiency_test", SCALING + "efficiency_2 = 90.0", ("0.9",)),            # in percent
    Wrong("q1_efficiency_test", SCALING + "efficiency_2 = None", ("0.9",)),
    # the speed-up of a 2-rank run slower than 1 rank (as on a busy machine): below 1 like an efficiency
    Wrong("q1_efficiency_test", SCALING + "results[2]['throughput'] = 90.0\nefficiency_2 = 90.0 / 100.0", ("0.45",)),
    Wrong("q2_gradient_bytes_test", SCALING + "L = 545098", ("2180392", "2,180,392")),  # elements
    Wrong("q2_gradient_bytes_test", SCALING + "L = 4.0 * 545098", ("2180392",)),        # a float
    Wrong("q2_traffic_test", SCALING + "def allreduce_traffic(nbytes, p):\n    return nbytes * (p - 1) / p\n"
          "traffic = {p: allreduce_traffic(L, p) for p in (1, 2, 4, 8, 16)}", ("4088235",)),
    Wrong("q2_traffic_test", SCALING + "traffic = {p: 2 * L * (p - 1) / p for p in (2, 4, 8, 16)}", ()),
    Wrong("q2_traffic_test", SCALING + "traffic = {p: 2 * L * p for p in (1, 2, 4, 8, 16)}", ()),
    Wrong("q3_busbw_test", SCALING + "busbw_training = traffic[2] / results[2]['phases_s']['allreduce']",
          ("0.2180392",)),  # bytes/s
    Wrong("q3_busbw_test", SCALING + "busbw_training = -1.0", ("0.2180392",)),
    Wrong("q4_share_test", SCALING + "share_of_p2p = 0.5 / busbw_training", ("0.4360784",)),  # upside down
    Wrong("q4_share_test", SCALING + "share_of_p2p = busbw_training / 1.0", ("0.4360784",)),  # allreduce entry
    # B = 0.125 GB/s: predicted 2180392 / 1.25e8 = 0.0174 s, measured 0.01 s
    Wrong("q5_prediction_test", SCALING + "predicted_allreduce_s = traffic[2] / 0.125\n"
          "measured_over_predicted = 0.01 / predicted_allreduce_s", ("0.0174",)),  # GB/s, not bytes/s
    Wrong("q5_prediction_test", SCALING + "predicted_allreduce_s = 17.44\n"
          "measured_over_predicted = 0.01 / 0.01744", ("0.0174",)),  # ms, and the ratio of other numbers
    Wrong("q5_prediction_test", SCALING + "predicted_allreduce_s = 0.01744\n"
          "measured_over_predicted = predicted_allreduce_s / 0.01", ("0.573",)),  # upside down
    Wrong("q5_prediction_test", SCALING + "predicted_allreduce_s = None\nmeasured_over_predicted = 1.0", ()),
    Wrong("q5_prediction_test", SCALING + "predicted_allreduce_s = 17.44\n"
          "measured_over_predicted = 0.01 / 17.44", ("0.0174",)),  # in ms, the ratio from it
    # 08 predict (the hidden tests' named mistakes: tests/test_scaling_model.py)
    Wrong("q1_fit_test", PREDICT + "B_eff = fitted.coefficients['seconds_per_byte']", ()),   # not inverted
    Wrong("q1_fit_test", PREDICT + "alpha = alpha * 1e3 + 1.0", ()),                           # milliseconds
    Wrong("q1_fit_test", PREDICT + "def ring_terms(p, nbytes):\n    return (2 * p, 2 * nbytes)\n", ()),
    Wrong("q1_fit_test", PREDICT + "def ring_terms(p, nbytes):\n    return 2 * (p - 1) / p * nbytes\n", ()),
    Wrong("q1_fit_test", PREDICT + "alpha = None", ()),
    Wrong("q2_prediction_test", PREDICT + "predicted_p4 = {s: predict_allreduce(4, s, alpha, B_eff) for s in sizes[1:]}", ()),
    Wrong("q2_prediction_test", PREDICT + "def predict_allreduce(p, nbytes, alpha, bandwidth):\n"
          "    return 2 * p * alpha + 2 * nbytes / bandwidth\n", ()),
    Wrong("q2_prediction_test", PREDICT + "predicted_p4 = [predict_allreduce(4, s, alpha, B_eff) for s in sizes]", ()),
    Wrong("q3_seed001_test", PREDICT + "B_seed = 8.5", ("1140850688", "1.14e+09")),            # Gibit/s as it is
    Wrong("q3_seed001_test", PREDICT + "seed001_predicted = {8: 0.19, 16: 0.25}", ("0.124", "0.168")),   # GPUs
    Wrong("q3_seed001_test", PREDICT + "seed001_predicted = {2: 123.7, 4: 168.5}", ("0.124", "0.168")),  # ms
    Wrong("q3_seed001_test", PREDICT + "seed001_predicted = {2: 0.2, 4: 0.1}", ("0.124", "0.168")),
    Wrong("q4_efficiency_test", PREDICT + "efficiency_003 = {g: 100 * e for g, e in efficiency_003.items()}", ("0.964",)),
    Wrong("q4_efficiency_test", PREDICT + "efficiency_003 = {g // 8: e for g, e in efficiency_003.items()}", ("0.964",)),
    Wrong("q4_efficiency_test", PREDICT + "efficiency_003 = {g: _step(g) / _step(8) for g in GPUS_003}", ("0.964",)),
    # 05 tuning
    Wrong("q1_gpu_only_test", "gpu_only_levers = set(tuning.LEVER_NAMES)", ("'autotune', 'cudnn'", "'cudnn', 'autotune'")),
    Wrong("q1_gpu_only_test", "gpu_only_levers = {'cudnn', 'multiprocess'}", ("'autotune', 'cudnn'", "'cudnn', 'autotune'")),
    Wrong("q1_gpu_only_test", "gpu_only_levers = set()", ("'autotune', 'cudnn'", "'cudnn', 'autotune'")),
    Wrong("q1_gpu_only_test", "gpu_only_levers = {'cuDNN'}", ("'autotune', 'cudnn'", "'cudnn', 'autotune'")),
    Wrong("q1_gpu_only_test", "gpu_only_levers = {'cudnn', 'autotune', 'fp16'}", ()),  # FP16 runs on a CPU too
    Wrong("make_iterator_test", "import chainer\n"
          "def make_iterator(dataset, batchsize):\n"
          "    return chainer.iterators.SerialIterator(dataset, batchsize)\n", ()),
    Wrong("make_iterator_test", "import chainer\n"
          "def make_iterator(dataset, batchsize):\n"
          "    return chainer.iterators.MultiprocessIterator(dataset, 32, n_processes=1)\n", ()),
    Wrong("make_iterator_test", "import chainer\n"
          "def make_iterator(dataset, batchsize):\n"
          "    return chainer.iterators.MultiprocessIterator(dataset, batchsize)\n", ()),  # Chainer's own count
    Wrong("speedup_test", "my_speedup = 1.3\nmy_conclusion = 'slower'", ()),
    Wrong("speedup_test", "my_speedup = 1.3\nmy_conclusion = 'yes'", ()),
    Wrong("speedup_test", "my_speedup = -0.7\nmy_conclusion = 'slower'", ()),
    # 06 large batch
    Wrong("scaled_lr_test", "def scaled_lr(base_lr, base_batch, batch):\n    return base_lr * base_batch / batch\n",
          ("0.32", "12.8")),
    Wrong("scaled_lr_test", "def scaled_lr(base_lr, base_batch, batch):\n    return base_lr * (batch / base_batch) ** 0.5\n",
          ("0.32", "12.8")),
    Wrong("warmup_extension_test", "trace = [-1] + [0.8] * 12", ("0.1375", "0.3125")),   # lr not set before update 0
    Wrong("warmup_extension_test", "trace = [0.8] * 13", ("0.1375", "0.3125")),          # no warmup
    Wrong("warmup_extension_test", "trace = [0.1 + 0.07 * i for i in range(13)]", ("0.1375",)),  # no plateau
    Wrong("measure_gain_test", "result = {'batches': [32, 512], 'accuracy': {'fixed': [0.9, 0.4], "
          "'scaled': [0.9, 0.7], 'scaled+warmup': [0.9, 0.8]}}\n"
          "rule_gain = 0.4 - 0.8\nwarmup_gain = 0.8 - 0.7", ("0.4",)),  # subtraction the wrong way
    Wrong("measure_gain_test", "result = {'batches': [32, 512], 'accuracy': {'fixed': [0.9, 0.4], "
          "'scaled': [0.9, 0.7], 'scaled+warmup': [0.9, 0.8]}}\n"
          "rule_gain = 40.0\nwarmup_gain = 10.0", ("0.4",)),  # percentage points
]

# Answers judged right by the visible test too (the instructor's answer cells), for the questions
# whose answer cells need nothing heavier than the sample profile.
RIGHT = {
    "00_setup.ipynb": ["q1_total_batch_test", "q2_parallelism_test", "q3_lr_test"],
    "01_multi_gpu.ipynb": ["q1_lr_test"],
    "02_multi_node.ipynb": ["q1_ranks_test"],
    "03_profiling.ipynb": ["q1_kernel_count_test", "q2_htod_bytes_test", "q3_top_kernel_test",
                           "q4_busy_fraction_test", "q5_longest_gap_test", "q6_bottleneck_test",
                           "q7_allreduce_wait_test"],
}

STUDENT = _graded_cells("notebooks")


#: The whole test set's per-class accuracy, as planted for the stretch's test.
WHOLE = [0.6] * 10


def _two_ranks_stand_in(function, np=2, timeout=180, test=None):
    """rank_metric.run_on_ranks without MPI: `function` on two stand-in ranks; None when it raises
    (a rank that fails writes no result)."""
    from types import SimpleNamespace
    try:
        per_rank = [function(SimpleNamespace(rank=r, size=2), None, None, 10) for r in range(2)]
    except Exception:
        return None
    return {"ranks": 2, "per_rank": [None if v is None else [float(x) for x in v] for v in per_rank], "single": WHOLE}


@pytest.fixture(autouse=True)
def no_stretch_run(monkeypatch):
    """02's stretch test runs the student's function on 2 ranks: here on two stand-in ranks."""
    from handson_lib.experiments import rank_metric
    monkeypatch.setattr(rank_metric, "run_on_ranks", _two_ranks_stand_in)
    monkeypatch.setattr(rank_metric, "whole_test_set", lambda test=None: list(WHOLE))
    monkeypatch.setattr(rank_metric, "graders_test_set", lambda: None)
    from handson_lib.checking import notebook
    monkeypatch.setattr(notebook, "answer_source", lambda function: function)   # the function itself, here


def _namespace():
    con = sqlite3.connect(profiling.sample_profile().as_uri() + "?mode=ro", uri=True)
    mlp = sqlite3.connect(profiling.sample_profile("mlp").as_uri() + "?mode=ro", uri=True)
    from handson_lib.experiments import tuning  # imports chainer: only when a case runs
    from test_cpu_timeline import planted_result  # notebook 03's `cpu_run`, two planted ranks
    return {"sqlite3": sqlite3, "profiling": profiling, "checks": checks, "tuning": tuning, "con": con, "mlp": mlp,
            "_results": _results, "_report": _report, "cpu_run": planted_result(),
            "_planted_measured": _planted_measured}


def _shows(message, value):
    """Whether `value` appears in `message` as a whole number or word, not as a piece of another."""
    return re.search(rf"(?<![\w.]){re.escape(value)}(?![\w])", message) is not None


def test_every_graded_test_cell_has_a_wrong_answer():
    graded = _graded_cells("solutions")
    assert graded, "no graded cell found in solutions/"
    missing = sorted(set(graded) - {w.grade_id for w in WRONG})
    assert not missing, f"graded test cells without a wrong answer in WRONG: {missing}"
    assert set(graded) == set(STUDENT), "notebooks/ is out of date: run `handson build`"


def test_student_test_cells_hide_the_hidden_tests():
    for grade_id, (_, source) in STUDENT.items():
        assert "HIDDEN TESTS" not in source, grade_id


@pytest.mark.parametrize("case", WRONG, ids=[f"{w.grade_id}-{i}" for i, w in enumerate(WRONG)])
def test_visible_test_rejects_the_wrong_answer(case):
    _, cell = STUDENT[case.grade_id]
    ns = _namespace()
    exec(case.answer, ns)
    with pytest.raises(AssertionError) as failure:
        exec(cell, ns)
    message = str(failure.value)
    assert message.strip(), f"{case.grade_id}: a failure without a message saying what was expected"
    for secret in case.secrets:
        assert not _shows(message, secret), f"{case.grade_id}: the message gives away {secret!r}: {message}"


@pytest.mark.parametrize("notebook", sorted(RIGHT))
def test_visible_tests_accept_the_solution(notebook):
    ns = _namespace()
    for source in _answer_cells(notebook):
        exec(source, ns)
    for grade_id in RIGHT[notebook]:
        exec(STUDENT[grade_id][1], ns)


def _assigned(source):
    """Names an answer cell sets at its top level (assignments, functions, classes), in order."""
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names += [t.id for t in ([target] if isinstance(target, ast.Name) else getattr(target, "elts", []))
                          if isinstance(t, ast.Name)]
    return list(dict.fromkeys(names))


def _read(source):
    """Names a graded cell reads (its magics left out)."""
    code = re.sub(r"^\s*[%!].*$", "", source, flags=re.M)
    return {node.id for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Name)}


def _solution_answer_cells():
    """(notebook path, its cells, index, cell, grade id) of every answer cell of the solution
    notebooks, the tasks' report cells left out."""
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        for i, cell in enumerate(cells):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("solution") and not meta.get("grade_id", "").startswith("task"):
                yield path, cells, i, cell, meta["grade_id"]


def _asked():
    """{answer cell's grade id: the variables it must set}: what the graded cells after it (up to the
    next answer cell) read of what the solution sets; a markdown answer sets none. Derived from the
    notebooks, so a new notebook needs no entry here."""
    asked = {}
    for _, cells, i, cell, grade_id in _solution_answer_cells():
        if cell["cell_type"] != "code":
            asked[grade_id] = []
            continue
        read = set()
        for later in cells[i + 1:]:
            later_meta = later.get("metadata", {}).get("nbgrader", {})
            if later_meta.get("solution"):
                break
            if later_meta.get("grade") and later["cell_type"] == "code":
                read |= _read("".join(later["source"]))
        asked[grade_id] = [n for n in _assigned("".join(cell["source"])) if n in read]
    return asked


ASKED = _asked()


def test_questions_name_their_variables():
    """The markdown that asks a question (the nearest above its answer cell) names every variable
    the answer cell must set, and the answer cell sets it."""
    seen = set()
    for path, cells, i, cell, grade_id in _solution_answer_cells():
        seen.add(grade_id)
        asked = next("".join(c["source"]) for c in reversed(cells[:i]) if c["cell_type"] == "markdown")
        source = "".join(cell["source"])
        assert ASKED[grade_id] or cell["cell_type"] == "markdown", f"no graded cell reads what {grade_id} sets"
        for name in ASKED[grade_id]:
            assert re.search(rf"^(def |class )?{name}\b", source, re.M), f"{grade_id} does not set {name}"
            assert f"`{name}" in asked, f"{path.name}: the question of {grade_id!r} does not name `{name}`"
    assert seen == set(ASKED)


# ----------------------------------------------------------------------------- the released stubs

def _student_cells(notebook):
    """(grade_id or None, is answer, is graded, source) of every code cell of the student copy."""
    nb = json.loads((ROOT / "notebooks" / notebook).read_text())
    return [(c["metadata"].get("nbgrader", {}).get("grade_id"), bool(c["metadata"].get("nbgrader", {}).get("solution")),
             bool(c["metadata"].get("nbgrader", {}).get("grade")), "".join(c["source"]))
            for c in nb["cells"] if c["cell_type"] == "code"]


def _measured(notebook, ns):
    """What the notebook's measurements (not executed here) hand its graded cells, planted; and what
    its cheap cells derive from the student's stubs, computed from them."""
    if notebook == "02_multi_node.ipynb":
        return {}   # the stretch's test runs the stub on two stand-in ranks (no_stretch_run)
    if notebook == "04_scaling.ipynb":
        return {"results": _results(), "SETTINGS": {"model": "cnn"},
                "bench": {"results": [{"path": "allreduce", "busbw_GBps": 1.0}, {"path": "p2p", "busbw_GBps": 0.5}]}}
    if notebook == "05_tuning.ipynb":
        return {"comparison": None}
    if notebook == "08_predict.ipynb":
        from handson_lib.experiments.allreduce import model, seed_link
        measured = _planted_measured()
        return {"measured": measured, "sizes": sorted({s for _, s, _ in measured[2]}), "model": model,
                "seed_link": seed_link, "s3": seed_link.SEED_003, "GPUS_003": (8, 16, 32, 64, 128, 256, 512, 1024),
                "L_001": seed_link.SEED_001.gradient_bytes, "local_001": 0.034, "T_node": 0.232}
    if notebook == "06_large_batch.ipynb":
        from handson_lib.experiments import large_batch as lb
        try:
            trace = lb.lr_trace(ns["WarmupScaledLR"], base_lr=0.1, base_batch=32, batch=256, warmup_iterations=10,
                                iterations=13)
        except Exception:
            trace = None
        return {"lb": lb, "trace": trace, "result": {"batches": [32, 512], "accuracy": {
            "fixed": [0.9, 0.4], "scaled": [0.9, 0.7], "scaled+warmup": [0.9, 0.8]}}}
    return {}


@pytest.mark.parametrize("notebook", sorted({nb for nb, _ in STUDENT.values()}))
def test_released_stubs_fail_every_graded_cell(notebook, skeleton_reports):
    """The released notebook does not pass a test by accident: with every answer cell as released
    (its stub), each graded cell fails, and on the student's answer (an assertion, or a name the
    question asks for), not on something the test itself lacks. No measurement runs: what the
    notebook measures is planted, the skeleton scripts' reports are their real self-checks
    (conftest.skeleton_reports)."""
    cells = _student_cells(notebook)
    ns = _namespace()
    ns.update({"01_multi_gpu.ipynb": {"report": skeleton_reports["multi-gpu"],
                                      "job_report": skeleton_reports["jobscript-multi-gpu"]},
               "02_multi_node.ipynb": {"report": skeleton_reports["multi-node"],
                                       "mnist_report": skeleton_reports["mnist-multi-node"],
                                       "job_report": skeleton_reports["jobscript-multi-node"]}}.get(notebook, {}))
    asked = {name for grade_id, answer, _, _ in cells if answer for name in ASKED.get(grade_id, [])}
    for grade_id, answer, _, source in cells:
        if answer:
            try:
                exec(source, ns)   # a stub may stop with an error, as its cell would in the kernel
            except Exception:
                pass
    ns.update(_measured(notebook, ns))
    graded = [(grade_id, source) for grade_id, _, is_graded, source in cells if is_graded]
    assert graded
    passed, off_target = [], []
    for grade_id, source in graded:
        try:
            exec(source, dict(ns))
        except AssertionError:
            continue
        except NameError as error:
            if error.name in asked:
                continue
            off_target.append(f"{grade_id}: {error!r}")
        except Exception as error:
            off_target.append(f"{grade_id}: {error!r}")
        else:
            passed.append(grade_id)
    assert not passed, f"graded cells passing with the released stubs: {passed}"
    assert not off_target, f"graded cells failing on something else than the student's answer: {off_target}"


@pytest.mark.parametrize("edition", ["notebooks", "notebooks/ja"])
def test_no_recorded_output_of_04_gives_exercise_2s_answer(edition):
    """Exercise 2's L (the gradient bytes of the course's model) appears in no markdown cell, the
    recorded outputs included: a student reading ahead does not find it."""
    from handson_lib.autograder import answers
    nb = json.loads((ROOT / edition / "04_scaling.ipynb").read_text())
    model = re.search(r'model="(\w+)"', "".join("".join(c["source"]) for c in nb["cells"])).group(1)
    value = answers.gradient_bytes(model)
    traffic = [answers.allreduce_traffic_bytes(value, p) for p in (4, 8, 16)]   # Exercise 2's traffic
    secrets = {str(value), f"{value:,}", *(f"{t:,.0f}" for t in traffic), *(f"{t:.0f}" for t in traffic)}
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            text = "".join(cell["source"])
            assert not [s for s in secrets if s in text], text[:300]


def test_every_notebook_asks_its_questions_in_order():
    """Question N comes after Question N-1, in both languages, and each answer cell's grade id
    carries its question's number (03 asked Question 3 before Question 2)."""
    for folder, label in (("solutions", r"\*\*Question (\d+)\.\*\*"), ("notebooks/ja", r"\*\*問題 (\d+)\.\*\*")):
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            cells = json.loads(path.read_text())["cells"]
            asked, ids = [], []
            for cell in cells:
                asked += [int(n) for n in re.findall(label, "".join(cell["source"]))]
                grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id", "")
                if asked and cell["metadata"].get("nbgrader", {}).get("solution") and re.match(r"q\d+_", grade_id):
                    ids.append((int(grade_id[1:].split("_")[0]), asked[-1] if asked else None, grade_id))
            assert asked == list(range(1, len(asked) + 1)), (path.name, asked)
            assert all(number == question for number, question, _ in ids), (path.name, ids)


#: Wrong answers a visible test lets pass by design (it would give the answer away otherwise):
#: (grade_id of the test cell, the wrong answer). The grader's hidden tests reject each, and the
#: question says that its visible test is partial.
PARTIAL = [
    ("q1_lr_test", "lr_after_updater = 0.05\nimages_per_update = 128"),   # 01: the seed's 2 GPUs, not 4
    ("q2_parallelism_test", 'needed_parallelism = "data"'),
]


@pytest.mark.parametrize("grade_id, answer", PARTIAL, ids=[g for g, _ in PARTIAL])
def test_a_question_whose_visible_test_is_partial_says_so(grade_id, answer):
    """01's Question 1 took the seed's 2-GPU numbers silently, where it asks about 4 GPUs."""
    notebook, _ = STUDENT[grade_id]
    exec(answer + "\n" + STUDENT[grade_id][1], _namespace())          # passes the visible test
    with pytest.raises(AssertionError):
        exec(answer + "\n" + _graded_cells("solutions")[grade_id][1], _namespace())   # not the grader's
    cells = json.loads((ROOT / "solutions" / notebook).read_text())["cells"]
    answer_id = grade_id.removesuffix("_test")
    at = next(i for i, c in enumerate(cells) if c["metadata"].get("nbgrader", {}).get("grade_id") == answer_id)
    question = next("".join(c["source"]) for c in reversed(cells[:at]) if c["cell_type"] == "markdown")
    assert re.search(r"visible\s+test\s+(only\s+checks|checks\s+only)", question), question[-300:]
