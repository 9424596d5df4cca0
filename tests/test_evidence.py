"""What the grader measures itself of a run (handson_lib.checking.evidence): the trained model rebuilt
from the course's classes and evaluated on images the run never trained on; whatever a run left
behind is read as untrusted data."""

import os

import numpy
import pytest

from handson_lib.checking import evidence
from handson_lib.runtime import models
from handson_lib.verdicts import records

DATASET = {"name": "synthetic", "n_train": 256, "n_test": 64, "n_class": 10, "shape": [3, 32, 32], "seed": 0,
           "source": None}


def saved_model(path, model):
    from chainer import serializers
    target = {}
    serializers.DictionarySerializer(target).save(model)
    numpy.savez(path, **{k: v for k, v in target.items() if v is not None})
    return path


def test_an_untrained_model_is_measured_at_chance_whatever_the_record_says(tmp_path):
    import chainer
    model = models.SmallCNN(10)
    model(numpy.zeros((1, 3, 32, 32), numpy.float32))   # initialise the lazy layers
    path = saved_model(tmp_path / "model.npz", model)
    record = {"finished": True, "accuracy": 0.8, "dataset": DATASET,
              "model": {"class": "SmallCNN", "args": [10], "kwargs": {}}}
    seen = evidence.measure(record, path)
    assert seen["images"] == evidence.HELD_OUT_IMAGES and seen["why"] == ""
    assert 0.0 <= seen["accuracy"] < 0.3, seen
    assert abs(seen["accuracy"] - record["accuracy"]) > records.agreement(64, seen["images"])
    assert chainer.config.train   # the grader's evaluation leaves Chainer's configuration as it was


def test_the_held_out_images_are_the_seeds_classes_but_none_of_its_images():
    from handson_lib.data import synthetic
    x_train, t_train, x_test, _ = synthetic.synthetic_arrays(50, 50, seed=0)
    x_held, t_held = evidence.held_out(DATASET)
    assert x_held.shape == (evidence.HELD_OUT_IMAGES, 3, 32, 32) and sorted(set(t_held)) == list(range(10))
    assert not any(numpy.array_equal(x_held[0], x) for x in [*x_train, *x_test])


@pytest.mark.parametrize("model_record, says", [
    ({"class": "Evil", "args": [], "kwargs": {}}, "not one of the course's"),
    ({"class": "SmallCNN", "args": [10], "kwargs": {"width": 1 << 20}}, "does not rebuild"),
    (None, "not one of the course's"),
])
def test_a_model_the_grader_does_not_rebuild_is_said(tmp_path, model_record, says):
    numpy.savez(tmp_path / "model.npz", w=numpy.zeros(3))
    seen = evidence.measure({"finished": True, "dataset": DATASET, "model": model_record}, tmp_path / "model.npz")
    assert seen["accuracy"] is None and says in seen["why"], seen


def test_links_fifos_pickles_and_garbage_are_refused_never_followed(tmp_path):
    secret = tmp_path / "grader_secret.npz"
    numpy.savez(secret, w=numpy.ones(2))
    (tmp_path / "link.npz").symlink_to(secret)
    os.mkfifo(tmp_path / "fifo.npz")
    numpy.save(tmp_path / "pickled.npy", numpy.array([{"a": 1}], dtype=object))
    os.rename(tmp_path / "pickled.npy", tmp_path / "pickled.npz")
    (tmp_path / "garbage.npz").write_bytes(b"\x00" * 100)
    record = {"finished": True, "dataset": DATASET, "model": {"class": "SmallCNN", "args": [10], "kwargs": {}}}
    for name in ("link.npz", "fifo.npz", "pickled.npz", "garbage.npz"):
        seen = evidence.measure(record, tmp_path / name)
        assert seen["accuracy"] is None and seen["why"], (name, seen)
    assert evidence.measure(record, tmp_path / "absent.npz")["why"] == "the run left no trained parameters"
    assert evidence.measure(["not", "a", "record"], tmp_path / "absent.npz")["why"] == "the run did not finish"


def test_the_margin_shrinks_with_the_images_and_has_bounds():
    assert records.agreement(64, 1000) > records.agreement(500, 1000) >= 0.15
    assert records.agreement(1, 1) == 0.35 and records.agreement(10 ** 6, 10 ** 6) == 0.15


# ----------------------------------------------------------------------------- what a run left, capped

def _npz_member(path, name, shape, data=b"", zeros=0):
    """An .npz of one member whose .npy header says `shape` (float64), then `data` and `zeros` zero
    bytes (deflated: a few bytes on disk for a large array)."""
    import zipfile
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open(name + ".npy", "w", force_zip64=True) as member:
            numpy.lib.format.write_array_header_1_0(
                member, {"descr": "<f8", "fortran_order": False, "shape": shape})
            member.write(data)
            for _ in range(zeros >> 20):
                member.write(bytes(1 << 20))


