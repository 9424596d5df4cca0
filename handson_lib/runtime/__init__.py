"""What student scripts import: MPI start-up, the CPU stand-in of MultiprocessParallelUpdater,
flags and report extensions, throughput, models, phase timing. `__all__` is the contract.
"""
