"""The answers of notebooks 04-06, for the hidden tests and the instructor's benchmarks.

Instructor-only: the student edition does not ship this module. Every function here computes
something a student must write in a graded cell, so it must not be importable from what the
student notebooks import (handson_lib.experiments never imports it). The hidden tests of the
instructor notebooks use ``from handson_lib.autograder import answers``; the two benchmarks that need
a rule (`handson bench allreduce`: the allreduce traffic; `handson bench large-batch`: the linear
scaling rule and the warmup) get it from here and pass it to the experiment as a parameter.
"""

import sys

from handson_lib.experiments import allreduce, large_batch, tuning
from handson_lib.experiments.allreduce.seed_link import (IB_STEP_SECONDS, INTRA_NODE_LINK, SEED_001,  # noqa: F401
                                                      SEED_003, intra_node_seconds)
from handson_lib.runtime.phases import gradient_bytes_of


# ----------------------------------------------------------------------------- 04 scaling

def parallel_efficiency(results_by_np):
    """Parallel efficiency per rank count: throughput(p) / (p * throughput(1)) (04 exercise 1)."""
    if 1 not in results_by_np:
        raise ValueError("the efficiency needs the 1-rank run as its reference")
    base = results_by_np[1]["throughput"]
    return {p: r["throughput"] / (p * base) if r.get("throughput") and base else None
            for p, r in sorted(results_by_np.items())}


def gradient_bytes(model_name):
    """L: the bytes of all gradients one allreduce of this model carries (04 exercise 2)."""
    return gradient_bytes_of(allreduce.build_gradient_link(model_name))


def allreduce_traffic_bytes(nbytes, p):
    """Bytes one rank sends in an allreduce of `nbytes` over `p` ranks: 2L(p-1)/p (seed 001;
    nccl-tests' bus-bandwidth factor 2(p-1)/p). 04 exercises 2 and 3."""
    if p < 1:
        raise ValueError(f"the number of ranks must be at least 1, got {p!r}")
    return 2.0 * nbytes * (p - 1) / p


# ----------------------------------------------------------------------------- the scaling model (issue 51)

#: The ring's coefficients, in the order of ring_allreduce_terms.
RING_COEFFICIENTS = ("alpha", "seconds_per_byte")


def ring_allreduce_terms(p, nbytes):
    """The ring allreduce's terms: 2(p-1) latency steps, and 2(p-1)/p * S bytes through each
    process's link (T = 2(p-1)*alpha + 2(p-1)/p * S / B)."""
    if p < 1:
        raise ValueError(f"the number of processes must be at least 1, got {p!r}")
    return (2.0 * (p - 1), 2.0 * (p - 1) / p * nbytes)


def hierarchical_allreduce_seconds(nodes, nbytes, alpha, bandwidth, local=0.0):
    """Seed 001's `hierarchical` communicator: `local` seconds inside each node, then one process
    per node on the ring between them (p = nodes, not GPUs); `bandwidth` in bytes per second."""
    steps, wire = ring_allreduce_terms(nodes, nbytes)
    return local + steps * alpha + wire / bandwidth


def allreduce_prediction_mistakes(nodes, nbytes, alpha, bandwidth, local=0.0, gpus_per_node=4):
    """{the words that name a known mistake: the seconds it predicts} for a prediction of
    `hierarchical_allreduce_seconds(nodes, nbytes, alpha, bandwidth, local)`: the hidden tests name
    the one a wrong answer made."""
    steps, _ = ring_allreduce_terms(nodes, nbytes)
    return {
        "p counted in GPUs: the hierarchical communicator puts one process per node on the wire, so p is "
        "the number of nodes": hierarchical_allreduce_seconds(nodes * gpus_per_node, nbytes, alpha, bandwidth, local),
        "bits taken for bytes: a link of B bit/s moves B / 8 bytes per second":
            hierarchical_allreduce_seconds(nodes, nbytes, alpha, bandwidth * 8, local),
        "the (p-1)/p factor left out: each process sends 2(p-1)/p * S bytes, not 2(p-1) * S":
            local + steps * alpha + steps * nbytes / bandwidth,
        "the inside of a node left out: the GPUs' reduce and broadcast and the copies to the host take time too":
            hierarchical_allreduce_seconds(nodes, nbytes, alpha, bandwidth, 0.0) if local else None,
    }


