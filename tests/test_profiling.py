"""`handson profile summarize`: the summary of a real Nsight Systems export checked against SQL
written here, an nvprof-format file built here with known kernels, the timeline PNG, bad files."""

import hashlib
import json
import sqlite3
import subprocess

import pytest

from handson_lib import cli
from handson_lib import profiling
from conftest import VENV_BIN

SAMPLE = profiling.sample_profile()
MS = 1_000_000  # ns


def ro(path):
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def union_length(intervals):
    total, cur_start, cur_end = 0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    return total + (cur_end - cur_start if cur_end is not None else 0)


def longest_idle(intervals):
    best, reach = 0, None
    for start, end in sorted(intervals):
        if reach is not None and start > reach:
            best = max(best, start - reach)
        reach = end if reach is None else max(reach, end)
    return best


# ------------------------------------------------------------------------ the real nsys export

@pytest.fixture(scope="module")
def real():
    return profiling.summarize(SAMPLE)


def test_real_export_kernel_and_device_counts_match_sql(real):
    with ro(SAMPLE) as con:
        kernels = con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        devices = con.execute("SELECT COUNT(*) FROM (SELECT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL "
                              "UNION SELECT deviceId FROM CUPTI_ACTIVITY_KIND_MEMCPY)").fetchone()[0]
        copies = con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchone()[0]
    assert kernels > 0
    assert real.format == "nsys" and "Nsight Systems" in real.tool
    assert real.kernel_count == kernels
    assert real.device_count == devices == len(real.devices)
    assert real.memcpy_count == copies


def test_real_export_top_kernels_match_sql(real):
    with ro(SAMPLE) as con:
        rows = con.execute("SELECT s.value, COUNT(*), SUM(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                           "JOIN StringIds s ON s.id = k.shortName GROUP BY s.value "
                           "ORDER BY SUM(k.end - k.start) DESC").fetchall()
    got = [(k.name, k.count, k.total_ns) for k in real.top_kernels]
    assert got == [tuple(r) for r in rows[:real.top]]
    assert real.top_kernel == rows[0][0]
    total = sum(r[2] for r in rows)
    assert real.top_kernels[0].share == pytest.approx(rows[0][2] / total)
    assert sum(k.total_ns for k in real.devices[0].top_kernels) <= total


def test_real_export_busy_fraction_and_longest_gap_match_independent_computation(real):
    with ro(SAMPLE) as con:
        kernels = con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
        activity = kernels + con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchall() \
            + con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchall()
    span = max(e for _, e in activity) - min(s for s, _ in activity)
    busy = union_length(kernels) / span
    assert 0 < busy < 1
    assert real.devices[0].busy_fraction == pytest.approx(busy)
    assert real.busy_fraction == pytest.approx(busy)
    assert real.devices[0].span_ns == span
    longest = longest_idle(activity)
    assert real.longest_gap.duration_ns == longest
    # Every listed gap is longer than the threshold, and the longest one is among them.
    gaps = real.devices[0].gaps
    assert gaps and all(g.duration_ns > real.gap_threshold_ms * MS for g in gaps)
    assert max(g.duration_ns for g in gaps) == longest


def test_real_export_memcpy_bytes_and_nvtx_match_sql(real):
    with ro(SAMPLE) as con:
        by_kind = dict(con.execute("SELECT copyKind, SUM(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY copyKind"))
        nvtx = con.execute("SELECT COALESCE(n.text, s.value), COUNT(*), SUM(n.end - n.start) FROM NVTX_EVENTS n "
                           "LEFT JOIN StringIds s ON s.id = n.textId WHERE n.end IS NOT NULL "
                           "GROUP BY 1").fetchall()
    # CUPTI's copy kinds: 1 host to device, 2 device to host.
    assert real.memcpy_bytes("HtoD") == by_kind.get(1, 0) > 0
    assert real.memcpy_bytes("DtoH") == by_kind.get(2, 0) > 0
    assert {(n.name, n.count, n.total_ns) for n in real.nvtx} == {tuple(r) for r in nvtx}
    assert real.nvtx_count == sum(r[1] for r in nvtx)


