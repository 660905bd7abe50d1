! A correct MPI program written with `use mpi_f08`: clean_mpi.f90 with the mpi_f08 types and without the optional
! ierror. It must run clean under liblockstep_check.so (no report) and print what it prints without it. It goes through
! every kind of argument the Fortran entry points convert: MPI_IN_PLACE, MPI_BOTTOM, MPI_STATUS_IGNORE and
! MPI_STATUSES_IGNORE, request and status arrays, LOGICAL flags, 1-based indices, new and freed communicators, and a
! derived type that matches its basic type (4 MPI_INTEGER against one contiguous type of 4 MPI_INTEGER). Each rank
! prints one line of checksums, in rank order through rank 0.
program clean_f08
    use mpi_f08
    implicit none
    integer, parameter :: n = 4
    integer :: rank, size, i, next, prev, total, flag_count
    integer :: a(n), b(n), c(64), counts(16), displs(16), bytes(16), position
    type(MPI_Datatype) :: vec4, absolute, types(16)
    type(MPI_Comm) :: half, dupcomm, cart, sub, graph
    type(MPI_Request) :: requests(4)
    type(MPI_Status) :: statuses(4), status
    integer :: indices(4), outcount, which
    integer(kind=MPI_ADDRESS_KIND) :: address
    logical :: flag
    real :: r(n), rs(n)
    integer :: sums(12)

    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    call MPI_Comm_size(MPI_COMM_WORLD, size)
    next = mod(rank + 1, size)
    prev = mod(rank + size - 1, size)
    sums = 0

    ! Collectives, with MPI_IN_PLACE and a contiguous type against its basic type.
    a = [(rank * 10 + i, i = 1, n)]
    call MPI_Allreduce(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
    sums(1) = sum(b)
    b = a
    call MPI_Allreduce(MPI_IN_PLACE, b, n, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD)
    sums(2) = sum(b)
    call MPI_Type_contiguous(n, MPI_INTEGER, vec4)
    call MPI_Type_commit(vec4)
    b = a
    if (rank == 0) then
        call MPI_Bcast(b, 1, vec4, 0, MPI_COMM_WORLD)
    else
        call MPI_Bcast(b, n, MPI_INTEGER, 0, MPI_COMM_WORLD)
    end if
    sums(3) = sum(b)
    r = real(a)
    call MPI_Reduce(r, rs, n, MPI_REAL, MPI_SUM, size - 1, MPI_COMM_WORLD)
    if (rank == size - 1) sums(4) = int(sum(rs))
    call MPI_Gather(a, n, MPI_INTEGER, c, n, MPI_INTEGER, 0, MPI_COMM_WORLD)
    if (rank == 0) sums(5) = sum(c(1:n * size))
    do i = 1, size
        counts(i) = i
        displs(i) = (i - 1) * n
    end do
    c = 0
    call MPI_Gatherv(a, rank + 1, MPI_INTEGER, c, counts, displs, MPI_INTEGER, 0, MPI_COMM_WORLD)
    if (rank == 0) sums(6) = sum(c)
    call MPI_Scatterv(c, counts, displs, MPI_INTEGER, b, rank + 1, MPI_INTEGER, 0, MPI_COMM_WORLD)
    sums(7) = sum(b(1:rank + 1))
    call MPI_Allgather(rank, 1, MPI_INTEGER, c, 1, MPI_INTEGER, MPI_COMM_WORLD)
    call MPI_Allgatherv(a, rank + 1, MPI_INTEGER, c, counts, displs, MPI_INTEGER, MPI_COMM_WORLD)
    call MPI_Alltoall(c, 1, MPI_INTEGER, b, 1, MPI_INTEGER, MPI_COMM_WORLD)
    counts(1:size) = 1
    displs(1:size) = [(i - 1, i = 1, size)]
    call MPI_Alltoallv(c, counts, displs, MPI_INTEGER, b, counts, displs, MPI_INTEGER, MPI_COMM_WORLD)
    sums(8) = sum(b(1:size))
    types(1:size) = MPI_INTEGER
    bytes(1:size) = [((i - 1) * 4, i = 1, size)]
    call MPI_Alltoallw(c, counts, bytes, types, b, counts, bytes, types, MPI_COMM_WORLD)
    sums(8) = sums(8) + sum(b(1:size))
    c(1:size) = rank + 1
    call MPI_Reduce_scatter(c, total, counts, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
    call MPI_Reduce_scatter_block(c, which, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
    call MPI_Scan(rank, i, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
    sums(9) = total + which + i
    call MPI_Exscan(rank, i, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
    if (rank > 0) sums(9) = sums(9) + i
    call MPI_Barrier(MPI_COMM_WORLD)

    ! Non-blocking collectives and point to point, completed through every completion call.
    b = a
    call MPI_Iallreduce(MPI_IN_PLACE, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, requests(1))
    call MPI_Wait(requests(1), MPI_STATUS_IGNORE)
    c(1:n) = a
    call MPI_Ibcast(c, n, MPI_INTEGER, 0, MPI_COMM_WORLD, requests(1))
    call MPI_Ibarrier(MPI_COMM_WORLD, requests(2))
    call MPI_Waitall(2, requests, MPI_STATUSES_IGNORE)
    sums(10) = sum(b) + sum(c(1:n))
    call MPI_Irecv(c, n, MPI_INTEGER, prev, 5, MPI_COMM_WORLD, requests(1))
    call MPI_Isend(a, n, MPI_INTEGER, next, 5, MPI_COMM_WORLD, requests(2))
    call MPI_Waitall(2, requests, statuses)
    if (statuses(1)%MPI_SOURCE /= prev .or. statuses(1)%MPI_TAG /= 5) stop 'Waitall status'
    call MPI_Irecv(c, n, MPI_INTEGER, prev, 6, MPI_COMM_WORLD, requests(1))
    call MPI_Isend(a, n, MPI_INTEGER, next, 6, MPI_COMM_WORLD, requests(2))
    flag_count = 0
    do
        call MPI_Testall(2, requests, flag, statuses)
        if (flag) exit
        flag_count = flag_count + 1
    end do
    if (requests(1) /= MPI_REQUEST_NULL) stop 'Testall request'
    call MPI_Irecv(c, n, MPI_INTEGER, prev, 7, MPI_COMM_WORLD, requests(1))
    call MPI_Isend(a, n, MPI_INTEGER, next, 7, MPI_COMM_WORLD, requests(2))
    call MPI_Waitany(2, requests, which, status)
    if (which < 1 .or. which > 2) stop 'Waitany index'
    call MPI_Waitsome(2, requests, outcount, indices, statuses)
    if (outcount /= 1 .or. indices(1) /= 3 - which) stop 'Waitsome index'
    call MPI_Irecv(c, n, MPI_INTEGER, prev, 8, MPI_COMM_WORLD, requests(1))
    call MPI_Send(a, n, MPI_INTEGER, next, 8, MPI_COMM_WORLD)
    do
        call MPI_Test(requests(1), flag, status)
        if (flag) exit
    end do
    if (status%MPI_SOURCE /= prev) stop 'Test status'
    sums(11) = sum(c(1:n))
    call MPI_Sendrecv(a, n, MPI_INTEGER, next, 9, c, n, MPI_INTEGER, prev, 9, MPI_COMM_WORLD, status)
    call MPI_Send(a, n, MPI_INTEGER, next, 10, MPI_COMM_WORLD)
    do
        call MPI_Iprobe(prev, 10, MPI_COMM_WORLD, flag, status)
        if (flag) exit
    end do
    call MPI_Probe(prev, 10, MPI_COMM_WORLD, status)
    ! The receive through MPI_BOTTOM: the buffer's absolute address as the displacement of an hindexed type.
    call MPI_Get_address(c, address)
    call MPI_Type_create_hindexed_block(1, n, [address], MPI_INTEGER, absolute)
    call MPI_Type_commit(absolute)
    c = 0
    call MPI_Recv(MPI_BOTTOM, 1, absolute, prev, 10, MPI_COMM_WORLD, status)
    sums(11) = sums(11) + sum(c(1:n))
    call MPI_Type_free(absolute)

    ! Communicators made and freed.
    call MPI_Comm_dup(MPI_COMM_WORLD, dupcomm)
    call MPI_Comm_split(dupcomm, mod(rank, 2), -rank, half)
    call MPI_Comm_rank(half, position)
    call MPI_Allreduce(rank, total, 1, MPI_INTEGER, MPI_SUM, half)
    sums(12) = total * 100 + position
    call MPI_Comm_free(half)
    call MPI_Comm_free(dupcomm)
    if (half /= MPI_COMM_NULL .or. dupcomm /= MPI_COMM_NULL) stop 'Comm_free'
    ! Topologies: arrays of LOGICALs and MPI_UNWEIGHTED.
    call MPI_Cart_create(MPI_COMM_WORLD, 1, [size], [.true.], .false., cart)
    call MPI_Cart_shift(cart, 0, 1, i, total)
    if (i /= prev .or. total /= next) stop 'Cart_create'
    call MPI_Cart_sub(cart, [.false.], sub)
    call MPI_Comm_size(sub, i)
    if (i /= 1) stop 'Cart_sub'
    call MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, [prev], MPI_UNWEIGHTED, 1, [next], MPI_UNWEIGHTED, &
                                        MPI_INFO_NULL, .false., graph)
    call MPI_Dist_graph_neighbors_count(graph, i, total, flag)
    if (i /= 1 .or. total /= 1 .or. flag) stop 'Dist_graph_create_adjacent'
    call MPI_Comm_free(graph)
    call MPI_Comm_free(sub)
    call MPI_Comm_free(cart)
    call MPI_Type_free(vec4)

    call print_in_order()
    call MPI_Finalize()

contains

    subroutine print_in_order()
        integer :: all(12, 64), r
        call MPI_Gather(sums, 12, MPI_INTEGER, all, 12, MPI_INTEGER, 0, MPI_COMM_WORLD)
        if (rank == 0) then
            do r = 1, size
                write (*, '(a, i0, a, 12(1x, i0))') 'rank ', r - 1, ':', all(:, r)
            end do
        end if
    end subroutine print_in_order

end program clean_f08
