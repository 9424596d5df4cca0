"""The allocator settings of handson_lib.runtime.memory: freed step buffers stay in the process."""

import os
import subprocess
import sys

from handson_lib.runtime import memory

# Training steps of the course's CNN at batch 128, the page faults of the last six counted.
STEPS = """
import resource, numpy, chainer
from handson_lib import runtime
from handson_lib.runtime import memory
model = runtime.get_model("cnn", n_class=10)
x = numpy.random.rand(128, 3, 32, 32).astype(numpy.float32)
t = numpy.random.randint(0, 10, 128).astype(numpy.int32)
for step in range(8):
    if step == 2:
        start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    model.cleargrads()
    model(x, t).backward()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start)
"""


def page_faults(malloc_setting):
    env = dict(os.environ, HANDSON_MALLOC=malloc_setting, OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-c", STEPS], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    return int(res.stdout.split()[-1])


def test_freed_buffers_are_reused_instead_of_faulted_in_again():
    kept, default = page_faults("1"), page_faults("0")
    # Default glibc: the large buffers are mapped afresh every step (~13k faults a step on this
    # machine); kept: hardly any once the first steps have grown the heap.
    assert default > 6 * 3_000, default
    assert kept < default / 20, (kept, default)


def test_the_switch_and_the_state_say_what_was_done():
    assert memory.keep_freed_memory(environ={"HANDSON_MALLOC": "0"}).startswith("HANDSON_MALLOC=0")
    assert memory.keep_freed_memory(environ={}) is True
    assert memory.STATE["applied"] is True


def test_importing_the_runtime_applies_it():
    code = ("from handson_lib import runtime\nfrom handson_lib.runtime import memory\n"
            "print(memory.STATE['applied'])")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != "HANDSON_MALLOC"})
    assert res.stdout.split() == ["True"], res.stdout + res.stderr
