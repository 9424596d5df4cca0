# env.sh for Miyabi-G (GH200: one Grace CPU + one H100-class GPU per node): copy it to
# /work/$(id -ng)/$USER/env.sh and source it on the login node; the job scripts in this folder
# source it too (ENV_SH=... overrides where they look).
#
# Compute nodes do not mount /home: the /work file system serves as HOME in jobs, so the Python
# packages, the course and the data all live under /work/$(id -ng)/$USER.
export HOME=/work/$(id -ng)/${USER:-$(id -un)}
export PYTHONUSERBASE=$HOME/.local
export PATH=$PYTHONUSERBASE/bin:$PATH

# Modules (the course's assumption; check `module avail`):
# module purge
# module load nvidia nv-hpcx                   # NVIDIA HPC SDK + HPC-X (Open MPI, CUDA-aware)
# The GH200 nodes are aarch64: a Python 3.11 venv with aarch64 wheels, built where the
# architecture matches (an interactive `qsub -I -q debug-g ...` if the login node differs):
#   python3.11 -m venv $HOME/venv && . $HOME/venv/bin/activate
#   pip install 'setuptools<70' 'numpy<1.24' cupy-cuda12x==13.6.0 nvidia-nccl-cu12
#   MPICC=mpicc pip install --no-binary mpi4py mpi4py           # against the site's MPI
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
