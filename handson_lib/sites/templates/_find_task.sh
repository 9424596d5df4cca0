# Your script, in the folder you submit from: yours is what runs, never a copy of the course's.
[ -f "$TASK" ] || { echo "no $TASK in $PWD: submit from the folder that holds your $TASK (or copy it here)"; exit 2; }
