# env.sh for Reedbush-H (seed 000): copy it to /lustre/$(id -ng)/$USER/env.sh and source it on the
# login node at every login (put `. /lustre/$(id -ng)/$USER/env.sh` in ~/.bash_profile); the job
# scripts in this folder source it too (ENV_SH=... overrides where they look).
#
# Compute nodes do not see /home: Lustre serves as HOME there, so everything the jobs need
# (Python packages, the course, the data) lives under /lustre/$(id -ng)/$USER.
export HOME=/lustre/$(id -ng)/${USER:-$(id -un)}

# `pip install --user ...` on the login node puts packages here; the job scripts pass it to every
# rank with `mpiexec -x PYTHONUSERBASE`, or the ranks on the other nodes do not find them.
export PYTHONUSERBASE=$HOME/.local
export PATH=$PYTHONUSERBASE/bin:$PATH

# Modules (the course's assumption; check `module avail` on the login node):
# module load cuda9/9.1.85 openmpi/gdr/2.1.2/gnu
# module load anaconda3                          # or your own Python 3.11 under $HOME
# On the login node, once (compute nodes are offline):
#   pip install --user 'setuptools<70' 'numpy<1.24' mpi4py cupy-cuda12x==13.6.0
#   pip install --user "$COURSE"/build/chainer-wheel/chainer-7.8.1-py3-none-any.whl  # `make chainer-wheel` in $COURSE first:
#     Chainer 7.8.1 with the course's patches (NumPy >= 1.24, NumPy 2, Python 3.12)
#   pip install --user --no-build-isolation --no-deps -e "$COURSE"     # handson_lib
# (P100s on 2018's CUDA 9 need the CuPy of that time, e.g. cupy-cuda91; see README.md.)

# The course library (handson_lib), importable by the job's ranks.
export COURSE=${COURSE:-$HOME/distributed-handson}
export PYTHONPATH=$COURSE${PYTHONPATH:+:$PYTHONPATH}

# Data: compute nodes are offline, so stage it on the login node first:
#   handson data prepare --cifar $HANDSON_DATA_DIR/cifar-10-python.tar.gz
# then submit with `qsub -v DATASET=cifar10 run_multi_node_training.sh`.
export HANDSON_DATA_DIR=$HOME/data
