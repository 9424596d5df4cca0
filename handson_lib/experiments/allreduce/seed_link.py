"""Seed 001's allreduce, as its text gives it, for the scaling model's check (issue 51).

Four nodes of four Pascal TITAN X on 10 Gbit Ethernet; ChainerMN's `hierarchical` communicator,
so one process per node on the wire: p = 1, 2, 4 for 4, 8, 16 GPUs. MPI point to point measured
8-9 Gibit/s; ResNet-50's gradients L = 102,228,384 bytes; the allreduce took 0.15 s on 2 nodes and
0.22 s on 4.

The seed does not measure what its allreduce does inside a node (its text names NCCL's reduce and
broadcast and the copies between GPU and host); `INTRA_NODE_LINK` is the figure the course assumes
for that: PCIe 3.0 x16 as such GPUs reach it (about 12 GB/s a direction), said as an assumption
wherever it is used.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class SeedAllreduce:
    gradient_bytes: int = 102_228_384
    gpus_per_node: int = 4
    p2p_gibit_per_s: tuple = (8.0, 9.0)
    measured_seconds: tuple = ((2, 0.15), (4, 0.22))   # (nodes, seconds)

    def p2p_bytes_per_s(self):
        """The middle of the seed's point-to-point range, in bytes per second (Gibit/s = 2**30 bits/s)."""
        return sum(self.p2p_gibit_per_s) / 2 * 2 ** 30 / 8


SEED_001 = SeedAllreduce()

#: Assumed (not in the seed): bytes per second between a GPU and its host, and between GPUs of one node.
INTRA_NODE_LINK = 12e9
