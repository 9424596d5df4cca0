"""Training steps on command: one script's trainer, stepped by a coordinator outside its processes.

    mpiexec -n N python -m handson_lib.harness.stepper SIDE SOCKET TOKEN SCRIPT [ARGS...]

Each rank runs SCRIPT with ARGS until it calls `trainer.run()`. Instead of training, the rank
connects to the coordinator's Unix socket SOCKET, introduces itself with one JSON line (TOKEN, its
rank, the world's size, its iterator's batch size) and then runs one `updater.update()` (forward,
backward, allreduce, update) for each `s` it reads, answering `d` once the step is done; `q`, or
the socket closing, ends the script. SIDE ("reference" or "student") only names the launch. The
data's split and order are the grader's (harness.controls); the launch keeps its parameters after
step 3 and after its last step, which the grader sets beside its replay of as many steps.

The coordinator (handson_lib.checking.timing.paired, the grader's side) steps two such launches in turn,
the reference's and the student's, and times every step from outside, where neither launch can
reach its clock. Nothing this process writes is read as a time: it only obeys.
"""

import hmac
import json
import runpy
import secrets
import socket
import sys
from pathlib import Path

from handson_lib.harness import controls
from handson_lib.harness.observe import mpi_rank, mpi_size, script_seed

SIDES = ("reference", "student")
STEP, DONE, QUIT = b"s", b"d", b"q"


def batch_size(trainer):
    try:
        return int(trainer.updater.get_iterator("main").batch_size)
    except Exception:   # a trainer without the usual iterator: the coordinator says so
        return None


def synchronize(updater):
    """Wait for a GPU's queued work, so that a step's answer means its work is done."""
    device = getattr(updater, "device", None)
    cuda_device = getattr(device, "device", None)
    if cuda_device is not None and hasattr(cuda_device, "synchronize"):
        cuda_device.synchronize()


def _read_line(control, limit=256):
    line = b""
    while not line.endswith(b"\n") and len(line) < limit:
        byte = control.recv(1)
        if not byte:
            break
        line += byte
    return line.strip()


def serve(trainer, control, token):
    """Introduce this rank on `control` (a connected socket), check that the other end knows the
    token too (an HMAC of this rank's nonce), then step on command."""
    rank = mpi_rank() or 0
    nonce = secrets.token_hex(16)
    hello = {"token": token, "rank": rank, "size": mpi_size(), "batch": batch_size(trainer), "nonce": nonce}
    control.sendall(json.dumps(hello).encode() + b"\n")
    expected = hmac.new(token.encode(), nonce.encode(), "sha256").hexdigest().encode()
    if not hmac.compare_digest(_read_line(control), expected):
        raise SystemExit("the coordinator did not prove that it knows this launch's token: no step taken")
    updater = trainer.updater
    model = updater.get_optimizer("main").target
    while True:
        command = control.recv(1)
        if command != STEP:
            return
        updater.update()
        synchronize(updater)
        control.sendall(DONE)
        keep(model, updater.iteration)


#: The parameters a launch keeps for the grader (checking.replay.timing_plan): after this early
#: step, and after its last one.
EARLY_STEP = 3
_LAST = []


def keep(model, iteration):
    """Keep the parameters after `iteration` where the grader compares them: the early step at once,
    the last one in memory until the launch is told to quit (`kept_to`)."""
    if iteration == EARLY_STEP:
        controls.keep_parameters(".", model, iteration, _who())
    _LAST[:] = [(iteration, controls.parameters(model))]


def _who():
    rank = mpi_rank()
    return "" if rank is None else f"-rank{rank}"


def kept_to(folder):
    """Write the last step's parameters (in `folder`: the side's own)."""
    import numpy
    for iteration, params in _LAST:
        numpy.savez(str(Path(folder) / controls.snapshot_name(iteration, _who())), params=params, iteration=iteration)


def install_hook(socket_path, token, seed):
    """Trainer.run steps on command instead of training, on the data's split and order of a run of
    `seed` (harness.controls); once told to quit, it keeps the parameters its steps trained (in the
    working folder: the side's own), which the grader sets beside its replay of as many steps."""
    from chainer import training

    def run(trainer, *args, **kwargs):
        rank = mpi_rank()
        controls.fix_training_order(trainer.updater, seed, rank)
        control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        control.connect(socket_path)
        try:
            serve(trainer, control, token)
        finally:
            control.close()
        kept_to(".")
        raise SystemExit(0)   # what the script does after training is not part of the timing

    training.Trainer.run = run


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 4 or argv[0] not in SIDES:
        print(__doc__, file=sys.stderr)
        return 2
    _, socket_path, token, script, *args = argv
    sys.path.insert(0, str(Path(script).resolve().parent))
    seed = script_seed(args)
    controls.install(seed)
    install_hook(socket_path, token, seed)
    sys.argv = [script, *args]
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    print("the script ended without calling trainer.run()", file=sys.stderr)
    return 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    if code and mpi_size() > 1:
        from mpi4py import MPI
        MPI.COMM_WORLD.Abort(code)   # the other ranks would wait for this one forever
    sys.exit(code)
