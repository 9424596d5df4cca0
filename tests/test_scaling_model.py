"""Issue 51, the model's part: the allreduce's cost fitted on measurements (alpha and the wire's
bandwidth, with their intervals), the held-out prediction, and seed 001's 2- and 4-node allreduce
from its own link (hierarchical: p = nodes)."""

import numpy
import pytest

from handson_lib.autograder import answers
from handson_lib.experiments.allreduce import model
from handson_lib.experiments.allreduce.seed_link import INTRA_NODE_LINK, SEED_001

ALPHA, BANDWIDTH = 50e-6, 110e6          # a 1 Gbit/s link as the local cluster shapes it
SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 102_228_384]


def _ring(p, nbytes):
    return answers.hierarchical_allreduce_seconds(p, nbytes, ALPHA, BANDWIDTH)


def _measured(ps, noise=0.03, seed=0):
    rng = numpy.random.default_rng(seed)
    return [(p, s, _ring(p, s) * (1 + rng.uniform(-noise, noise))) for p in ps for s in SIZES for _ in range(3)]


def test_the_fit_finds_the_links_alpha_and_bandwidth_within_its_intervals():
    fitted = model.fit(_measured([2, 3]), answers.ring_allreduce_terms, answers.RING_COEFFICIENTS)
    low, high = fitted.intervals["alpha"]
    assert low <= ALPHA <= high
    low, high = fitted.intervals["seconds_per_byte"]
    assert low <= 1 / BANDWIDTH <= high
    assert fitted.worst_residual() < 0.05
    assert "95 % interval" in fitted.table() and "alpha" in fitted.table()


def test_fitted_on_2_and_3_processes_it_predicts_4_within_15_percent():
    fitted = model.fit(_measured([2, 3], noise=0.05), answers.ring_allreduce_terms, answers.RING_COEFFICIENTS)
    for nbytes in SIZES:
        assert fitted.predict(4, nbytes) == pytest.approx(_ring(4, nbytes), rel=0.15)


@pytest.mark.parametrize("points, says", [
    ([(2, 1 << 20, 0.01), (3, 1 << 20, 0.02), (2, 1 << 20, 0.011)], "one message size"),
    ([(1, 1 << 20, 0.01), (1, 4096, 0.001), (1, 1 << 20, 0.011)], "cannot tell the coefficients"),
    ([(2, 1 << 20, 0.01), (3, 4096, 0.001)], "cannot fit 2 coefficients"),
    ([(2, 1 << 20, 0.0), (3, 4096, 0.001), (2, 4096, 0.001)], "must be positive"),
])
def test_measurements_that_cannot_decide_the_fit_are_refused_with_what_to_measure(points, says):
    with pytest.raises(model.FitError, match=says):
        model.fit(points, answers.ring_allreduce_terms, answers.RING_COEFFICIENTS)


def test_seed_001s_allreduce_from_its_own_link_within_30_percent():
    """The ring between the nodes at the seed's point-to-point rate, one process per node, and
    what happens inside a node at the assumed PCIe rate."""
    local = answers.intra_node_seconds(SEED_001.gradient_bytes, SEED_001.gpus_per_node, INTRA_NODE_LINK)
    for nodes, seconds in SEED_001.measured_seconds:
        predicted = answers.hierarchical_allreduce_seconds(nodes, SEED_001.gradient_bytes, 0.0,
                                                           SEED_001.p2p_bytes_per_s(), local)
        assert predicted == pytest.approx(seconds, rel=0.30), (nodes, predicted, seconds)
        # Bits taken for bytes: eight times off.
        in_bits = answers.hierarchical_allreduce_seconds(nodes, SEED_001.gradient_bytes, 0.0,
                                                         SEED_001.p2p_bytes_per_s() * 8, local)
        assert in_bits != pytest.approx(seconds, rel=0.30)


def test_the_step_model_predicts_throughput_and_efficiency():
    curve = model.scaling([1, 2, 4, 1024], compute=0.1, allreduce_of=lambda p: 0.0 if p == 1 else 0.05,
                          batch_per_process=32)
    assert curve[1] == pytest.approx((320.0, 1.0))
    assert curve[2][1] == pytest.approx(0.1 / 0.15)
    assert curve[1024][0] == pytest.approx(1024 * 32 / 0.15)
    overlapped = model.scaling([2], compute=0.1, allreduce_of=lambda p: 0.05, batch_per_process=32, overlap=0.05)
    assert overlapped[2][1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="overlap"):
        model.step_seconds(0.1, 0.05, overlap=0.2)


def test_the_benchmarks_records_become_points_only_where_the_allreduce_was_right(tmp_path):
    """What the ranks returned is data: a wrong allreduce, or a record without a time, is no point."""
    result = {"ranks": 3, "results": [
        {"path": "mpi4py", "bytes": 4096, "time_s": 1e-4, "correct": True},
        {"path": "mpi4py", "bytes": 1 << 20, "time_s": 1e-2, "correct": False},
        {"path": "mpi4py", "bytes": 1 << 22, "time_s": None, "correct": True},
        {"path": "p2p", "bytes": 4096, "time_s": 5e-5, "correct": True}]}
    assert model.points_of(result) == [model.Point(3, 4096.0, 1e-4)]
    fitted = model.fit(_measured([2, 3]), answers.ring_allreduce_terms, answers.RING_COEFFICIENTS)
    unseen = [model.Point(p, s, t) for p, s, t in _measured([4])]
    rows = model.held_out(fitted, unseen)
    assert all(abs(error) < 0.15 for _, _, error in rows)
    model.fit_figure(fitted, unseen).savefig(tmp_path / "fit.png")
    assert (tmp_path / "fit.png").stat().st_size > 1000


def test_the_fit_option_is_read_and_refused_clearly():
    from handson_lib.experiments.allreduce.command import parse_fit
    assert parse_fit("2,3:4") == ([2, 3], [4])
    assert parse_fit("2,3") == ([2, 3], [])
    for bad in ("1,2:3", "two", ":4"):
        with pytest.raises(ValueError, match="--fit"):
            parse_fit(bad)


@pytest.mark.parametrize("mistake, says", [
    (lambda n, b, local: answers.hierarchical_allreduce_seconds(4 * n, SEED_001.gradient_bytes, 0.0, b, local),
     "p counted in GPUs"),
    (lambda n, b, local: answers.hierarchical_allreduce_seconds(n, SEED_001.gradient_bytes, 0.0, 8 * b, local),
     "bits taken for bytes"),
    (lambda n, b, local: local + 2 * (n - 1) * SEED_001.gradient_bytes / b, "the (p-1)/p factor left out"),
    (lambda n, b, local: answers.hierarchical_allreduce_seconds(n, SEED_001.gradient_bytes, 0.0, b), "inside of a node"),
])
def test_each_planted_mistake_of_the_prediction_is_named(mistake, says):
    bandwidth = SEED_001.p2p_bytes_per_s()
    local = answers.intra_node_seconds(SEED_001.gradient_bytes, SEED_001.gpus_per_node, INTRA_NODE_LINK)
    for nodes in (2, 4):
        right = answers.hierarchical_allreduce_seconds(nodes, SEED_001.gradient_bytes, 0.0, bandwidth, local)
        mistakes = answers.allreduce_prediction_mistakes(nodes, SEED_001.gradient_bytes, 0.0, bandwidth, local)
        assert answers.named_mistake(right, mistakes) is None
        assert says in answers.named_mistake(mistake(nodes, bandwidth, local), mistakes)
