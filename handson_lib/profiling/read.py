"""One entry point for both profilers: `read_profile(path)`; and the sample shipped with the course."""

import sqlite3
from pathlib import Path

from handson_lib.profiling.model import HOW_TO_EXPORT, ProfileData, ProfileFormatError
from handson_lib.profiling.nsys import read_nsys
from handson_lib.profiling.nvprof import read_nvprof
from handson_lib.profiling.sqlite_file import open_readonly, table_names

#: The real Nsight Systems exports shipped with the course (sample_profiles/README.md says where
#: each comes from): "saxpy", an MPI + CUDA SAXPY on one A100 (the export's tables, small); "mlp", a
#: CuPy training loop on one H100 (many kernels, two compute streams, a host-bound timeline).
SAMPLES = {"saxpy": "saxpy-mpi-cuda_nsys_a100.sqlite", "mlp": "mlp_h100_nsys.sqlite"}
SAMPLE_NAME = SAMPLES["saxpy"]


def sample_profile(name="saxpy"):
    """The path of a sample profile shipped with the course (SAMPLES)."""
    if name not in SAMPLES:
        raise ValueError(f"no sample profile {name!r}: choose one of {', '.join(SAMPLES)}")
    path = Path(__file__).resolve().parent / "sample_profiles" / SAMPLES[name]
    if not path.is_file():
        raise FileNotFoundError(f"the sample profile {path} is missing: reinstall the course "
                                "(`make setup`), it ships in handson_lib/profiling/sample_profiles/")
    return path


def detect_format(tables):
    """'nsys' or 'nvprof' from the table names of an SQLite file; ProfileFormatError otherwise."""
    if "StringIds" in tables and tables & {"CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS",
                                           "TARGET_INFO_GPU", "EXPORT_META_DATA", "META_DATA_EXPORT",
                                           "TARGET_INFO_SESSION_START_TIME",
                                           "CUPTI_ACTIVITY_KIND_RUNTIME"}:
        return "nsys"
    if "StringTable" in tables and any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in tables):
        return "nvprof"
    shown = ", ".join(sorted(tables)[:8]) or "none"
    raise ProfileFormatError(
        "an SQLite file, but neither profiler wrote it: expected an Nsight Systems export "
        "(tables StringIds, CUPTI_ACTIVITY_KIND_KERNEL, NVTX_EVENTS) or an nvprof file (tables "
        f"StringTable, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MARKER); it has: "
        f"{shown}. {HOW_TO_EXPORT}.")


def read_profile(path):
    """All kernels, copies and NVTX ranges of an nsys export or nvprof file (ProfileData)."""
    con = open_readonly(path)
    try:
        tables = table_names(con)
        fmt = detect_format(tables)
        data = ProfileData(path=str(path), format=fmt, tool="", origin_ns=0)
        try:
            (read_nsys if fmt == "nsys" else read_nvprof)(con, tables, data)
        except sqlite3.DatabaseError as error:
            raise ProfileFormatError(f"{path}: looks like a {fmt} file but a table lacks what it "
                                     f"should hold ({error}). {HOW_TO_EXPORT}.") from None
    finally:
        con.close()
    data.ops.sort(key=lambda op: (op.start, op.end))
    data.nvtx.sort(key=lambda r: (r.start, -r.end))
    return data
