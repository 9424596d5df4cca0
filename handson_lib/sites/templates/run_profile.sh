#% A profiling run (Task #2, or Task #1 with PROFILE_TASK=multi-gpu), rendered for every site into
#% jobscripts/<site>/ by `handson build`. Lines starting with #% stay here.
#!/bin/bash
# handson-site: {{SITE}}   (the rules `handson jobscript lint` applies; see jobscripts/README.md)
# Profiling run on {{TITLE}} with {{PROFILER}}, only when PROFILE=1: Task #2 on
# {{REQUEST}}, or Task #1 on the GPUs of one node.
{{USAGE}}
{{PROFILE_ABOUT}}
{{GROUP_HINT}}
{{DIRECTIVES}}

set -eu
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

{{ENVIRONMENT}}
PROFILE_TASK=${PROFILE_TASK:-multi-node}

case "$PROFILE_TASK" in
  multi-node) TASK={{MULTI_NODE_SCRIPT}} ;;
  multi-gpu) TASK={{MULTI_GPU_SCRIPT}} ;;
  *) echo "PROFILE_TASK must be multi-node or multi-gpu, not $PROFILE_TASK"; exit 2 ;;
esac
{{FIND_TASK}}

{{RANKS}}

PROFILER=()
if [ "${PROFILE:-0}" = 1 ]; then
  if ! command -v {{PROFILER}} > /dev/null 2>&1; then
    echo "PROFILE=1 but {{PROFILER}} is not on PATH ({{PROFILER_HINT}}): no profile taken"
    exit 3
  fi
{{PROFILER_COMMAND}}
  echo "profiling with: ${PROFILER[*]}"
  # NVTX ranges forward / backward / allreduce / update on the timeline and their times in the
  # log (handson_lib.experiments.breakdown). 1 synchronises the GPU at each phase boundary; nvtx: ranges only.
  export HANDSON_PHASES=${HANDSON_PHASES:-1}
else
  echo "PROFILE is not 1: plain run ({{PROFILE_ON}} to profile)"
  export HANDSON_PHASES=${HANDSON_PHASES:-0}
fi

{{GPU_FLAG}}

if [ "$PROFILE_TASK" = multi-gpu ]; then
  ${PROFILER[@]+"${PROFILER[@]}"} "$PYTHON" "$TASK" --gpus {{GPU_LIST}} --dataset "$DATASET" --no-progress \
    --out result/profile_multi_gpu ${EXTRA_ARGS:-}
else
  {{LAUNCH}} \
    -x PATH -x LD_LIBRARY_PATH -x PYTHONUSERBASE -x PYTHONPATH -x OMP_NUM_THREADS -x HANDSON_PHASES \
    ${PROFILER[@]+"${PROFILER[@]}"} "$PYTHON" "$TASK" $GPU_FLAG --dataset "$DATASET" --no-progress \
    --out result/profile_multi_node ${EXTRA_ARGS:-}
fi
