GPU_FLAG=""
if "$PYTHON" -c "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 and cupy.cuda.nccl.available else 1)" 2>/dev/null; then
  GPU_FLAG="--gpu"
else
  echo "no usable GPU/NCCL here: CPU ranks with the naive communicator"
fi
