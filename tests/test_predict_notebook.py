"""Notebook 08 (issue 51): its grade cells, hidden tests included, as the grader runs them: the
solution's answers earn every point, and each planted mistake fails with a message that names it.
The measurements are planted (the notebook's own run is tests/test_notebooks.py's)."""

import json
import textwrap

import pytest

from conftest import ROOT
from test_questions import PREDICT, _planted_measured

NOTEBOOK = ROOT / "solutions" / "08_predict.ipynb"


def _grade_cells():
    """{grade id: the whole source of the grade cell} of the instructor's notebook (hidden tests in)."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    return {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"]) for c in cells
            if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("grade")}


GRADE = _grade_cells()


def _run(grade_id, answers_code):
    namespace = {"_planted_measured": _planted_measured}
    exec(PREDICT + textwrap.dedent(answers_code), namespace)
    exec(GRADE[grade_id], namespace)


def test_the_solution_earns_every_point():
    assert sorted(GRADE) == ["q1_fit_test", "q2_prediction_test", "q3_seed001_test", "q4_efficiency_test"]
    for grade_id in GRADE:
        _run(grade_id, "")


# (grade id, the planted mistake, words the failure must say)
MISTAKES = [
    # the fit
    ("q1_fit_test", """
        def ring_terms(p, nbytes):
            return (2 * (p - 1), 2 * (p - 1) * nbytes)
        """, "the (p-1)/p factor left out"),
    ("q1_fit_test", """
        def ring_terms(p, nbytes):
            return ((p - 1), (p - 1) / p * nbytes)
        """, "the factor 2 left out"),
    ("q1_fit_test", "B_eff = 8 * B_eff", "B_eff in bits per second"),
    ("q1_fit_test", """
        _one = model.fit(measured[2], ring_terms, ("alpha", "seconds_per_byte"))
        alpha, B_eff = _one.coefficients["alpha"], 1 / _one.coefficients["seconds_per_byte"]
        """, "fitted on p = 2 alone"),
    ("q1_fit_test", """
        _p, _s, _t = max(measured[3], key=lambda point: point[1])
        alpha, B_eff = 0.0, 2 * (_p - 1) / _p * _s / _t
        """, "a fit on one message size"),
    # the held-out prediction
    ("q2_prediction_test", """
        def predict_allreduce(p, nbytes, alpha, bandwidth):
            return 2 * (p - 1) * alpha + 2 * (p - 1) * nbytes / bandwidth
        """, "the (p-1)/p factor left out"),
    ("q2_prediction_test", """
        def predict_allreduce(p, nbytes, alpha, bandwidth):
            return 2 * (p - 1) * alpha + 2 * (p - 1) / p * nbytes * 8 / bandwidth
        """, "bits for bytes"),
    ("q2_prediction_test", "predicted_p4 = {s: predict_allreduce(3, s, alpha, B_eff) for s in sizes}",
     "predicted for p = 3, not 4"),
    # seed 001
    ("q3_seed001_test", "B_seed = 8.5 * 2 ** 30", "bits for bytes"),
    ("q3_seed001_test", "B_seed = 8.5e9 / 8", "Gbit/s taken for Gibit/s"),
    ("q3_seed001_test", "seed001_predicted = {n: local_001 + predict_allreduce(4 * n, L_001, 0.0, B_seed) for n in (2, 4)}",
     "p counted in GPUs"),
    ("q3_seed001_test", "seed001_predicted = {n: local_001 + predict_allreduce(n, L_001, 0.0, B_seed * 8) for n in (2, 4)}",
     "bits taken for bytes"),
    ("q3_seed001_test", "seed001_predicted = {n: local_001 + 2 * (n - 1) * L_001 / B_seed for n in (2, 4)}",
     "the (p-1)/p factor left out"),
    ("q3_seed001_test", "seed001_predicted = {n: predict_allreduce(n, L_001, 0.0, B_seed) for n in (2, 4)}",
     "the inside of a node left out"),
    # seed 003
    ("q4_efficiency_test", """
        def _step(g):
            return T_node + predict_allreduce(g, s3.allreduce_bytes, seed_link.IB_STEP_SECONDS, s3.adapters_bytes_per_s())
        efficiency_003 = {g: _step(8) / _step(g) for g in GPUS_003}
        """, "p counted in GPUs"),
    ("q4_efficiency_test", """
        def _step(g):
            return T_node + predict_allreduce(g // 8, s3.allreduce_bytes, seed_link.IB_STEP_SECONDS, 8 * s3.adapters_bytes_per_s())
        efficiency_003 = {g: _step(8) / _step(g) for g in GPUS_003}
        """, "bits for bytes"),
    ("q4_efficiency_test", """
        def _step(g):
            return T_node + predict_allreduce(g // 8, 2 * s3.allreduce_bytes, seed_link.IB_STEP_SECONDS, s3.adapters_bytes_per_s())
        efficiency_003 = {g: _step(8) / _step(g) for g in GPUS_003}
        """, "FP32 gradients"),
]


@pytest.mark.parametrize("grade_id, answer, says", MISTAKES, ids=[f"{g}-{s}" for g, _, s in MISTAKES])
def test_each_planted_mistake_is_caught_and_named(grade_id, answer, says):
    with pytest.raises(AssertionError) as failure:
        _run(grade_id, answer)
    assert says in str(failure.value), str(failure.value)


def test_a_fit_on_one_size_is_refused_in_the_students_own_cell_with_what_to_measure():
    namespace = {"_planted_measured": _planted_measured}
    exec(PREDICT, namespace)
    one_size = [point for point in namespace["measured"][2] + namespace["measured"][3] if point[1] == 102228384]
    with pytest.raises(ValueError, match="one message size"):
        namespace["model"].fit(one_size, namespace["ring_terms"], ("alpha", "seconds_per_byte"))
