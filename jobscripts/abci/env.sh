# env.sh for ABCI 3.0 (8 x H200 per node, PBS Pro): copy it to $HOME/env.sh and source it on the
# login node; the job scripts in this folder source it too (ENV_SH=... overrides where they look).
#
# HOME is on the shared file system and visible from the compute nodes; keep the venv, the
# course and the data there (or in your group area).
source /etc/profile.d/modules.sh 2> /dev/null || true
export PYTHONUSERBASE=${PYTHONUSERBASE:-$HOME/.local}

# Modules (the course's assumption; check `module avail`):
# module load cuda/12.6 cudnn nccl hpcx          # HPC-X: Open MPI with CUDA support
# A Python 3.11 venv built once on the login node (compute nodes are offline for pip):
#   python3.11 -m venv $HOME/venv && . $HOME/venv/bin/activate
#   pip install 'setuptools<70' 'numpy<1.24' cupy-cuda12x==13.6.0 nvidia-nccl-cu12
#   pip install mpi4py                         # or MPICC=mpicc pip install --no-binary mpi4py mpi4py
#   pip install "$COURSE"/build/chainer-wheel/chainer-7.8.1-py3-none-any.whl  # `make chainer-wheel` in $COURSE first:
#     Chainer 7.8.1 with the course's patches (NumPy >= 1.24, NumPy 2, Python 3.12)
#   pip install --no-build-isolation --no-deps -e "$COURSE"
# [ -f "$HOME/venv/bin/activate" ] && . "$HOME/venv/bin/activate"

# The course library (handson_lib), importable by the job's ranks.
export COURSE=${COURSE:-$HOME/distributed-handson}
export PYTHONPATH=$COURSE${PYTHONPATH:+:$PYTHONPATH}

# Data: compute nodes are offline, so stage it on the login node first:
#   handson data prepare --cifar $HANDSON_DATA_DIR/cifar-10-python.tar.gz
# then submit with `qsub -v DATASET=cifar10 run_multi_node_training.sh`.
export HANDSON_DATA_DIR=$HOME/data
