# env.sh for a hostfile cloud cluster (seed 001: GPU servers on a private network, 4 GPUs each,
# no scheduler): put it in the HOME that every node shares over NFS and source it on the head
# node; the job scripts in this folder source it too (ENV_SH=... overrides where they look).
#
# Every node must reach the others with ssh without a password or a host-key question, and see
# the same HOME (NFS): mpiexec starts the remote ranks over ssh in the same folder.

# Modules, if the image has them:
# module load cuda

# The course: the student edition's folder, on a file system the compute nodes see.
export COURSE=${COURSE:-$HOME/distributed-handson}

# The course's environment, $COURSE/.venv: the one install route at every site (README.md, "At
# your site"), built once on the login node (compute nodes are offline) with this file sourced:
#   cd $HOME/distributed-handson
#   make setup
#   . $HOME/env.sh
#   .venv/bin/pip install 'cupy-cuda12x>=13.5,<14' nvidia-nccl-cu12
#   handson doctor
if [ -f "$COURSE/.venv/bin/activate" ]; then
  . "$COURSE/.venv/bin/activate"
else
  echo "note: no $COURSE/.venv: build it on the login node, 'make setup' in $COURSE (README.md, At your site)" >&2
fi

# The course library (handson_lib), importable by the job's ranks.
export PYTHONPATH=$COURSE${PYTHONPATH:+:$PYTHONPATH}

# The hostfile lists the nodes, with the number of processes each may take (seed 001: without
# slots= only one process started per node):
#   192.168.0.1 slots=4
#   192.168.0.2 slots=4
export HOSTFILE=${HOSTFILE:-$HOME/hostfile}

# Data: compute nodes are offline, so stage it on the login node first:
#   handson data prepare --cifar $HANDSON_DATA_DIR/cifar-10-python.tar.gz
# then submit with `DATASET=cifar10 bash run_multi_node_training.sh`.
export HANDSON_DATA_DIR=$HOME/data
