# One nvprof file per process: prof_<rank>_<pid>.nvvp (%q{OMPI_COMM_WORLD_RANK}, %p); with
# --profile-child-processes the updater's worker processes get their own files. Open them in
# NVIDIA Visual Profiler, or: handson profile summarize prof_0_<pid>.nvvp