def test_real_export_is_opened_read_only(tmp_path):
    before = hashlib.sha256(SAMPLE.read_bytes()).hexdigest()
    profiling.summarize(SAMPLE)
    assert hashlib.sha256(SAMPLE.read_bytes()).hexdigest() == before
    assert not SAMPLE.with_name(SAMPLE.name + "-journal").exists()


# ------------------------------------------------------------------------ an nvprof-format file

NVPROF_TABLES = """
CREATE TABLE StringTable(_id_ INTEGER PRIMARY KEY AUTOINCREMENT, value TEXT NOT NULL UNIQUE);
CREATE TABLE Version(version INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL(_id_ INTEGER PRIMARY KEY AUTOINCREMENT,
  cacheConfig BLOB NOT NULL, sharedMemoryConfig INT NOT NULL, registersPerThread INT NOT NULL,
  start INT NOT NULL, end INT NOT NULL, completed INT NOT NULL, deviceId INT NOT NULL,
  contextId INT NOT NULL, streamId INT NOT NULL, gridX INT NOT NULL, gridY INT NOT NULL,
  gridZ INT NOT NULL, blockX INT NOT NULL, blockY INT NOT NULL, blockZ INT NOT NULL,
  correlationId INT NOT NULL, gridId INT NOT NULL, name INT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(_id_ INTEGER PRIMARY KEY AUTOINCREMENT, copyKind INT NOT NULL,
  srcKind INT NOT NULL, dstKind INT NOT NULL, flags INT NOT NULL, bytes INT NOT NULL, start INT NOT NULL,
  end INT NOT NULL, deviceId INT NOT NULL, contextId INT NOT NULL, streamId INT NOT NULL,
  correlationId INT NOT NULL, runtimeCorrelationId INT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY2(_id_ INTEGER PRIMARY KEY AUTOINCREMENT, copyKind INT NOT NULL,
  srcKind INT NOT NULL, dstKind INT NOT NULL, flags INT NOT NULL, bytes INT NOT NULL, start INT NOT NULL,
  end INT NOT NULL, deviceId INT NOT NULL, contextId INT NOT NULL, streamId INT NOT NULL,
  srcDeviceId INT NOT NULL, srcContextId INT NOT NULL, dstDeviceId INT NOT NULL,
  dstContextId INT NOT NULL, correlationId INT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET(_id_ INTEGER PRIMARY KEY AUTOINCREMENT, value INT NOT NULL,
  bytes INT NOT NULL, start INT NOT NULL, end INT NOT NULL, deviceId INT NOT NULL, contextId INT NOT NULL,
  streamId INT NOT NULL, correlationId INT NOT NULL, flags INT NOT NULL, memoryKind INT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(_id_ INTEGER PRIMARY KEY AUTOINCREMENT, cbid INT NOT NULL,
  start INT NOT NULL, end INT NOT NULL, processId INT NOT NULL, threadId INT NOT NULL,
  correlationId INT NOT NULL, returnValue INT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MARKER(_id_ INTEGER PRIMARY KEY AUTOINCREMENT, flags INT NOT NULL,
  timestamp INT NOT NULL, id INT NOT NULL, objectKind INT NOT NULL, objectId BLOB NOT NULL,
  name INT NOT NULL, domain INT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_DEVICE(_id_ INTEGER PRIMARY KEY AUTOINCREMENT, computeCapabilityMajor INT NOT NULL,
  computeCapabilityMinor INT NOT NULL, id INT NOT NULL, name INT NOT NULL);
"""

BASE = 1_600_000_000_000_000_000  # nvprof stamps are absolute
RANK0, RANK1 = 4242, 4343
CONV = "_Z6conv2dPKfPfi"                                   # mangled, as nvprof stores them
NCCL_NAME = "ncclKernel_AllReduce_RING_LL_Sum_float"
NCCL = f"_Z{len(NCCL_NAME)}{NCCL_NAME}P14ncclWorkElem"
RELU = "relu_forward"                                     # an extern "C" kernel: not mangled


