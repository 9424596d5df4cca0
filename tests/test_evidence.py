"""What the grader measures itself of a run (handson_lib.checking.evidence): the trained model rebuilt
from the course's classes and evaluated on images the run never trained on; whatever a run left
behind is read as untrusted data."""

import os

import numpy
import pytest

from handson_lib.checking import evidence
from handson_lib.runtime import models

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
    assert abs(seen["accuracy"] - record["accuracy"]) > evidence.agreement(64, seen["images"])
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
    assert evidence.agreement(64, 1000) > evidence.agreement(500, 1000) >= 0.15
    assert evidence.agreement(1, 1) == 0.35 and evidence.agreement(10 ** 6, 10 ** 6) == 0.15
