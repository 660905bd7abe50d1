"""An mpi4py program for the checking library (tests/check/check_test.py): with MODE "clean" every collective agrees;
with "mismatch" process 0 broadcasts 4 int32 and the others receive 4 float32 (MPI_INT against MPI_FLOAT).

mpi4py sets MPI_ERRORS_RETURN on its communicators, so the check returns its error code, which mpi4py raises as
MPI.Exception on every process; this program prints it ("returned an error: ...") and exits 0."""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
mode = sys.argv[1] if len(sys.argv) > 1 else "clean"
comm.Barrier()
total = comm.allreduce(rank)
assert total == comm.Get_size() * (comm.Get_size() - 1) // 2
data = np.arange(4, dtype=np.int32) if rank == 0 or mode == "clean" else np.zeros(4, dtype=np.float32)
try:
    comm.Bcast(data, root=0)
    print(f"process {rank}: Bcast returned")
except MPI.Exception as e:
    print(f"process {rank}: Bcast returned an error: {e.Get_error_string()}")
sys.stdout.flush()
comm.Barrier()
