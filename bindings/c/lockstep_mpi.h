/* lockstep_mpi.h: the entry points of lockstep's C interface that take MPI handles (liblockstep_c.so.1).
 *
 * Include it after mpi.h; everything else is in lockstep.h, which needs no MPI header.
 */
#ifndef LOCKSTEP_MPI_H
#define LOCKSTEP_MPI_H

#include <mpi.h>

#include "lockstep.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A lockstep communicator over a duplicate of `comm` (the caller's handle is never used for lockstep's traffic or
 * freed by lockstep). Collective over comm. */
LOCKSTEP_C_API lockstep_status_t lockstep_comm_from_mpi(MPI_Comm comm, const lockstep_comm_options_t* options,
                                                        lockstep_comm_t* out);
/* lockstep's duplicate: for MPI calls of the caller's own that should not match lockstep's traffic, dup it first. */
LOCKSTEP_C_API lockstep_status_t lockstep_comm_get_mpi(lockstep_comm_t comm, MPI_Comm* out);

#ifdef __cplusplus
}
#endif
#endif /* LOCKSTEP_MPI_H */
