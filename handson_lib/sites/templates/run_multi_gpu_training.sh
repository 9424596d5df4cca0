#% Task #1's job script. Rendered for every site into jobscripts/<site>/, and for the course's
#% site into solutions/run_multi_gpu_training.sh (there with the exercise's own lines above
#% {{DIRECTIVES}}); `handson build` writes them all. Lines starting with #% stay here.
#!/bin/bash
# handson-site: {{SITE}}   (the rules `handson jobscript lint` applies; see jobscripts/README.md)
# Task #1 on {{TITLE}}: one node, MultiprocessParallelUpdater on its {{NODE_GPUS}} (one MPI
# process: the updater starts one worker process per GPU). Submit from the folder that holds
# your {{MULTI_GPU_SCRIPT}}:
{{USAGE}}
{{GROUP_HINT}}
{{DIRECTIVES}}

set -eu
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

{{ENVIRONMENT}}
# GPUs of the second run (the first uses GPU 0 alone): all of the node's by default.
GPUS=${GPUS:-{{GPU_LIST}}}

TASK={{MULTI_GPU_SCRIPT}}
{{FIND_TASK}}

# Versions first, as the seed's job.sh does.
"$PYTHON" -c "import chainer; print('chainer', chainer.__version__)"
"$PYTHON" -c "import cupy; print('cupy', cupy.__version__, 'nccl', cupy.cuda.nccl.get_version() if cupy.cuda.nccl.available else 'not available')" 2>/dev/null \
  || echo "cupy: not importable here (the CPU stand-in will run)"

"$PYTHON" "$TASK" --gpus 0 --dataset "$DATASET" --no-progress --out result/single ${EXTRA_ARGS:-}
# A node with one GPU (Miyabi-G) has nothing to split: the 1-GPU run is all there is.
if [ "$(echo $GPUS | wc -w)" -gt 1 ]; then
  "$PYTHON" "$TASK" --gpus $GPUS --dataset "$DATASET" --no-progress --out result/multi ${EXTRA_ARGS:-}
fi
