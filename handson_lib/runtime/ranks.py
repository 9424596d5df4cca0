"""Print what ChainerMN tells each rank: `mpiexec -n 4 python -m handson_lib.runtime.ranks`."""

import socket

from handson_lib.runtime.mpi import start_multi_node


def main():
    comm = start_multi_node("naive", forkserver=False)
    row = (comm.rank, comm.intra_rank, comm.inter_rank, comm.size, socket.gethostname())
    rows = comm.gather_obj(row)
    if comm.rank == 0:
        print(f"{'rank':>4s} {'intra_rank':>10s} {'inter_rank (node)':>17s} {'size':>4s}  host")
        for rank, intra, inter, size, host in sorted(rows):
            print(f"{rank:4d} {intra:10d} {inter:17d} {size:4d}  {host}")


if __name__ == "__main__":
    main()
