#% env.sh, rendered for every site into jobscripts/<site>/ by `handson build` from the site's
#% `env` parts in handson_lib/sites/table.py. Lines starting with #% stay here.
{{ABOUT}}
{{HOME}}

{{MODULES}}
{{PYTHON}}

# The course library (handson_lib), importable by the job's ranks.
export COURSE=${COURSE:-$HOME/distributed-handson}
export PYTHONPATH=$COURSE${PYTHONPATH:+:$PYTHONPATH}
{{EXTRA}}

# Data: compute nodes are offline, so stage it on the login node first:
#   handson data prepare --cifar $HANDSON_DATA_DIR/cifar-10-python.tar.gz
# then submit with `{{DATA_SUBMIT}}`.
export HANDSON_DATA_DIR=$HOME/data
