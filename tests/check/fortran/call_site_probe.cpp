// MPI_Comm_rank's Fortran entry points, in the probe program itself (exported, so that Open MPI's mpi_f08 module
// calls this ompi_comm_rank_f): each prints the call site program_call_site finds, then calls MPI.

#include "fortran/call_site.hpp"

#include <mpi.h>
#include <lockstep/base/symbolizer.hpp>

#include <cstdio>

extern "C" __attribute__((visibility("default"))) void ompi_comm_rank_f(MPI_Fint* comm, MPI_Fint* rank,
                                                                        MPI_Fint* ierror) {
    const void* site = lockstep::check::fortran::program_call_site(
        __builtin_extract_return_addr(__builtin_return_address(0)), __builtin_dwarf_cfa());
    std::printf("call site: %s\n", lockstep::base::describe_call_site(site).c_str());
    int c_rank = 0;
    *ierror = PMPI_Comm_rank(MPI_Comm_f2c(*comm), &c_rank);
    *rank = c_rank;
}

// After the calls: whether the mpi_f08 call site was cached (x86-64).
extern "C" __attribute__((visibility("default"))) void call_site_cache_report() {
    std::printf("cached return addresses: %zu\n", lockstep::check::fortran::cached_return_addresses());
}

extern "C" __attribute__((visibility("default"))) void mpi_comm_rank_(MPI_Fint* comm, MPI_Fint* rank, MPI_Fint* ierror)
    __attribute__((alias("ompi_comm_rank_f")));
