#% env.sh, rendered for every site into jobscripts/<site>/ by `handson build` from the site's
#% `env` parts in handson_lib/sites/table.py. Lines starting with #% stay here.
{{ABOUT}}
{{HOME}}

{{MODULES}}

# The course: the student edition's folder, on a file system the compute nodes see.
export COURSE=${COURSE:-{{COURSE}}}

# The course's environment, $COURSE/.venv: the one install route at every site (README.md, "At
# your site"), built once on the login node (compute nodes are offline) with this file sourced:
{{INSTALL}}
{{PYTHON}}
if [ -f "$COURSE/.venv/bin/activate" ]; then
  . "$COURSE/.venv/bin/activate"
else
  echo "note: no $COURSE/.venv: build it on the login node, 'make setup' in $COURSE (README.md, At your site)" >&2
fi

# The course library (handson_lib), importable by the job's ranks.
export PYTHONPATH=$COURSE${PYTHONPATH:+:$PYTHONPATH}
{{EXTRA}}

# Data: compute nodes are offline, so stage it on the login node first:
#   handson data prepare --cifar $HANDSON_DATA_DIR/cifar-10-python.tar.gz
# then submit with `{{DATA_SUBMIT}}`.
export HANDSON_DATA_DIR=$HOME/data
