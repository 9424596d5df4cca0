"""MPI start-up in one place: local launches, abort on exception, watchdog on deadlock."""

import os
import shutil
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from handson_lib import launch
from handson_lib.runtime import mpi


def _script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def _leftovers(marker):
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in (proc.info["cmdline"] or [])):
                found.append(proc.pid)
        except psutil.Error:
            pass
    return found


def _running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def test_mpiexec_is_the_venvs_and_oversubscribes_only_when_needed():
    cmd = launch.mpiexec_command(1, ["x.py"])
    assert cmd[0] == str(launch.venv_bin() / "mpiexec")
    assert "--oversubscribe" not in cmd and cmd[-2:] == [sys.executable, "x.py"]
    many = launch.mpiexec_command(launch.cpu_count() + 1, ["x.py"])
    assert "--oversubscribe" in many


def test_two_ranks_run_and_see_each_other(tmp_path):
    script = _script(tmp_path, "hello.py", """
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        total = comm.allreduce(comm.rank + 1)
        print(f"rank {comm.rank} of {comm.size} sum {total}", flush=True)
    """)
    res = launch.run_mpi(2, [script], timeout=60)
    assert res.ok, res.output
    assert "rank 0 of 2 sum 3" in res.output and "rank 1 of 2 sum 3" in res.output


def test_chainermn_start_up_with_more_ranks_than_cores(tmp_path):
    script = _script(tmp_path, "mn.py", """
        from handson_lib.runtime.mpi import start_multi_node
        comm = start_multi_node("naive")
        print(f"rank={comm.rank} intra_rank={comm.intra_rank} size={comm.size}", flush=True)
    """)
    np = launch.cpu_count() + 1
    res = launch.run_mpi(np, [script], timeout=120)
    assert res.ok, res.output
    for rank in range(np):
        assert f"rank={rank} intra_rank={rank} size={np}" in res.output


def test_exception_on_one_rank_aborts_the_job_instead_of_hanging(tmp_path):
    script = _script(tmp_path, "crash.py", """
        import time
        from mpi4py import MPI
        from handson_lib.runtime.mpi import install_abort_hook
        install_abort_hook()
        comm = MPI.COMM_WORLD
        if comm.rank == 1:
            time.sleep(0.5)
            raise RuntimeError("rank one broke")
        comm.barrier()  # rank 0 would wait here forever without the hook
    """)
    res = launch.run_mpi(2, [script], timeout=60)
    assert not res.timed_out, res.output   # (rank 0 would have waited in its barrier until the watchdog)
    assert res.returncode != 0
    assert "rank one broke" in res.output and "aborting all 2 ranks" in res.output


@pytest.mark.slow
def test_watchdog_kills_a_deadlock_and_leaves_no_process(tmp_path):
    marker = "deadlock_marker_4711"
    script = _script(tmp_path, f"{marker}.py", """
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        print(f"rank {comm.rank} waiting", flush=True)
        if comm.rank == 0:
            comm.recv(source=1)  # rank 1 never sends
        else:
            comm.barrier()
    """)
    started = time.monotonic()
    res = launch.run_mpi(2, [script], timeout=10)
    elapsed = time.monotonic() - started
    assert res.timed_out and not res.ok
    assert elapsed < 10 + 15, f"watchdog took {elapsed:.1f} s"
    assert "[watchdog] killed after 10 s" in res.output
    assert "rank 0 waiting" in res.output and "rank 1 waiting" in res.output
    time.sleep(0.5)
    assert _leftovers(marker) == []


def test_removed_and_gpu_only_communicators_are_refused_clearly():
    with pytest.raises(ValueError, match="removed in Chainer 7"):
        mpi.check_communicator_name("hierarchical", gpu=True)
    with pytest.raises(ValueError, match="needs CuPy and GPUs; on CPU use 'naive'"):
        mpi.check_communicator_name("pure_nccl", gpu=False)
    mpi.check_communicator_name("naive", gpu=False)


def test_local_env_allows_root_and_puts_the_venv_first():
    env = launch.local_mpi_env({"PATH": "/usr/bin"})
    assert env["PATH"].split(":")[0] == str(launch.venv_bin())
    assert env["OMP_NUM_THREADS"] == "1"
    if psutil.Process().uids().effective == 0:
        assert env["OMPI_ALLOW_RUN_AS_ROOT"] == "1" and env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"


def test_a_launcher_given_a_killed_ones_pid_still_starts(tmp_path):
    """Open MPI's launcher binds its PMIx sockets in `ompi.<its pid>`; one killed by the watchdog
    leaves that folder behind, and a later launcher that gets the same pid failed with "The PMIx
    server's listener thread failed to start" (twice in one CI run). The folders of launchers that
    are gone are removed before a launch; a live process's is kept."""
    import socket
    import tempfile
    base = Path(tempfile.mkdtemp(prefix="ho", dir="/tmp"))   # short: a socket's path has 108 bytes
    try:
        def plant(pid):
            folder = base / f"ompi.{pid}"
            folder.mkdir()
            for name in (f"pmix.{socket.gethostname()}.tool.{pid}", f"pmix.{socket.gethostname()}.tool",
                         f"pmix.{socket.gethostname()}.tool.prterun-{socket.gethostname()}-{pid}@0"):
                sock = socket.socket(socket.AF_UNIX)
                sock.bind(str(folder / name)[:107])
                sock.close()
        alive = os.getpid()
        plant(alive)
        # The pids the next processes get: the launcher takes one of them.
        planted = [pid for pid in range(alive + 1, alive + 400) if not psutil.pid_exists(pid)]
        for pid in planted:
            plant(pid)
        script = _script(tmp_path, "hello.py", """
            from mpi4py import MPI
            print("started", MPI.COMM_WORLD.size, flush=True)
        """)
        res = launch.run_mpi(2, [script], timeout=60, env={**os.environ, "TMPDIR": str(base)})
        assert res.ok and "started 2" in res.output, res.output
        # Those of processes that ran meanwhile go at the next launch; a live one's (a thread's
        # id included: no launcher can get it either) never.
        launch.clear_stale_mpi_sessions({"TMPDIR": str(base)})
        left = sorted(int(p.name.split(".")[1]) for p in base.iterdir())
        assert alive in left and all(_running(pid) for pid in left), left
    finally:
        shutil.rmtree(base, ignore_errors=True)