def build_nvprof(path):
    """Device 0 (rank 0): HtoD 0-2 ms; conv2d 2-6, 6-10 (stream 7); NCCL allreduce 9-14 on stream 13,
    overlapping conv2d by 1 ms; idle 14-20 ms (the host in NVTX 'data loading'); relu 20-21;
    idle 0.5 ms; DtoH 21.5-23; memset 23-23.5. Device 1 (rank 1): conv2d 5-8, peer copy 8-9 ms."""
    con = sqlite3.connect(path)
    con.executescript(NVPROF_TABLES)
    con.execute("INSERT INTO Version VALUES (11)")
    names = {}
    for text in (CONV, NCCL, RELU, "forward", "allreduce", "data loading", "decode", "a mark",
                 "Tesla P100-SXM2-16GB"):
        names[text] = con.execute("INSERT INTO StringTable (value) VALUES (?)", (text,)).lastrowid
    corr = iter(range(1, 100))

    def runtime(pid):
        c = next(corr)
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (cbid, start, end, processId, threadId, "
                    "correlationId, returnValue) VALUES (211, ?, ?, ?, ?, ?, 0)", (BASE, BASE + 10, pid, pid, c))
        return c

    def kernel(name, start, end, device, stream, pid):
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL (cacheConfig, sharedMemoryConfig, "
                    "registersPerThread, start, end, completed, deviceId, contextId, streamId, gridX, gridY, "
                    "gridZ, blockX, blockY, blockZ, correlationId, gridId, name) VALUES "
                    "(x'00', 0, 32, ?, ?, ?, ?, 1, ?, 1, 1, 1, 256, 1, 1, ?, 1, ?)",
                    (BASE + start, BASE + end, BASE + end, device, stream, runtime(pid), names[name]))

    def memcpy(kind, nbytes, start, end, device, stream, pid, table="CUPTI_ACTIVITY_KIND_MEMCPY"):
        extra = ", runtimeCorrelationId" if table.endswith("MEMCPY") else ", srcDeviceId, srcContextId, dstDeviceId, dstContextId"
        values = ", 0" if table.endswith("MEMCPY") else ", 1, 1, 0, 1"
        con.execute(f"INSERT INTO {table} (copyKind, srcKind, dstKind, flags, bytes, start, end, deviceId, "
                    f"contextId, streamId, correlationId{extra}) VALUES (?, 1, 3, 0, ?, ?, ?, ?, 1, ?, ?{values})",
                    (kind, nbytes, BASE + start, BASE + end, device, stream, runtime(pid)))

    def marker(marker_id, name, start, end, pid):
        thread = pid.to_bytes(4, "little") + pid.to_bytes(8, "little")
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MARKER (flags, timestamp, id, objectKind, objectId, name, "
                    "domain) VALUES (2, ?, ?, 2, ?, ?, 0)", (BASE + start, marker_id, thread, names[name]))
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MARKER (flags, timestamp, id, objectKind, objectId, name, "
                    "domain) VALUES (4, ?, ?, 2, ?, 0, 0)", (BASE + end, marker_id, thread))

    memcpy(1, 4_000_000, 0, 2 * MS, 0, 7, RANK0)
    kernel(CONV, 2 * MS, 6 * MS, 0, 7, RANK0)
    kernel(CONV, 6 * MS, 10 * MS, 0, 7, RANK0)
    kernel(NCCL, 9 * MS, 14 * MS, 0, 13, RANK0)
    kernel(RELU, 20 * MS, 21 * MS, 0, 7, RANK0)
    memcpy(2, 1_000_000, 21_500_000, 23 * MS, 0, 7, RANK0)
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (value, bytes, start, end, deviceId, contextId, streamId, "
                "correlationId, flags, memoryKind) VALUES (0, 512, ?, ?, 0, 1, 7, ?, 0, 3)",
                (BASE + 23 * MS, BASE + 23_500_000, runtime(RANK0)))
    kernel(CONV, 5 * MS, 8 * MS, 1, 20, RANK1)
    memcpy(10, 2_000_000, 8 * MS, 9 * MS, 1, 20, RANK1, table="CUPTI_ACTIVITY_KIND_MEMCPY2")
    marker(1, "forward", 1 * MS, 10 * MS, RANK0)
    marker(2, "allreduce", 9 * MS, 14 * MS, RANK0)
    marker(3, "data loading", 14 * MS, 20 * MS, RANK0)
    marker(4, "decode", 15 * MS, 18 * MS, RANK0)
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MARKER (flags, timestamp, id, objectKind, objectId, name, domain) "
                "VALUES (1, ?, 5, 2, ?, ?, 0)", (BASE + 3 * MS, b"\0" * 12, names["a mark"]))
    for device in (0, 1):
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_DEVICE (computeCapabilityMajor, computeCapabilityMinor, id, "
                    "name) VALUES (6, 0, ?, ?)", (device, names["Tesla P100-SXM2-16GB"]))
    con.commit()
    con.close()
    return path


