  if [ "$PROFILE_TASK" = multi-node ]; then
    PROFILER=(nvprof --profile-child-processes -o "prof_%q{OMPI_COMM_WORLD_RANK}_%p.nvvp")
  else
    PROFILER=(nvprof --profile-child-processes -o "prof_%p.nvvp")
  fi
