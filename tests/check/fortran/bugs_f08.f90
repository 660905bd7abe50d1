! Planted bugs in a program written with `use mpi_f08` (bugs_mpi.f90 with the mpi_f08 types), one per run, named by the
! first argument. Under liblockstep_check.so each must be reported on every rank, naming the line marked `planted:
! <bug>` (the test reads the line numbers from these markers), and the job must end. Without the library they misbehave
! silently or hang.
!   count     one rank passes another count to MPI_Allreduce
!   type      4 MPI_INTEGER on rank 0 against 4 MPI_REAL elsewhere (the same bytes, another type signature)
!   skipped   rank 1 skips a collective in one branch and meets the others' barrier with its allreduce
!   root      rank 0 broadcasts from root 0, the others expect root 1
!   unmatched rank 0 receives a message rank 1 never sends (it sends another tag)
!   unwaited  a receive is started and never waited for
program bugs_f08
    use mpi_f08
    implicit none
    integer, parameter :: n = 4
    integer :: rank, size, a(n), b(n), prev, next
    type(MPI_Request) :: request
    character(len=16) :: bug

    call get_command_argument(1, bug)
    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    call MPI_Comm_size(MPI_COMM_WORLD, size)
    prev = mod(rank + size - 1, size)
    next = mod(rank + 1, size)
    a = rank + 1
    b = 0
    ! One correct collective first: the bug is never the first call.
    call MPI_Allreduce(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)

    select case (trim(bug))
    case ('count')
        call MPI_Allreduce(a, b, merge(n, n - 1, rank == 0), MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)  ! planted: count
    case ('type')
        call MPI_Bcast(a, n, merge(MPI_INTEGER, MPI_REAL, rank == 0), 0, MPI_COMM_WORLD)  ! planted: type
    case ('skipped')
        if (rank /= 1) call MPI_Barrier(MPI_COMM_WORLD)  ! planted: skipped
        call MPI_Allreduce(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)  ! planted: skipped
    case ('root')
        call MPI_Bcast(a, n, MPI_INTEGER, merge(0, 1, rank == 0), MPI_COMM_WORLD)  ! planted: root
    case ('unmatched')
        if (rank == 0) call MPI_Recv(b, n, MPI_INTEGER, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE)  ! planted: unmatched
        if (rank == 1) call MPI_Send(a, n, MPI_INTEGER, 0, 8, MPI_COMM_WORLD)
    case ('unwaited')
        call MPI_Irecv(b, n, MPI_INTEGER, prev, 3, MPI_COMM_WORLD, request)  ! planted: unwaited
        call MPI_Send(a, n, MPI_INTEGER, next, 3, MPI_COMM_WORLD)
    case default
        print '(a, a)', 'unknown bug: ', trim(bug)
        call MPI_Abort(MPI_COMM_WORLD, 2)
    end select

    call MPI_Barrier(MPI_COMM_WORLD)
    print '(a, i0, a, 4(1x, i0))', 'rank ', rank, ' finished:', b
    call MPI_Finalize()
end program bugs_f08
