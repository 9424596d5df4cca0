"""Chainer's own tests (v7.8.1, ../shared/upstream) as the oracle of the course's patches, in CI: the
modules the course, its notebooks and a student's plausible code use (tests/upstream_tier.py,
CI_SUBSET) pass on the second stack (Python 3.12 + NumPy 2) wherever they pass on 3.11 + NumPy
1.23.5, but for the failures KNOWN explains. `make test-upstream` runs the whole CPU suite on 3.11,
3.12 and 3.13."""

import pytest

from conftest import ROOT
import upstream_tier

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stacks():
    found = upstream_tier.default_stacks()
    if "3.12" not in found:
        pytest.skip("no second stack at .venv-py312: `make second-stack` builds it")
    if upstream_tier.tarball() is None:
        pytest.fail(f"{upstream_tier.TARBALL} not found beside this checkout (../shared/upstream/) nor at "
                    "$HANDSON_UPSTREAM_TESTS", pytrace=False)
    return {name: found[name] for name in ("3.11", "3.12")}


def test_what_passes_on_numpy_1_passes_on_numpy_2(stacks, tmp_path):
    results = upstream_tier.run_stacks(stacks, list(upstream_tier.CI_SUBSET), tmp_path, workers=2)
    base, other = results["3.11"]["outcomes"], results["3.12"]["outcomes"]
    counts = upstream_tier.counts(base)
    assert sum(c["passed"] for c in counts.values()) > 800, counts        # the suite really ran
    assert {"functions", "links", "optimizers", "serializers", "iterators", "training", "chainermn"} <= set(counts)
    lost, explained = upstream_tier.regressions(base, other)
    assert lost == [], f"{len(lost)} upstream test(s) pass on NumPy 1 and not on NumPy 2: {lost[:20]}"
    assert all(upstream_tier.known_reason(t) for t in explained), explained


def test_a_regression_is_found_and_a_known_one_explained():
    base = {"a::x": "passed", "b::y": "passed", "c::z": "failed",
            "tests.chainer_tests.serializers_tests.test_npz.TestDictionarySerializer::test_serialize_none": "passed"}
    other = {"a::x": "passed", "b::y": "failed", "c::z": "failed",
             "tests.chainer_tests.serializers_tests.test_npz.TestDictionarySerializer::test_serialize_none": "failed"}
    lost, explained = upstream_tier.regressions(base, other)
    assert lost == ["b::y"] and list(explained) == [
        "tests.chainer_tests.serializers_tests.test_npz.TestDictionarySerializer::test_serialize_none"]


def test_the_ci_subset_names_files_of_the_suite(tmp_path):
    suite = upstream_tier.extract(tmp_path)
    assert [p for p in upstream_tier.CI_SUBSET if not (suite / p).is_file()] == []
    assert ROOT not in suite.parents, "the suite runs outside the project"
