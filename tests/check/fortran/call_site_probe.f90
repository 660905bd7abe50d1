! The call sites check/fortran/call_site.cpp finds: MPI_Comm_rank from `use mpi_f08` (through Open MPI's module
! procedure, the first time by unwinding and then from the cache) and from `use mpi` (directly). The entry point
! call_site_probe.cpp defines in place of Open MPI's prints each one; the test compares them with the lines marked
! `probe`.
program call_site_probe
    use mpi_f08
    implicit none
    integer :: rank, i
    interface
        subroutine call_site_cache_report() bind(C, name='call_site_cache_report')
        end subroutine call_site_cache_report
    end interface

    call MPI_Init()
    do i = 1, 2
        call MPI_Comm_rank(MPI_COMM_WORLD, rank)  ! probe
    end do
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)  ! probe
    call legacy_rank()
    call call_site_cache_report()
    call MPI_Finalize()

contains

    subroutine legacy_rank()
        use mpi, only: MPI_COMM_WORLD, MPI_Comm_rank
        integer :: rank, ierr
        call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)  ! probe
    end subroutine legacy_rank

end program call_site_probe