@pytest.fixture(scope="module")
def nvprof_file(tmp_path_factory):
    return build_nvprof(tmp_path_factory.mktemp("nvprof") / "prof_0_4242.nvvp")


def test_nvprof_file_kernels_processes_and_devices(nvprof_file):
    s = profiling.summarize(nvprof_file)
    assert s.format == "nvprof"
    assert s.kernel_count == 5 and s.device_count == 2
    assert [(k.name, k.count, k.total_ns) for k in s.top_kernels] == [
        ("conv2d", 3, 11 * MS), (NCCL_NAME, 1, 5 * MS), ("relu_forward", 1, 1 * MS)]
    assert s.top_kernels[1].nccl and not s.top_kernels[0].nccl
    dev0, dev1 = s.devices
    assert dev0.name == "Tesla P100-SXM2-16GB"
    assert (dev0.processes, dev1.processes) == ([RANK0], [RANK1])
    assert (dev0.streams, dev1.streams) == ([7, 13], [20])
    assert {p.process: p.devices for p in s.processes} == {RANK0: [0], RANK1: [1]}
    # Time zero is the first event (absolute stamps): device 0 starts at 0, device 1 at 5 ms.
    assert (dev0.start_ns, dev1.start_ns) == (0, 5 * MS)


def test_nvprof_file_busy_fraction_nccl_share_and_gaps(nvprof_file):
    dev0, dev1 = profiling.summarize(nvprof_file, gap_threshold_ms=1.0).devices
    # Kernels cover 2-14 and 20-21 ms (the NCCL kernel overlaps conv2d by 1 ms: counted once).
    assert dev0.span_ns == 23_500_000
    assert dev0.busy_ns == 13 * MS
    assert dev0.busy_fraction == pytest.approx(13 / 23.5)
    assert dev0.kernel_time_ns == 14 * MS
    assert dev0.nccl_share == pytest.approx(5 / 14)
    assert [(g.start_ns, g.end_ns, g.after, g.before) for g in dev0.gaps] == [(14 * MS, 20 * MS, NCCL_NAME, "relu_forward")]
    assert dev0.longest_gap.duration_ns == 6 * MS
    # The 0.5 ms gap before the DtoH copy is below the threshold; with 0.4 ms it is listed.
    assert len(profiling.summarize(nvprof_file, gap_threshold_ms=0.4).devices[0].gaps) == 2
    # What the host did during the long gap, from NVTX.
    assert dev0.host_during_gaps == [["data loading", 6 * MS], ["decode", 3 * MS]]
    assert dev0.gaps_outside_nvtx_ns == 0
    assert dev1.busy_fraction == pytest.approx(3 / 4) and dev1.gaps == []


def test_nvprof_file_copies_and_nvtx(nvprof_file):
    s = profiling.summarize(nvprof_file)
    assert {(m.direction, m.count, m.bytes, m.total_ns) for m in s.memcpy} == {
        ("HtoD", 1, 4_000_000, 2 * MS), ("DtoH", 1, 1_000_000, 1_500_000), ("PtoP", 1, 2_000_000, 1 * MS)}
    # The instantaneous mark is not a range.
    assert {(n.name, n.count, n.total_ns) for n in s.nvtx} == {
        ("forward", 1, 9 * MS), ("allreduce", 1, 5 * MS), ("data loading", 1, 6 * MS), ("decode", 1, 3 * MS)}
    assert {r.process for r in s.data.nvtx} == {RANK0}


