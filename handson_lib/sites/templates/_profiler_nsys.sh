  if [ "$PROFILE_TASK" = multi-node ]; then
    PROFILER=(nsys profile -o "prof_%q{OMPI_COMM_WORLD_RANK}" --trace=cuda,nvtx,osrt,mpi
              --mpi-impl=openmpi --export=sqlite --force-overwrite=true)
  else
    # MultiprocessParallelUpdater forks its workers without exec: without
    # --trace-fork-before-exec their kernels are missing from the report.
    PROFILER=(nsys profile -o prof_multi_gpu --trace=cuda,nvtx,osrt --trace-fork-before-exec=true
              --export=sqlite --force-overwrite=true)
  fi
