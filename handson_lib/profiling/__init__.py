"""`handson profile summarize FILE [--plot PNG]`: where the GPU time went, read from a real profile.

    handson profile summarize prof_0.sqlite                    # Nsight Systems SQLite export
    handson profile summarize prof_0_12345.nvvp --plot t.png   # nvprof -o file, timeline to PNG
    handson profile summarize sample --json                    # the shipped A100 sample, as JSON

Two formats, both SQLite, one summary: Nsight Systems exports (`nsys export --type sqlite
report.nsys-rep`, or `nsys profile --export=sqlite`; read by `nsys`) and nvprof output files
(`nvprof -o prof.nvvp ...`; read by `nvprof`). The format is told by the tables present. Files
are opened read-only (`file:...?mode=ro`).

Definitions, per device (a deviceId of the file; ranks that each see their GPU as device 0
through CUDA_VISIBLE_DEVICES belong in separate files, one per rank, as the job scripts write):

- span: from the first to the last GPU activity (kernel, memcpy or memset) on the device;
- busy fraction: the union of the kernel intervals (kernels overlapping on several streams count
  once) divided by the span;
- idle gap: a stretch inside the span with no kernel, memcpy nor memset on the device. Gaps longer
  than the threshold (1 ms by default) are listed: there the GPU waits for the host, the CPU
  bottleneck of the seed's Visual Profiler slides (data loading, Python overhead, MPI calls);
  the NVTX ranges open during the gaps say what the host was doing;
- communication share: the time of kernels whose name contains "nccl" (any case) over all
  kernel time.

Modules: `model` (what a profile holds), `sqlite_file`, `nsys` and `nvprof` (the two readers),
`read` (`read_profile`, the shipped sample), `summary` (`summarize`, the summary's dataclasses),
`report` (the text report), `timeline` (the figure), `command` (`handson profile summarize`).
`cpu_timeline` draws the other kind of timeline, without a GPU or a profiler: the forward /
backward / allreduce / update spans of every CPU rank that `handson profile breakdown` records,
as a figure and as a Chrome trace for ui.perfetto.dev (`chrome_trace`, `write_chrome_trace`).
The names below are the package's API.
"""

from handson_lib.profiling import cpu_timeline
from handson_lib.profiling.command import add_arguments, main
from handson_lib.profiling.cpu_timeline import chrome_trace, write_chrome_trace
from handson_lib.profiling.model import GpuOp, NvtxRange, ProfileData, ProfileFormatError, short_kernel_name
from handson_lib.profiling.read import detect_format, read_profile, sample_profile
from handson_lib.profiling.sqlite_file import print_query
from handson_lib.profiling.summary import (DeviceSummary, Gap, KernelStat, MemcpyStat, NvtxStat,
                                           ProcessSummary, ProfileSummary, merge_intervals, summarize)
from handson_lib.profiling.timeline import timeline_figure, timeline_rows

__all__ = [
    "ProfileFormatError", "GpuOp", "NvtxRange", "ProfileData", "short_kernel_name",
    "detect_format", "read_profile", "sample_profile", "print_query",
    "summarize", "ProfileSummary", "DeviceSummary", "ProcessSummary", "KernelStat", "MemcpyStat",
    "Gap", "NvtxStat", "merge_intervals", "timeline_figure", "timeline_rows",
    "cpu_timeline", "chrome_trace", "write_chrome_trace",
    "add_arguments", "main",
]