def _close(value, wanted, rel):
    """Whether `value` is `wanted` within `rel`: numbers, sequences of them, or dicts of them."""
    if wanted is None:
        return False
    if isinstance(wanted, dict):
        return (isinstance(value, dict) and set(value) == set(wanted)
                and all(_close(value[k], wanted[k], rel) for k in wanted))
    if isinstance(wanted, (tuple, list)):
        return (isinstance(value, (tuple, list)) and len(value) == len(wanted)
                and all(_close(v, w, rel) for v, w in zip(value, wanted)))
    try:
        return abs(float(value) - float(wanted)) <= rel * abs(float(wanted)) + 1e-300
    except (TypeError, ValueError):
        return False


def named_mistake(value, mistakes, rel=0.01):
    """The words of the known mistake (`mistakes`: {words: value}) whose value `value` is, or None;
    a value may be a number, a sequence or a dict of numbers."""
    for words, wrong in mistakes.items():
        if _close(value, wrong, rel):
            return words
    return None


# ----------------------------------------------------------------------------- 08 predict

def ring_allreduce_seconds(p, nbytes, alpha, bandwidth):
    """The ring allreduce's model: 2(p-1)*alpha + 2(p-1)/p * S / B (08 Question 2)."""
    steps, wire = ring_allreduce_terms(p, nbytes)
    return steps * alpha + wire / bandwidth


def ring_terms_mistakes(p, nbytes):
    """{the words of a known mistake: the terms it gives} for ring_allreduce_terms(p, nbytes)."""
    steps, wire = ring_allreduce_terms(p, nbytes)
    return {
        "the (p-1)/p factor left out: each process sends 2(p-1)/p * S bytes, not 2(p-1) * S": (steps, steps * nbytes),
        "p steps where the ring takes p - 1 (per pass: the reduce-scatter and the all-gather)": (2.0 * p, 2.0 * nbytes),
        "the factor 2 left out: the reduce-scatter and the all-gather each take p - 1 steps": (steps / 2, wire / 2),
        "the terms in the other order: first the steps (alpha's), then the bytes (1/B's)": (wire, steps),
        "bits for bytes: the terms count the bytes through each link": (steps, 8 * wire),
    }


def fit_of(measured, processes=(2, 3)):
    """The fit of 08 Question 1: the ring's terms on every point of `processes` of `measured`
    ({p: [[p, bytes, seconds], ...]}); (alpha, bandwidth in bytes per second)."""
    from handson_lib.experiments.allreduce import model
    fitted = model.fit([pt for p in processes for pt in measured[p]], ring_allreduce_terms, RING_COEFFICIENTS)
    return fitted.coefficients["alpha"], 1.0 / fitted.coefficients["seconds_per_byte"]


def fit_mistakes(measured):
    """{the words of a known mistake: (alpha, bandwidth) it gives} for fit_of(measured)."""
    from handson_lib.experiments.allreduce import model
    alpha, bandwidth = fit_of(measured)
    out = {
        "B_eff in bits per second: 1 / seconds_per_byte is bytes per second": (alpha, 8 * bandwidth),
        "B_eff left as the fit's seconds_per_byte: B_eff is its inverse": (alpha, 1.0 / bandwidth),
    }
    for alone in (2, 3):
        try:
            out[f"fitted on p = {alone} alone: fit every point of p = 2 and 3"] = fit_of(measured, (alone,))
        except model.FitError:
            pass
    # a fit on one size: the largest message's bandwidth alone, no latency
    for p in (2, 3):
        _, largest, seconds = max(measured[p], key=lambda point: point[1])
        out[f"a fit on one message size (the largest, p = {p}): a bandwidth without a latency; fit every size"] = \
            (0.0, ring_allreduce_terms(p, largest)[1] / seconds)
    return out


def seed001_bandwidth_range():
    """Seed 001's point to point, 8-9 Gibit/s (2**30 bits per second), in bytes per second."""
    low, high = SEED_001.p2p_gibit_per_s
    return low * 2 ** 30 / 8, high * 2 ** 30 / 8


