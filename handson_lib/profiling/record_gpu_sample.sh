#!/usr/bin/env bash
# How the sample profile mlp_h100.sqlite was recorded (one NVIDIA GPU, CuPy, Nsight Systems):
#   OUT=folder bash handson_lib/profiling/record_gpu_sample.sh
# NSYS may name the nsys binary (default: the first on PATH, else the one Nsight Compute ships).
set -euo pipefail
OUT=${OUT:?set OUT to the folder for the profile}
NSYS=${NSYS:-$(command -v nsys || ls /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys | tail -1)}
"$NSYS" --version
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import cupy; print('CuPy', cupy.__version__, 'CUDA runtime', cupy.cuda.runtime.runtimeGetVersion())"
timeout 120 python3 "$(dirname "$0")/gpu_sample.py" --iterations 3
timeout 240 "$NSYS" profile -t cuda,nvtx --sample=none --cpuctxsw=none --force-overwrite true \
  -o "$OUT/mlp_h100" python3 "$(dirname "$0")/gpu_sample.py" --iterations 30
if [ ! -f "$OUT/mlp_h100.nsys-rep" ]; then
  # an nsys without its importer (the one Nsight Compute ships) leaves a .qdstrm: import it
  IMPORTER=$(ls "$(dirname "$NSYS")"/../*/QdstrmImporter | head -1)
  timeout 120 "$IMPORTER" -i "$OUT/mlp_h100.qdstrm"
fi
timeout 120 "$NSYS" export --type sqlite --force-overwrite true -o "$OUT/mlp_h100.sqlite" "$OUT/mlp_h100.nsys-rep"
python3 - "$OUT/mlp_h100.sqlite" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
print(con.execute("SELECT COUNT(*), COUNT(DISTINCT shortName), COUNT(DISTINCT streamId) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone())
for row in con.execute("SELECT s.value, COUNT(*), SUM(k.end - k.start) AS t FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                       "JOIN StringIds s ON s.id = k.shortName GROUP BY s.value ORDER BY t DESC LIMIT 12"):
    print(row)
print(con.execute("SELECT copyKind, COUNT(*), SUM(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY copyKind").fetchall())
PY
