"""`measure`: the benchmark's ranks started under the watchdog (locally or as a job on the local
cluster), their result read back, busbw added with the caller's traffic rule."""

import json
import tempfile
from pathlib import Path

from handson_lib.experiments.allreduce.bandwidth import add_bus_bandwidth
from handson_lib.experiments.allreduce.buffers import check_model
from handson_lib.experiments.allreduce.units import DEFAULT_MODEL, parse_size, parse_sizes
from handson_lib.sites import jobs

def _size_argument(nbytes=None, model=None, sizes=None):
    chosen = [name for name, value in (("nbytes", nbytes), ("model", model), ("sizes", sizes))
              if value is not None]
    if len(chosen) > 1:
        raise ValueError(f"give only one of model, bytes or sizes (got {', '.join(chosen)})")
    if sizes is not None:
        parsed = parse_sizes(sizes)
        return ["--sizes", ",".join(map(str, parsed))]
    if nbytes is not None:
        return ["--bytes", str(parse_size(nbytes))]
    model = model or DEFAULT_MODEL
    check_model(model)
    return ["--model", model]


#: Open MPI's allreduce as the library picks it (by size and processes; on several nodes its
#: hierarchical `han` component), or its ring, the algorithm of the course's cost model (NCCL's
#: too): the MCA settings of the ranks' mpiexec (the ranks yield the core while they wait: on a
#: machine of few cores they share it with the kernel's work of moving the bytes).
ALGORITHMS = {
    "default": {},
    "ring": {"coll_han_priority": "0", "coll_tuned_use_dynamic_rules": "1",
             "coll_tuned_allreduce_algorithm": "ring", "mpi_yield_when_idle": "1"},
}


def measure(np=2, nbytes=None, model=None, sizes=None, iterations=10, warmup=3, timeout=600,
            echo=False, in_place=False, traffic_rule=None, where="local", algorithm="default"):
    """Run the three paths on `np` ranks; returns the result dict (keys: ranks, hosts, link,
    model, bytes, sizes, results, correct, ...).

    `where`: 'local' (ranks on this machine under the watchdog), 'cluster' (a job across the
    nodes of the local cluster brought up with `handson cluster up --link PROFILE`) or 'auto' (the
    cluster when one is up); the result's `link` says which link the bytes crossed.
    Exactly one of `nbytes` (int or '1M'), `model` ('resnet50' or a course model) or `sizes`
    (list or '1K:64M') may be given; the default is ResNet-50's gradients (seed 001).
    `in_place=True` adds the MPI.IN_PLACE allreduce (path 'mpi4py-inplace'). `algorithm`: Open MPI's
    own choice ('default') or its ring ('ring': the algorithm of the course's cost model).
    `traffic_rule(nbytes, p)`: the bytes one rank sends in an allreduce (yours from notebook 04);
    given, every record gets its busbw and the result its `ratios` (`add_bus_bandwidth`)."""
    if int(np) < 1:
        raise ValueError(f"np must be at least 1, got {np!r}")
    if int(iterations) < 1 or int(warmup) < 0:
        raise ValueError(f"need iterations >= 1 and warmup >= 0, got {iterations!r} and {warmup!r}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm={algorithm!r}: choose one of {', '.join(ALGORITHMS)}")
    size_args = _size_argument(nbytes, model, sizes)
    with tempfile.TemporaryDirectory(prefix="allreduce_bench_") as tmp:
        result_file = Path(tmp, "result.json")
        argv = ["-m", "handson_lib.experiments.allreduce", "--worker", *size_args,
                "--iterations", str(int(iterations)), "--warmup", str(int(warmup)),
                *(["--in-place"] if in_place else []), "--algorithm", algorithm,
                "--result-file", str(result_file)]
        mca = [word for key, value in ALGORITHMS[algorithm].items() for word in ("--mca", key, value)]
        run = jobs.run_ranks(int(np), argv, timeout=timeout, where=where, name="allreduce", echo=echo, mpi_args=mca)
        if not run.ok or not result_file.exists():
            why = "timed out" if run.timed_out else f"exit status {run.returncode}"
            raise RuntimeError(f"allreduce benchmark on {np} rank(s) failed ({why}):\n{run.tail(30)}")
        result = json.loads(result_file.read_text())
    return add_bus_bandwidth(result, traffic_rule) if traffic_rule is not None else result