def seed001_local_seconds():
    """What the course assumes seed 001's allreduce takes inside a node (seed_link.INTRA_NODE_LINK)."""
    return intra_node_seconds(SEED_001.gradient_bytes, SEED_001.gpus_per_node, INTRA_NODE_LINK)


def seed001_seconds(nodes, bandwidth, alpha=0.0):
    """08 Question 3: the inside of a node, then the ring between `nodes` processes."""
    return hierarchical_allreduce_seconds(nodes, SEED_001.gradient_bytes, alpha, bandwidth, seed001_local_seconds())


def seed001_bandwidth_mistakes():
    """{words: bytes per second} of the known mistakes in reading 8-9 Gibit/s."""
    middle = sum(seed001_bandwidth_range()) / 2
    return {"bits for bytes: 8.5 Gibit/s is 8.5 * 2**30 / 8 bytes per second": middle * 8,
            "Gbit/s taken for Gibit/s: 1 Gibit = 2**30 bits, not 10**9": middle * 1e9 / 2 ** 30,
            "Gibit/s left as it is: B_seed is bytes per second": sum(SEED_001.p2p_gibit_per_s) / 2}


def seed001_mistakes(nodes):
    """{words: seconds} of the known mistakes of 08 Question 3's prediction for `nodes` nodes."""
    middle = sum(seed001_bandwidth_range()) / 2
    out = allreduce_prediction_mistakes(nodes, SEED_001.gradient_bytes, 0.0, middle, seed001_local_seconds(),
                                        SEED_001.gpus_per_node)
    out["Gbit/s taken for Gibit/s: 1 Gibit = 2**30 bits, not 10**9"] = seed001_seconds(nodes, middle * 1e9 / 2 ** 30)
    return out


