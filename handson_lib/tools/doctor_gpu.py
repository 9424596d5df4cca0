"""`handson doctor`'s GPU rows: CuPy, cuDNN, NCCL, the GPUs, nvidia-smi and the profilers.

CuPy is probed in a subprocess by default (`probe_cuda_subprocess`, which runs `cuda_probe`), so
that a notebook kernel calling the doctor does not initialise CUDA (MultiprocessParallelUpdater
forks).
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import sys
from pathlib import Path

from handson_lib.messages import tr
from handson_lib.runtime import devices
from handson_lib.tools.doctor_rows import (ERROR, MISSING, OK, WARN, Component, expected, not_installed,
                                           not_on_path, run_command, shorten, vtuple)

#: seconds for the CuPy / GPU probe (importing CuPy and querying the devices)
CUDA_PROBE_TIMEOUT = 30

# what the absence of a part disables (functions: in the language of the moment they are shown)

def _no_cupy():
    return tr("GPU runs, cuDNN, NCCL, MultiprocessParallelUpdater on GPUs and the flat / "
              "non_cuda_aware / pure_nccl communicators; the CPU fallback is used (worker processes "
              "whose gradients are summed for Task #1, as MultiprocessParallelUpdater sums them, the "
              "`naive` communicator for ChainerMN)")


def _no_nccl():
    return tr("MultiprocessParallelUpdater needs NCCL; pure_nccl/flat communicators disabled "
              "(and with them allreduce_grad_dtype / double_buffering); CPU backend and `naive` "
              "communicator used instead")


def _no_cudnn():
    return tr("cuDNN convolutions, `chainer.config.autotune` and `use_cudnn_tensor_core` "
              "(notebook 05, tuning); Chainer falls back to slower CuPy kernels")


def _no_profiler():
    return tr("live GPU profiling: the profiling exercise uses the shipped sample profiles")


def cuda_probe() -> dict:
    """CuPy / cuDNN / NCCL / GPU facts, gathered in the current process. Never raises."""
    info = {"cupy": {}, "cudnn": {}, "nccl": {}, "gpus": {}}
    cupy, error = devices.import_cupy()
    if cupy is None:
        info["cupy"] = {"ok": False, "error": error}
        return info
    info["cupy"] = {"ok": True, "version": str(getattr(cupy, "__version__", "?")),
                    "path": str(getattr(cupy, "__file__", ""))}
    try:
        cudnn = importlib.import_module("cupy.cuda.cudnn")
        info["cudnn"] = {"ok": True, "version": int(cudnn.getVersion())}
    except Exception as e:  # noqa: BLE001
        info["cudnn"] = {"ok": False, "error": devices.describe_error(e)}
    info["nccl"] = devices.nccl_library()._asdict()
    gpus = devices.gpu_count()
    info["gpus"] = {"count": gpus.count, "reason": gpus.reason,
                    "devices": [_device_facts(i) for i in range(gpus.count)]}
    return info


def _device_facts(index) -> dict:
    """Name, compute capability and memory of one GPU, as the GPUs row shows them."""
    try:
        p = importlib.import_module("cupy.cuda.runtime").getDeviceProperties(index)
        name = p.get("name", b"?")
        name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
        return {"name": name, "cc": f"{p.get('major', '?')}.{p.get('minor', '?')}",
                "mem_gib": round(p.get("totalGlobalMem", 0) / 2**30, 1)}
    except Exception as e:  # noqa: BLE001
        return {"name": f"? ({devices.describe_error(e, 60)})", "cc": "?", "mem_gib": 0}


def probe_cuda_subprocess(timeout=None) -> dict:
    timeout = CUDA_PROBE_TIMEOUT if timeout is None else timeout
    pkg_parent = str(Path(__file__).resolve().parent.parent)
    code = ("import json, sys; sys.path.insert(0, %r); "
            "from handson_lib.tools.doctor_gpu import cuda_probe; print('JSON ' + json.dumps(cuda_probe()))"
            % pkg_parent)
    rc, out = run_command([sys.executable, "-c", code], timeout=timeout)
    for line in out.splitlines():
        if line.startswith("JSON "):
            try:
                return json.loads(line[5:])
            except ValueError:
                break
    why = out if rc is None else tr("probe exited {code}: {output}", code=rc, output=shorten(
        out.strip().splitlines()[-1] if out.strip() else '', 120))
    return {"probe_error": shorten(why, 160), "cupy": {}, "cudnn": {}, "nccl": {}, "gpus": {}}


def nvidia_smi():
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    rc, out = run_command([exe, "-L"], timeout=10)
    return {"path": exe, "rc": rc, "gpus": [line.strip() for line in out.splitlines()
                                             if line.strip().startswith("GPU ")], "out": out}


def _fmt_cudnn(v):
    v = int(v)
    if v >= 90000:
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"


def _fmt_nccl(v):
    v = int(v)
    if v >= 20900:
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"


def _check_cupy(cuda):
    cupy = cuda.get("cupy") or {}
    if "probe_error" in cuda:
        return Component("CuPy", ERROR, tr("probe failed: {error}", error=cuda["probe_error"]), _no_cupy())
    if not cupy.get("ok"):
        err = cupy.get("error", "?")
        status = MISSING if err.startswith(("ModuleNotFoundError", "ImportError")) and "cupy" in err else ERROR
        absent = status == MISSING and "No module named 'cupy'" in err
        return Component("CuPy", status, not_installed() if absent else err, _no_cupy())
    v = cupy.get("version", "?")
    if vtuple(v) >= (14,):
        return Component("CuPy", WARN, expected(v, "13.x"),
                         tr("cuDNN (CuPy 14 dropped it) and NumPy 1.23 (CuPy 14 needs NumPy 2): "
                            "`pip install 'cupy-cuda12x==13.6.*'`"))
    return Component("CuPy", OK, v)


def _check_cudnn(cudnn, have_cupy):
    if not have_cupy:
        return Component("cuDNN", MISSING, tr("needs CuPy"), _no_cudnn())
    if cudnn.get("ok"):
        return Component("cuDNN", OK, _fmt_cudnn(cudnn["version"]))
    return Component("cuDNN", MISSING, cudnn.get("error", "?"),
                     tr("{disables} (`pip install nvidia-cudnn-cu12`)", disables=_no_cudnn()))


def _check_nccl(nccl, have_cupy):
    """`nccl`: devices.nccl_library() as a dict (it crossed the probe's subprocess as JSON)."""
    if not have_cupy:
        return Component("NCCL", MISSING, tr("needs CuPy"), _no_nccl())
    if not nccl.get("available"):
        return Component("NCCL", MISSING, nccl.get("reason") or "?", _no_nccl())
    if nccl.get("version") is not None:
        return Component("NCCL", OK, _fmt_nccl(nccl["version"]))
    return Component("NCCL", OK, tr("available (version unknown: {error})",
                                    error=nccl.get("version_error") or "?"))


def _check_gpus(gpus, smi, have_cupy):
    devices_found = gpus.get("devices") or []
    if devices_found:
        names = {}
        for d in devices_found:
            key = f"{d['name']} (cc {d['cc']}, {d['mem_gib']} GiB)"
            names[key] = names.get(key, 0) + 1
        found = f"{len(devices_found)}: " + ", ".join(f"{n} x {k}" for k, n in names.items())
        note = ""
        if any(vtuple(d["cc"])[:1] and vtuple(d["cc"]) >= (8,) for d in devices_found):
            note = tr("compute capability >= 8.0: nvprof refuses these GPUs, profile with `nsys`; "
                      "set use_cudnn_tensor_core='always'")
        return Component("GPUs", OK, found, note=note)
    found = "0 (" + (gpus.get("reason") or "?") + ")" if have_cupy else tr("none visible to CuPy (no CuPy)")
    smi_gpus = (smi or {}).get("gpus", [])
    if smi_gpus:
        found = tr("{found}; nvidia-smi lists {n}", found=found, n=len(smi_gpus))
    return Component("GPUs", MISSING, found,
                     tr("GPU runs: Task #1 uses the CPU fallback, ChainerMN runs on CPU with `naive`"))


def _check_nvidia_smi(smi):
    if smi is None:
        return Component("nvidia-smi", MISSING, not_on_path(),
                         tr("only the GPU listing by the driver (no NVIDIA driver on this host?)"))
    if smi["rc"] != 0:
        return Component("nvidia-smi", ERROR, f"{smi['path']}: {shorten(smi['out'], 100)}",
                         tr("only the GPU listing by the driver (driver not loaded?)"))
    listing = "; ".join(re.sub(r"\s*\(UUID:.*\)", "", g) for g in smi["gpus"]) or tr("no GPUs listed")
    return Component("nvidia-smi", OK, shorten(tr("{n} GPU(s): {listing}", n=len(smi["gpus"]),
                                                   listing=listing), 140))


def check_cuda(cuda, smi):
    """Rows CuPy, cuDNN, NCCL, GPUs, nvidia-smi from the CUDA probe and `nvidia-smi -L`."""
    cupy_row = _check_cupy(cuda)
    have_cupy = cupy_row.status in (OK, WARN)
    return [cupy_row,
            _check_cudnn(cuda.get("cudnn") or {}, have_cupy),
            _check_nccl(cuda.get("nccl") or {}, have_cupy),
            _check_gpus(cuda.get("gpus") or {}, smi, have_cupy),
            _check_nvidia_smi(smi)]


def check_profilers(cuda_rows):
    rows = []
    gpu_row = next((r for r in cuda_rows if r.name == "GPUs"), None)
    # the GPUs row has a note only when a GPU has compute capability >= 8.0 (nvprof refuses it);
    # its text is in the student's language
    ampere_plus = gpu_row is not None and gpu_row.status == OK and bool(gpu_row.note)
    for tool in ("nvprof", "nsys"):
        exe = shutil.which(tool)
        if not exe:
            rows.append(Component(tool, MISSING, not_on_path(), _no_profiler()))
        elif tool == "nvprof" and ampere_plus:
            rows.append(Component(tool, WARN, exe,
                                  tr("nvprof on these GPUs (compute capability >= 8.0 is refused): use nsys")))
        else:
            rows.append(Component(tool, OK, exe))
    return rows
