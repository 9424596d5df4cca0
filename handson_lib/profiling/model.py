"""What a profile holds, whichever profiler wrote it: GPU operations, NVTX ranges, names.

Times are in ns, as in the files; `ProfileData.origin_ns` is the report's time zero.
"""

from dataclasses import dataclass, field

# CUpti_ActivityMemcpyKind, used by nvprof and by Nsight Systems exports alike.
COPY_KINDS = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD",
              7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP"}

HOW_TO_EXPORT = ("`handson profile summarize` reads Nsight Systems SQLite exports "
                 "(`nsys export --type sqlite report.nsys-rep`, or `nsys profile --export=sqlite ...`) "
                 "and nvprof output files (`nvprof -o prof.nvvp ...`)")


class ProfileFormatError(ValueError):
    """The file is missing, not SQLite, or an SQLite file of neither profiler."""


@dataclass
class GpuOp:
    """One kernel, memcpy or memset on a device. Times in ns, as in the file."""
    kind: str              # "kernel", "memcpy" or "memset"
    name: str              # kernel short name, copy direction ("HtoD") or "memset"
    start: int
    end: int
    device: int
    stream: int
    process: int = None    # OS process id when the file tells it
    bytes: int = 0
    full_name: str = ""    # demangled (nsys) or as stored (nvprof) kernel name

    @property
    def duration(self):
        return self.end - self.start


@dataclass
class NvtxRange:
    name: str
    start: int
    end: int
    process: int = None

    @property
    def duration(self):
        return self.end - self.start


@dataclass
class ProfileData:
    path: str
    format: str                      # "nsys" or "nvprof"
    tool: str
    origin_ns: int                   # time zero of the report
    ops: list = field(default_factory=list)
    nvtx: list = field(default_factory=list)
    device_names: dict = field(default_factory=dict)
    process_names: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)

    @property
    def kernels(self):
        return [op for op in self.ops if op.kind == "kernel"]


def short_kernel_name(name):
    """A readable kernel name from a mangled (`_Z5saxpyidPfS_` -> `saxpy`) or demangled one.

    nvprof stores mangled names; best effort, the name as stored when it cannot be parsed."""
    if not name:
        return name or "?"
    if not name.startswith("_Z"):
        return name.split("(")[0].strip() or name
    text, i, last = name, 2, None
    nested = text[i:i + 1] == "N"
    if nested:
        i += 1
    while i < len(text):
        while i < len(text) and text[i] in "rVKL":  # cv-qualifiers before a nested name
            i += 1
        j = i
        while j < len(text) and text[j].isdigit():
            j += 1
        if j == i:
            break
        length = int(text[i:j])
        last = text[j:j + length]
        i = j + length
        if not nested:
            break
    return last or name
