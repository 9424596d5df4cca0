"""The seed's own measurements (the talk's slides) in the form `run_levers` returns, to set beside
this machine's."""

from handson_lib.experiments import stats
from handson_lib.experiments.tuning.measure import add_speedups

TALK_SOURCE = ("seed 004: GTC Japan 2018 talk \"Optimizing Deep Learning with Chainer\" (Preferred "
               "Networks); ResNet-50, ImageNet, one Tesla V100, batch 32")


# (label, iterations/sec, batch): read off the progress bars on the slides.
TALK_STEPS = (
    ("baseline", 4.1826, 32, ""),
    ("+ cuDNN", 8.3241, 32, ""),
    ("+ autotune", 8.9338, 32, ""),
    ("+ FP16", 5.0744, 32, "slower: fp16 preprocessing in NumPy"),
    ("+ fp32 preprocessing", 7.6856, 32, "the fix: preprocess in float32"),
    ("+ MultiprocessIterator", 11.89, 32, "FP32 reference: 10.695"),
    ("+ static_graph", 15.539, 32, "3.7x the baseline"),
    ("batch x8 (FP16)", 2.7979, 256, "FP32 batch x4: 2.908 it/s"),
)


def talk_result():
    """The seed's measurements in the form `run_levers` returns (one run each, no spread)."""
    steps = []
    for label, rate, batch, note in TALK_STEPS:
        steps.append({"label": label, "lever": None, "levers": [], "runnable": True, "note": note,
                      "status": "measured", "iterations_per_sec": stats.spread_summary([rate]),
                      "images_per_sec": stats.spread_summary([rate * batch]), "data_fraction": None,
                      "report": {"batchsize": batch}})
    add_speedups(steps)
    return {"benchmark": "tuning", "source": TALK_SOURCE, "device": "Tesla V100 (16GB)",
            "model": "ResNet-50", "batchsize": 32, "repeats": 1, "steps": steps}
