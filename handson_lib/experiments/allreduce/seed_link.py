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


def intra_node_seconds(nbytes, gpus_per_node, link_bytes_per_s):
    """What a hierarchical allreduce does inside a node, on a link of `link_bytes_per_s`: the GPUs'
    reduce to one and broadcast back (each a pipelined ring: about S through each link once the
    node has more than one GPU), and the copies to the host and back (S each way)."""
    gpu_ring = 2 * nbytes if gpus_per_node > 1 else 0
    return (gpu_ring + 2 * nbytes) / link_bytes_per_s


#: ImageNet-1k's training images (the seed's table counts 90 epochs of them).
IMAGENET_TRAIN_IMAGES = 1_281_167


@dataclass(frozen=True)
class SeedScaleOut:
    """Seed 003's run as its slides give it: MN-1, 1024 P100 in 128 nodes of 8, two InfiniBand FDR
    4x adapters per node; batch 32 per GPU (32,768 in all), 90 epochs of ResNet-50 in 15 minutes,
    the allreduce in FP16 (half of L's bytes). Its table's first row, 8 P100 in 29 hours at batch
    256 (He et al.), is the course's figure of one GPU's step without the network."""
    gpus: int = 1024
    gpus_per_node: int = 8
    adapters_per_node: int = 2
    batch_per_gpu: int = 32
    epochs: int = 90
    minutes: float = 15.0
    allreduce_bytes: int = 102_228_384 // 2            # FP16 gradients
    #: FDR 4x: 56 Gbit/s on the wire, 54.5 Gbit/s of data after its 64b/66b encoding (1 Gbit = 1e9 bits)
    adapter_gbit_per_s: float = 54.54
    one_node_gpus: int = 8
    one_node_hours: float = 29.0
    one_node_batch: int = 256

    def adapters_bytes_per_s(self):
        """A node's network, both adapters, in bytes per second."""
        return self.adapters_per_node * self.adapter_gbit_per_s * 1e9 / 8

    def node_step_seconds(self):
        """One step of one node (`batch_per_gpu` images on each of its GPUs, their allreduce inside
        the node included) at the 8-GPU row's images per GPU and second."""
        per_gpu = IMAGENET_TRAIN_IMAGES * self.epochs / (self.one_node_hours * 3600) / self.one_node_gpus
        return self.batch_per_gpu / per_gpu

    def measured_efficiency(self):
        """Images per GPU and second in 15 minutes on 1024 GPUs over those of the 8-GPU row: the
        seeds' own figure of the efficiency at 1024 against one node (two systems, two frameworks:
        a rough one)."""
        at_scale = IMAGENET_TRAIN_IMAGES * self.epochs / (self.minutes * 60) / self.gpus
        return at_scale * self.node_step_seconds() / self.batch_per_gpu


SEED_003 = SeedScaleOut()

#: Assumed (not in the seeds): the seconds of one step of a ring between nodes on InfiniBand.
IB_STEP_SECONDS = 5e-6
