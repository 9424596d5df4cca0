# Your script in the folder you submit from; without one, the course's reference (said loudly).
if [ ! -f "$TASK" ] && [ -n "${COURSE:-}" ]; then
  echo "note: no $TASK in $PWD: running the course's reference $COURSE/solutions/$TASK"
  TASK=$COURSE/solutions/$TASK
fi
[ -f "$TASK" ] || { echo "no $TASK in $PWD nor in \$COURSE/solutions"; exit 2; }
