"""`mpiexec -n P python -m handson_lib.experiments.large_batch --bn-compare | --probe-gpu-options |
--gpu-train`: the workers that `bn_compare`, `try_gpu_options` and `run_gpu_options` start."""

from handson_lib.experiments.large_batch.worker import _worker_main

if __name__ == "__main__":
    _worker_main()
