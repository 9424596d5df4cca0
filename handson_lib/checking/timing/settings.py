"""The scored timing's settings, in one place: how many steps are timed, and what bounds how long
a submission can hold the machine's timing slot. The checks time with SCORED; a test may pass
its own PairedTiming to `run_paired`. (The slot's wait, SLOT_PATIENCE, is launch.slot's: every
timed run waits for the slot, not only the paired timing.)
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class PairedTiming:
    #: Training steps of each side timed, after `warmup_steps` untimed ones (allocation, first calls).
    steps: int = 16
    warmup_steps: int = 2
    #: Seconds a step may take before the timing stops, when the check gives no `stall`.
    step_limit: float = 120.0
    #: The timing holds the machine's slot, and every other student waits for it: its limits start
    #: when the slot is held, and bound what a submission can hold it for. The launches must reach
    #: their training steps within `connect_limit` seconds ...
    connect_limit: float = 60.0
    #: ... and the student's launch within this many times the reference's start-up (the same model
    #: on the same data: no more work), at least the floor.
    student_connect_factor: float = 3.0
    student_connect_floor: float = 20.0
    #: A step of the student's may take at most this many times the reference's median step (at
    #: least the floor), and all of its steps together at most `student_total_factor` times the
    #: reference's (at least that floor). An honest step several times slower than the reference's
    #: earns no throughput point anyway (the bands start at 0.4).
    student_step_factor: float = 8.0
    student_step_floor: float = 5.0
    student_total_factor: float = 6.0
    student_total_floor: float = 15.0
    #: Seconds a launch told to quit may take to end on its own before it is stopped.
    goodbye_seconds: float = 5
    #: CPU a side's processes may use while the other side is timed: this share of its ranks' cores
    #: over the other's steps, plus a floor for MPI's helper threads and the clock's granularity
    #: (10 ms per process and sample). A side blocked on its socket uses next to none (0.00 s over
    #: the 16 steps of a timing on 2 ranks here, for the reference and an honest student alike).
    waiting_share: float = 0.1
    waiting_floor: float = 0.15
    #: The least CPU per image the student's steps may take, as a share of the reference's: both
    #: train the same model on as many images, and an honest step cannot skip half its work.
    work_share: float = 0.8
    #: A timing in which the reference's steps ran this many times slower than its median over the
    #: session's other timings (something beside it slowed it: a student's ratio would gain) is
    #: timed again, `retimings_when_slowed` times at most; slowed every time, it is flagged for the
    #: instructor, never credited. Generous: a busy neighbour's load alone swung the reference's
    #: rate 3-fold on a 2-core machine.
    reference_slowdown: float = 2.5
    retimings_when_slowed: int = 2
    #: The session's earlier timings needed before a median is believed.
    rates_before_a_median: int = 3


#: What the checks time with.
SCORED = PairedTiming()
