# Nsight Systems: nvprof refuses GPUs of compute capability 8.0 and newer; nsys covers all.
# One report per rank: prof_<rank>.nsys-rep plus its SQLite export prof_<rank>.sqlite
# (%q{OMPI_COMM_WORLD_RANK}; Task #1: prof_multi_gpu.*); read it with:
#     handson profile summarize prof_0.sqlite --plot prof_0.png
# Without the .sqlite (export failed, or an older report), export by hand:
#     nsys export --type sqlite -o prof_0.sqlite prof_0.nsys-rep