def seed003_efficiency(gpus, nbytes=None, bandwidth=None, per_node=None):
    """08 Question 4: {p: T_step(8) / T_step(p)} with T_step(p) = the node's step + the ring between
    p / 8 nodes of the FP16 gradients on the node's two FDR adapters."""
    nbytes = SEED_003.allreduce_bytes if nbytes is None else nbytes
    bandwidth = SEED_003.adapters_bytes_per_s() if bandwidth is None else bandwidth
    per_node = SEED_003.gpus_per_node if per_node is None else per_node
    node = SEED_003.node_step_seconds()

    def step(p):
        return node + ring_allreduce_seconds(max(1, p // per_node), nbytes, IB_STEP_SECONDS, bandwidth)
    return {p: step(SEED_003.gpus_per_node) / step(p) for p in gpus}


def seed003_mistakes(gpus):
    """{words: the curve it gives} of the known mistakes of 08 Question 4."""
    return {
        "p counted in GPUs: between the nodes one process per node is on the ring, so p / 8 of them":
            seed003_efficiency(gpus, per_node=1),
        "bits for bytes: two adapters of 54.54 Gbit/s move 2 * 54.54e9 / 8 bytes per second":
            seed003_efficiency(gpus, bandwidth=SEED_003.adapters_bytes_per_s() * 8),
        "FP32 gradients: the seed's allreduce sends FP16, half of L's bytes":
            seed003_efficiency(gpus, nbytes=2 * SEED_003.allreduce_bytes),
    }


# ----------------------------------------------------------------------------- 05 tuning

#: 05 question 1: the levers that configure NVIDIA's cuDNN, so do nothing without a GPU.
GPU_ONLY_LEVERS = frozenset(lever.name for lever in tuning.LEVERS if lever.needs_gpu)


def speedup_over_baseline(result, label):
    """Median images/sec of the step `label` over the baseline's (05 question 2)."""
    steps = {step["label"]: step for step in result["steps"]}
    if label not in steps:
        raise KeyError(f"no step {label!r}; steps: {list(steps)}")
    if steps[label]["images_per_sec"] is None:
        raise ValueError(f"step {label!r} was not measured ({steps[label]['status']})")
    return steps[label]["images_per_sec"]["median"] / result["steps"][0]["images_per_sec"]["median"]


# ----------------------------------------------------------------------------- 06 large batch
# The schedules (Goyal et al., arXiv:1706.02677, section 2; the seed's slide 21):
#   scaled_lr = base_lr * batch / base_batch
#   lr(i) = base_lr + (scaled_lr - base_lr) * min(i, W) / W   (W >= 1);   scaled_lr when W == 0
# for the update that follows i finished updates (i = trainer.updater.iteration).

def scaled_lr(base_lr, base_batch, batch):
    """Linear scaling rule: ``base_lr * batch / base_batch`` (06 exercise 1).

    >>> scaled_lr(0.1, 256, 8192)   # Goyal et al.: 0.1 for 256 images -> 3.2 for 8k
    3.2
    """
    large_batch.check_positive(base_lr=base_lr, base_batch=base_batch, batch=batch)
    return base_lr * batch / base_batch


def warmup_lr(iteration, base_lr, base_batch, batch, warmup_iterations):
    """The learning rate of the update after ``iteration`` finished updates (06 exercise 2)."""
    if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
        raise ValueError(f"iteration must be an integer >= 0, got {iteration!r}")
    if isinstance(warmup_iterations, bool) or not isinstance(warmup_iterations, int) \
            or warmup_iterations < 0:
        raise ValueError(f"warmup_iterations must be an integer >= 0, got {warmup_iterations!r}")
    peak = scaled_lr(base_lr, base_batch, batch)
    if warmup_iterations == 0 or iteration >= warmup_iterations:
        return peak
    return base_lr + (peak - base_lr) * iteration / warmup_iterations


class WarmupScaledLR:
    """Trainer extension: gradual warmup from ``base_lr`` to the linearly scaled rate (06 exercise 2).

    Sets the optimizer's ``lr`` to :func:`warmup_lr` of the updater's iteration: before the first
    update (``initialize``) and after every update (``trigger=(1, 'iteration')``). It reads the
    count from the updater instead of counting calls, so a resumed trainer continues the schedule.
    ``Trainer.extend`` accepts any callable with these attributes.
    """

    trigger = (1, "iteration")
    priority = 200  # chainer.training.PRIORITY_EDITOR: changes state before readers see it
    name = "warmup_scaled_lr"

    def __init__(self, base_lr, base_batch, batch, warmup_iterations):
        warmup_lr(0, base_lr, base_batch, batch, warmup_iterations)  # validates
        self.base_lr, self.base_batch, self.batch = base_lr, base_batch, batch
        self.warmup_iterations = warmup_iterations

    def lr_at(self, iteration):
        return warmup_lr(iteration, self.base_lr, self.base_batch, self.batch, self.warmup_iterations)

    def initialize(self, trainer):
        self(trainer)

    def __call__(self, trainer):
        trainer.updater.get_optimizer("main").lr = self.lr_at(trainer.updater.iteration)


def gain(result, schedule="scaled+warmup", over="fixed", batch=None):
    """Accuracy of ``schedule`` minus that of ``over`` at ``batch`` (default: the largest; 06
    exercise 3)."""
    batches = list(result["batches"])
    batch = batches[-1] if batch is None else batch
    if batch not in batches:
        raise ValueError(f"batch {batch} was not run; batches: {batches}")
    i = batches.index(batch)
    return result["accuracy"][schedule][i] - result["accuracy"][over][i]


# ----------------------------------------------------------------------------- instructor benchmarks
# `handson bench allreduce` and `handson bench large-batch` (instructor commands: cli.py) run the
# experiments with the rules above; a student runs the same experiments with their own.

def add_allreduce_arguments(parser):
    allreduce.add_arguments(parser)


def bench_allreduce(args):
    if args.fit:
        from handson_lib.experiments.allreduce.command import run_fit
        return run_fit(args, ring_allreduce_terms, RING_COEFFICIENTS)
    return allreduce.run_command(args, traffic_rule=allreduce_traffic_bytes)


def add_large_batch_arguments(parser):
    large_batch.add_arguments(parser)


def bench_large_batch(args):
    result = large_batch.run_command(args, scaling_rule=scaled_lr, lr_schedule_factory=WarmupScaledLR)
    if result is None:
        return 2
    if not args.json:
        print(f"linear scaling + warmup vs fixed lr at batch {result['batches'][-1]}: "
              f"{gain(result) * 100:+.1f} points; scaling alone: "
              f"{gain(result, 'scaled') * 100:+.1f}; warmup on top of scaling: "
              f"{gain(result, 'scaled+warmup', 'scaled') * 100:+.1f}", file=sys.stdout)
    return 0