def _plant_list_record(out, size):
    (out / "observed.json").write_text("[" + "[]," * (size // 3) + "[]]")


def _plant_nested(out):
    (out / "observed.json").write_text("[" * 50_000 + "]" * 50_000)


def _plant_workers(out):
    for i in range(1000):
        numpy.savez(out / f"worker{i}.npz", index=numpy.array(i))


def _plant_zeros(out):
    count = (evidence.LARGEST_ARRAYS >> 3) * 2          # twice the cap, deflated to about 130 KiB
    _npz_member(out / "worker0.npz", "index", (count,), zeros=count * 8)


def _plant_header(out):
    _npz_member(out / "worker0.npz", "index", (10 ** 9,), data=bytes(8))   # says 8 GB, holds 8 bytes


#: Runs that left more than the grader reads, and what its refusal names.
PLANTED_RUNS = {
    "32 MiB of [], in observed.json": (lambda out: _plant_list_record(out, 32 << 20), "at most 8 MiB"),
    "a record of lists just under the size cap": (
        lambda out: _plant_list_record(out, evidence.LARGEST_RECORD - 16), "lists and objects (at most 100000)"),
    "a deeply nested record": (_plant_nested, "nested too deep"),
    "1000 worker files": (_plant_workers, "1000 files worker*.npz (at most 64)"),
    "an npz of zeros beyond the cap": (_plant_zeros, "more than 64 MiB of arrays"),
    "an npz whose header says 8 GB": (_plant_header, "arrays of more than 64 MiB"),
}


@pytest.mark.parametrize("planted", PLANTED_RUNS)
def test_a_run_that_left_too_much_is_refused_with_its_cap_and_bounded_memory(tmp_path, planted):
    """The records are those of a run that left none, the output says which cap, and the grader's
    memory stays small (without the caps: gigabytes, or a crash)."""
    import tracemalloc
    from handson_lib.checking import runs
    plant, says = PLANTED_RUNS[planted]
    plant(tmp_path)
    tracemalloc.start()
    try:
        (record, workers, _), refused = runs._read_left(runs._observed_records, tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (record, workers) == ({}, {}) and says in refused, refused
    assert refused.startswith("\n[grader] the run's records were not read:"), refused
    assert peak < 100 << 20, f"{peak >> 20} MiB to refuse it"


def test_a_run_reads_as_before_under_the_caps(tmp_path):
    from handson_lib.checking import runs
    (tmp_path / "observed.json").write_text('{"finished": true, "shards": [["a1", "b2"], ["c3"]]}')
    for i in range(2):
        numpy.savez(tmp_path / f"worker{i}.npz", index=numpy.array(i), params=numpy.ones(3))
    (record, workers, _), refused = runs._read_left(runs._observed_records, tmp_path)
    assert refused == "" and record == {"finished": True, "shards": [["a1", "b2"], ["c3"]]}
    assert sorted(workers) == [0, 1] and workers[1]["params"].tolist() == [1.0, 1.0, 1.0]


def test_an_mpi_run_reads_at_most_its_ranks_files_and_its_arrays_together_at_most_the_run_cap(tmp_path,
                                                                                               monkeypatch):
    from handson_lib.checking import runs
    for rank in range(3):
        (tmp_path / f"observed-rank{rank}.json").write_text('{"finished": true}')
        numpy.savez(tmp_path / f"params-rank{rank}.npz", params=numpy.zeros(1000))
    (ranks, params, _), refused = runs._read_left(runs._rank_records, tmp_path, 3)
    assert refused == "" and sorted(ranks) == sorted(params) == [0, 1, 2]
    (ranks, params, _), refused = runs._read_left(runs._rank_records, tmp_path, 2)
    assert (ranks, params) == ({}, {}) and "3 files observed-rank*.json (at most 2)" in refused, refused
    monkeypatch.setattr(evidence, "LARGEST_RUN_ARRAYS", 20_000)      # two ranks' 8000 bytes, not three
    (ranks, params, _), refused = runs._read_left(runs._rank_records, tmp_path, 3)
    assert (ranks, params) == ({}, {}) and "params-rank2.npz" in refused, refused
    assert "the run's arrays together: at most 20000 bytes" in refused, refused


def test_an_answer_of_too_many_lists_is_refused_before_it_is_built():
    from handson_lib.autograder import judge
    with pytest.raises(ValueError, match="lists and objects"):
        evidence.parse_record("[" + "[]," * judge.MOST_ANSWER_CONTAINERS + "[]]", judge.MOST_ANSWER_CONTAINERS)
    assert evidence.parse_record('["[[[", "\\"{{", {"a": [1]}]') == ["[[[", '"{{', {"a": [1]}]