def test_short_kernel_names():
    assert profiling.short_kernel_name("_Z5saxpyidPfS_") == "saxpy"
    assert profiling.short_kernel_name("_ZN5cupyx7kernels4reluEPKfPfi") == "relu"
    assert profiling.short_kernel_name("void gemm<float>(float*, int)") == "void gemm<float>"
    assert profiling.short_kernel_name("plain_c_kernel") == "plain_c_kernel"


# ------------------------------------------------------------------------ the CLI and the timeline

def test_cli_prints_the_figures_and_writes_a_png(real, tmp_path, capsys):
    png = tmp_path / "timeline.png"
    assert cli.main(["profile", "summarize", str(SAMPLE), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert f"{real.kernel_count} kernel launches" in out
    assert f"busy fraction (kernels)  : {real.devices[0].busy_fraction:.3f}" in out
    assert real.top_kernel in out and "idle gaps > 1 ms" in out
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_timeline_has_one_row_per_stream_then_nvtx(nvprof_file):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with ro(SAMPLE) as con:
        streams = con.execute("SELECT COUNT(*) FROM (SELECT deviceId, streamId FROM CUPTI_ACTIVITY_KIND_KERNEL "
                              "UNION SELECT deviceId, streamId FROM CUPTI_ACTIVITY_KIND_MEMCPY)").fetchone()[0]
    rows = [label for _, label in profiling.timeline_rows(SAMPLE)]
    assert len([r for r in rows if r.startswith("GPU")]) == streams
    assert rows[-1].startswith("NVTX")

    fig = profiling.timeline_figure(nvprof_file)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == [f"GPU 0 stream 7 (pid {RANK0})", f"GPU 0 stream 13 (pid {RANK0})",
                      f"GPU 1 stream 20 (pid {RANK1})", f"NVTX pid {RANK0}", f"NVTX pid {RANK0} level 1"]
    plt.close(fig)


def test_cli_json(nvprof_file, capsys):
    assert cli.main(["profile", "summarize", str(nvprof_file), "--json", "--top", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kernel_count"] == 5 and out["device_count"] == 2
    assert out["top_kernel"] == "conv2d" and len(out["top_kernels"]) == 2
    assert out["devices"][0]["gaps"][0]["start_ns"] == 14 * MS


# ------------------------------------------------------------------------ bad input

@pytest.mark.parametrize("make,needle", [
    (lambda p: p.write_text("epoch  main/loss\n1  2.3\n"), "not an SQLite file"),
    (lambda p: p.write_bytes(b""), "an empty file"),
    (lambda p: sqlite3.connect(p).executescript("CREATE TABLE results(x); INSERT INTO results VALUES (1);"),
     "neither profiler wrote it"),
])
def test_bad_files_are_refused_with_how_to_export(tmp_path, capsys, make, needle):
    path = tmp_path / "prof.sqlite"
    make(path)
    assert cli.main(["profile", "summarize", str(path)]) == 2
    err = capsys.readouterr().err
    assert needle in err and "nsys export --type sqlite" in err and "nvprof -o" in err


def test_report_file_not_exported_and_missing_file(tmp_path):
    rep = tmp_path / "prof_0.nsys-rep"
    rep.write_bytes(b"\x00QDSTRM" + bytes(64))
    with pytest.raises(profiling.ProfileFormatError, match=r"nsys export --type sqlite -o prof_0.sqlite prof_0.nsys-rep"):
        profiling.summarize(rep)
    with pytest.raises(profiling.ProfileFormatError, match="no such file"):
        profiling.summarize(tmp_path / "missing.sqlite")


def test_handson_command_exits_non_zero_on_a_bad_file(tmp_path):
    bad = tmp_path / "log.txt"
    bad.write_text("Throughput: 51.1 [images/sec.]\n")
    result = subprocess.run([str(VENV_BIN / "handson"), "profile", "summarize", str(bad)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "not an SQLite file" in result.stderr and "Traceback" not in result.stderr


def test_print_query_shows_columns_and_limits_rows(capsys):
    with ro(SAMPLE) as con:
        profiling.print_query(con, "SELECT start, end - start AS ns FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start", limit=2)
        first = con.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start").fetchone()[0]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["start", "ns"]
    assert lines[1].split()[0] == str(first)
    assert len(lines) == 4 and lines[-1].startswith("...")


def test_nsys_export_without_cuda_trace_says_so(tmp_path):
    path = tmp_path / "nvtx_only.sqlite"
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
                                 text TEXT, globalTid INTEGER, textId INTEGER);
        INSERT INTO StringIds VALUES (1, 'epoch');
        INSERT INTO NVTX_EVENTS VALUES (1000, 5000, 59, NULL, (7 << 24) | 7, 1);
        INSERT INTO NVTX_EVENTS VALUES (2000, NULL, 34, 'a mark', (7 << 24) | 7, NULL);
    """)
    con.commit()
    con.close()
    s = profiling.summarize(path)
    assert s.format == "nsys" and s.kernel_count == 0 and s.devices == []
    assert [(n.name, n.count, n.total_ns) for n in s.nvtx] == [("epoch", 1, 4000)]
    assert s.processes[0].process == 7
    assert any("--trace=cuda" in note for note in s.notes)
    assert "--trace=cuda" in s.text()


def test_notebook_03_shows_no_answer_of_questions_1_to_5_before_they_are_answered(capsys):
    """The summary prints the five answers: it waits for all five; the comparison never prints the
    tool's value, only whether an answer is the same."""
    from handson_lib.profiling import compare
    summaries = {name: profiling.summarize(profiling.sample_profile(name)) for name in ("saxpy", "mlp")}
    truth = compare.truth(summaries)
    assert not compare.show_summary(summaries, {"n_kernels": 3})
    compare.compare_answers(summaries, {"n_kernels": truth["n_kernels"] + 1})
    shown = capsys.readouterr().out
    assert "still open: htod_bytes, top_kernel_name, busy_fraction, longest_gap_ms" in shown
    assert str(truth["htod_bytes"]) not in shown and str(truth["top_kernel_name"]) not in shown, shown
    assert "differs from the tool" in shown and "not answered yet" in shown
    answers = dict(truth)
    assert compare.show_summary(summaries, answers)
    compare.compare_answers(summaries, answers)
    shown = capsys.readouterr().out
    assert shown.count("the same as the tool") == 5
    assert all(summary.text() in shown for summary in summaries.values())


def test_the_h100_training_loop_sample_has_what_notebook_03_asks_about():
    """The second sample: a real Nsight Systems export with many kernel names on two compute
    streams whose kernels overlap (the union differs from the sum), a copy stream, and a kernel with
    the most time that is not the most launched; `handson profile summarize sample-mlp` reads it."""
    path = profiling.sample_profile("mlp")
    with sqlite3.connect(path.as_uri() + "?mode=ro", uri=True) as con:
        names, streams = con.execute("SELECT COUNT(DISTINCT shortName), COUNT(DISTINCT streamId) "
                                     "FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        by_time = con.execute("SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY shortName "
                              "ORDER BY SUM(end - start) DESC LIMIT 1").fetchone()[0]
        by_count = con.execute("SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY shortName "
                               "ORDER BY COUNT(*) DESC LIMIT 1").fetchone()[0]
        kernels = sorted(con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL"))
        copy_streams = {s for (s,) in con.execute("SELECT DISTINCT streamId FROM CUPTI_ACTIVITY_KIND_MEMCPY")}
    assert names >= 10 and streams >= 2 and by_time != by_count
    assert any(b[0] < a[1] for a, b in zip(kernels, kernels[1:])), "no two kernels overlap"
    assert len(copy_streams) >= 2   # the copy stream of the batches, and the loss read back
    res = subprocess.run([str(VENV_BIN / "handson"), "profile", "summarize", "sample-mlp"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0 and "NVIDIA H100" in res.stdout and "the GPU waits for the host" in res.stdout, res
    with pytest.raises(ValueError, match="no sample profile"):
        profiling.sample_profile("resnet")
