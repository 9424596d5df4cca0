#% Task #2's job script. Rendered for every site into jobscripts/<site>/, and for the course's
#% site into solutions/run_multi_node_training.sh (there with the exercise's own lines above
#% {{DIRECTIVES}}); `handson build` writes them all. Lines starting with #% stay here.
#!/bin/bash
# handson-site: {{SITE}}   (the rules `handson jobscript lint` applies; see jobscripts/README.md)
# Task #2 (ChainerMN) on {{TITLE}}, one MPI process per GPU: {{REQUEST}}.
# Submit from the folder that holds your {{MULTI_NODE_SCRIPT}}:
{{USAGE}}
{{GROUP_HINT}}
{{DIRECTIVES}}

set -eu
cd "${PBS_O_WORKDIR:-$(dirname "$0")}"

{{ENVIRONMENT}}

TASK={{MULTI_NODE_SCRIPT}}
{{FIND_TASK}}

{{RANKS}}

# Versions first, as the seed's job.sh does.
"$PYTHON" -c "import chainer; print('chainer', chainer.__version__)"
{{GPU_FLAG}}

{{LAUNCH_WHY}}
{{LAUNCH}} \
  -x PATH -x LD_LIBRARY_PATH -x PYTHONUSERBASE -x PYTHONPATH -x OMP_NUM_THREADS \
  "$PYTHON" "$TASK" $GPU_FLAG --dataset "$DATASET" --no-progress --out result/multi_node ${EXTRA_ARGS:-}
