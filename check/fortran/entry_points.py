#!/usr/bin/env python3
"""Generates the Fortran MPI entry points of liblockstep_check.so (entry_points.cpp) from one table.

Open MPI's Fortran bindings do not reach the C profiling symbols: mpif.h and `use mpi` call mpi_allreduce_ (and its
other manglings) in libmpi_mpifh.so, which calls PMPI_Allreduce; `use mpi_f08` calls ompi_allreduce_f, the same
function under its own name (and pmpi_test_ and a few others where it converts LOGICALs itself). The library therefore
defines these symbols too: every entry point converts its Fortran arguments (conversions.hpp) and calls the library's
own C function, MPI_Allreduce, so that the checks run once and name the program's call site (call_site.hpp).

Each row names the C function and its Fortran arguments in order, as `kind name`; the ierror argument is implied. The
kinds are those of the KINDS table below.

MPICH's mpif.h and `use mpi` bindings call the C MPI_ functions, and so do its mpi_f08 procedures for the calls with
a buffer (mpi_allreduce_f08ts_); the others (mpi_barrier_f08_, mpi_init_f08_, mpi_wait_f08_...) call PMPI_ directly.
Under MPICH the generated file therefore defines those: the rows without a buffer, as mpi_<name>_f08_.

Usage: entry_points.py OUTPUT.cpp
"""

import re
import sys

# One row per C function: its name, then its Fortran arguments in order (a row goes on over indented lines; # starts a
# comment). Where Open MPI's mpi_f08 reaches a function through pmpi_<name>_ in place of ompi_<name>_f (nm -D
# libmpi_usempif08.so), the name carries a trailing '+'.
TABLE = """
# start and end
MPI_Init
MPI_Init_thread                  int required, int_out provided
MPI_Finalize
# blocking collectives
MPI_Barrier                      comm comm
MPI_Bcast                        buf buffer, int count, type datatype, int root, comm comm
MPI_Reduce                       buf sendbuf, buf recvbuf, int count, type datatype, op op, int root, comm comm
MPI_Allreduce                    buf sendbuf, buf recvbuf, int count, type datatype, op op, comm comm
MPI_Gather                       buf sendbuf, int sendcount, type sendtype, buf recvbuf, int recvcount, type recvtype,
                                 int root, comm comm
MPI_Gatherv                      buf sendbuf, int sendcount, type sendtype, buf recvbuf, ints recvcounts, ints displs,
                                 type recvtype, int root, comm comm
MPI_Scatter                      buf sendbuf, int sendcount, type sendtype, buf recvbuf, int recvcount, type recvtype,
                                 int root, comm comm
MPI_Scatterv                     buf sendbuf, ints sendcounts, ints displs, type sendtype, buf recvbuf, int recvcount,
                                 type recvtype, int root, comm comm
MPI_Allgather                    buf sendbuf, int sendcount, type sendtype, buf recvbuf, int recvcount, type recvtype,
                                 comm comm
MPI_Allgatherv                   buf sendbuf, int sendcount, type sendtype, buf recvbuf, ints recvcounts, ints displs,
                                 type recvtype, comm comm
MPI_Alltoall                     buf sendbuf, int sendcount, type sendtype, buf recvbuf, int recvcount, type recvtype,
                                 comm comm
MPI_Alltoallv                    buf sendbuf, ints sendcounts, ints sdispls, type sendtype, buf recvbuf, ints
                                 recvcounts, ints rdispls, type recvtype, comm comm
MPI_Alltoallw                    buf sendbuf, ints sendcounts, ints sdispls, types[peers(comm)] sendtypes, buf recvbuf,
                                 ints recvcounts, ints rdispls, types[peers(comm)] recvtypes, comm comm
MPI_Reduce_scatter               buf sendbuf, buf recvbuf, ints recvcounts, type datatype, op op, comm comm
MPI_Reduce_scatter_block         buf sendbuf, buf recvbuf, int recvcount, type datatype, op op, comm comm
MPI_Scan                         buf sendbuf, buf recvbuf, int count, type datatype, op op, comm comm
MPI_Exscan                       buf sendbuf, buf recvbuf, int count, type datatype, op op, comm comm
# non-blocking collectives
MPI_Ibarrier                     comm comm, request_out request
MPI_Ibcast                       buf buffer, int count, type datatype, int root, comm comm, request_out request
MPI_Ireduce                      buf sendbuf, buf recvbuf, int count, type datatype, op op, int root, comm comm,
                                 request_out request
MPI_Iallreduce                   buf sendbuf, buf recvbuf, int count, type datatype, op op, comm comm, request_out
                                 request
MPI_Igather                      buf sendbuf, int sendcount, type sendtype, buf recvbuf, int recvcount, type recvtype,
                                 int root, comm comm, request_out request
MPI_Igatherv                     buf sendbuf, int sendcount, type sendtype, buf recvbuf, ints recvcounts, ints displs,
                                 type recvtype, int root, comm comm, request_out request
MPI_Iscatter                     buf sendbuf, int sendcount, type sendtype, buf recvbuf, int recvcount, type recvtype,
                                 int root, comm comm, request_out request
MPI_Iscatterv                    buf sendbuf, ints sendcounts, ints displs, type sendtype, buf recvbuf, int recvcount,
                                 type recvtype, int root, comm comm, request_out request
MPI_Iallgather                   buf sendbuf, int sendcount, type sendtype, buf recvbuf, int recvcount, type recvtype,
                                 comm comm, request_out request
MPI_Iallgatherv                  buf sendbuf, int sendcount, type sendtype, buf recvbuf, ints recvcounts, ints displs,
                                 type recvtype, comm comm, request_out request
MPI_Ialltoall                    buf sendbuf, int sendcount, type sendtype, buf recvbuf, int recvcount, type recvtype,
                                 comm comm, request_out request
MPI_Ialltoallv                   buf sendbuf, ints sendcounts, ints sdispls, type sendtype, buf recvbuf, ints
                                 recvcounts, ints rdispls, type recvtype, comm comm, request_out request
MPI_Ialltoallw                   buf sendbuf, ints sendcounts, ints sdispls, types[peers(comm)] sendtypes, buf recvbuf,
                                 ints recvcounts, ints rdispls, types[peers(comm)] recvtypes, comm comm,
                                 request_out request
MPI_Ireduce_scatter              buf sendbuf, buf recvbuf, ints recvcounts, type datatype, op op, comm comm,
                                 request_out request
MPI_Ireduce_scatter_block        buf sendbuf, buf recvbuf, int recvcount, type datatype, op op, comm comm, request_out
                                 request
MPI_Iscan                        buf sendbuf, buf recvbuf, int count, type datatype, op op, comm comm, request_out
                                 request
MPI_Iexscan                      buf sendbuf, buf recvbuf, int count, type datatype, op op, comm comm, request_out
                                 request
# communicators
MPI_Comm_dup                     comm comm, comm_out newcomm
MPI_Comm_dup_with_info           comm comm, info info, comm_out newcomm
MPI_Comm_idup                    comm comm, comm_out newcomm, request_out request
MPI_Comm_split                   comm comm, int color, int key, comm_out newcomm
MPI_Comm_split_type              comm comm, int split_type, int key, info info, comm_out newcomm
MPI_Comm_create                  comm comm, group group, comm_out newcomm
MPI_Comm_create_group            comm comm, group group, int tag, comm_out newcomm
MPI_Intercomm_create             comm local_comm, int local_leader, comm peer_comm, int remote_leader, int tag,
                                 comm_out newintercomm
MPI_Intercomm_merge+             comm intercomm, logical high, comm_out newintracomm
MPI_Comm_free                    comm_inout comm
MPI_Cart_create+                 comm comm_old, int ndims, ints dims, logicals[ndims] periods, logical reorder,
                                 comm_out comm_cart
MPI_Cart_sub+                    comm comm, logicals[cartdim(comm)] remain_dims, comm_out newcomm
MPI_Graph_create+                comm comm_old, int nnodes, ints index, ints edges, logical reorder, comm_out
                                 comm_graph
MPI_Dist_graph_create+           comm comm_old, int n, ints sources, ints degrees, ints destinations, weights weights,
                                 info info, logical reorder, comm_out comm_dist_graph
MPI_Dist_graph_create_adjacent+  comm comm_old, int indegree, ints sources, weights sourceweights, int outdegree, ints
                                 destinations, weights destweights, info info, logical reorder, comm_out
                                 comm_dist_graph
# point to point
MPI_Send                         buf buf, int count, type datatype, int dest, int tag, comm comm
MPI_Ssend                        buf buf, int count, type datatype, int dest, int tag, comm comm
MPI_Bsend                        buf buf, int count, type datatype, int dest, int tag, comm comm
MPI_Rsend                        buf buf, int count, type datatype, int dest, int tag, comm comm
MPI_Isend                        buf buf, int count, type datatype, int dest, int tag, comm comm, request_out request
MPI_Issend                       buf buf, int count, type datatype, int dest, int tag, comm comm, request_out request
MPI_Ibsend                       buf buf, int count, type datatype, int dest, int tag, comm comm, request_out request
MPI_Irsend                       buf buf, int count, type datatype, int dest, int tag, comm comm, request_out request
MPI_Recv                         buf buf, int count, type datatype, int source, int tag, comm comm, status status
MPI_Irecv                        buf buf, int count, type datatype, int source, int tag, comm comm, request_out
                                 request
MPI_Sendrecv                     buf sendbuf, int sendcount, type sendtype, int dest, int sendtag, buf recvbuf, int
                                 recvcount, type recvtype, int source, int recvtag, comm comm, status status
MPI_Sendrecv_replace             buf buf, int count, type datatype, int dest, int sendtag, int source, int recvtag,
                                 comm comm, status status
MPI_Probe                        int source, int tag, comm comm, status status
MPI_Iprobe+                      int source, int tag, comm comm, flag flag, status status
MPI_Mprobe                       int source, int tag, comm comm, message_out message, status status
MPI_Improbe+                     int source, int tag, comm comm, flag flag, message_out message, status status
MPI_Mrecv                        buf buf, int count, type datatype, message_inout message, status status
MPI_Imrecv                       buf buf, int count, type datatype, message_inout message, request_out request
MPI_Send_init                    buf buf, int count, type datatype, int dest, int tag, comm comm, request_out request
MPI_Ssend_init                   buf buf, int count, type datatype, int dest, int tag, comm comm, request_out request
MPI_Bsend_init                   buf buf, int count, type datatype, int dest, int tag, comm comm, request_out request
MPI_Rsend_init                   buf buf, int count, type datatype, int dest, int tag, comm comm, request_out request
MPI_Recv_init                    buf buf, int count, type datatype, int source, int tag, comm comm, request_out
                                 request
# requests
MPI_Start                        request_inout request
MPI_Startall                     int count, requests[count] array_of_requests
MPI_Wait                         request_inout request, status status
MPI_Waitall                      int count, requests[count] array_of_requests, statuses[count:count] array_of_statuses
MPI_Waitany                      int count, requests[count] array_of_requests, index index, status status
MPI_Waitsome                     int incount, requests[incount] array_of_requests, int_out outcount, indices[outcount]
                                 array_of_indices, statuses[incount:outcount] array_of_statuses
MPI_Test+                        request_inout request, flag flag, status status
MPI_Testall+                     int count, requests[count] array_of_requests, flag flag, statuses[count:flag?count]
                                 array_of_statuses
MPI_Testany+                     int count, requests[count] array_of_requests, index index, flag flag, status status
MPI_Testsome+                    int incount, requests[incount] array_of_requests, int_out outcount, indices[outcount]
                                 array_of_indices, statuses[incount:outcount] array_of_statuses
MPI_Request_free                 request_inout request
MPI_Cancel                       request_in request
# handles the library keeps records of
MPI_Type_free                    type_inout datatype
MPI_Op_free                      op_inout op
"""

# How each kind of Fortran argument becomes a C argument: (pre-call statement, C argument, post-call statement).
# {n} is the argument's name, {c} its C counterpart, {size}/{filled} the expressions in brackets after the kind: an
# argument's name (its value), cartdim(comm) (the number of dimensions of the Cartesian communicator comm) or
# peers(comm) (its size, or the remote group's for an intercommunicator).
# Post-call statements run only when the call succeeded, except those marked always (requests written back, as
# completed ones became MPI_REQUEST_NULL even in an error) and completed (statuses and indices, which MPI also fills
# when it returns MPI_ERR_IN_STATUS).
KINDS = {
    "buf": (None, "choice_buffer({n})", None),
    "int": (None, "static_cast<int>(*{n})", None),
    "ints": (None, "{n}", None),  # MPI_Fint is int (conversions.hpp)
    "int_out": (None, "{n}", None),
    "logical": (None, "*{n} != 0", None),
    "logicals": ("LogicalArray {c}({n}, {size});", "{c}.c()", None),
    "weights": (None, "graph_weights({n})", None),
    "type": (None, "MPI_Type_f2c(*{n})", None),
    "op": (None, "MPI_Op_f2c(*{n})", None),
    "comm": (None, "MPI_Comm_f2c(*{n})", None),
    "group": (None, "MPI_Group_f2c(*{n})", None),
    "info": (None, "MPI_Info_f2c(*{n})", None),
    "types": ("TypeArray {c}({n}, {size});", "{c}.c()", None),
    "type_inout": ("MPI_Datatype {c} = MPI_Type_f2c(*{n});", "&{c}", "*{n} = MPI_Type_c2f({c});"),
    "op_inout": ("MPI_Op {c} = MPI_Op_f2c(*{n});", "&{c}", "*{n} = MPI_Op_c2f({c});"),
    "comm_out": ("MPI_Comm {c} = MPI_COMM_NULL;", "&{c}", "*{n} = MPI_Comm_c2f({c});"),
    "comm_inout": ("MPI_Comm {c} = MPI_Comm_f2c(*{n});", "&{c}", "*{n} = MPI_Comm_c2f({c});"),
    "request_out": ("MPI_Request {c} = MPI_REQUEST_NULL;", "&{c}", "*{n} = MPI_Request_c2f({c});"),
    "request_inout": ("MPI_Request {c} = MPI_Request_f2c(*{n});", "&{c}", "*{n} = MPI_Request_c2f({c});"),
    "request_in": ("MPI_Request {c} = MPI_Request_f2c(*{n});", "&{c}", None),
    "message_out": ("MPI_Message {c} = MPI_MESSAGE_NULL;", "&{c}", "*{n} = MPI_Message_c2f({c});"),
    "message_inout": ("MPI_Message {c} = MPI_Message_f2c(*{n});", "&{c}", "*{n} = MPI_Message_c2f({c});"),
    "status": ("StatusOut {c}({n});", "{c}.c()", "{c}.write_back();"),
    "flag": ("int {c} = 0;", "&{c}", "*{n} = logical({c});"),
    "index": ("int {c} = MPI_UNDEFINED;", "&{c}", "*{n} = fortran_index({c});"),
    "indices": (None, "{n}", "completed: for (MPI_Fint i = 0; i < {size}; ++i) ++{n}[i];"),
    "requests": ("RequestArray {c}({n}, {size});", "{c}.c()", "always: {c}.write_back();"),
    "statuses": ("StatusArray {c}({n}, {size});", "{c}.c()", "completed: {c}.write_back({filled});"),
}

ARGUMENT = re.compile(r"(?P<kind>\w+)(\[(?P<size>[\w()]+)(:(?P<filled>[\w?]+))?\])?\s+(?P<name>\w+)$")


def fortran_names(mpi, c_name, via_pmpi):
    """Every symbol a Fortran compiler or the MPI's mpi_f08 may call for c_name; the first one is defined."""
    lower = c_name.lower()
    if mpi == "mpich":
        return [lower + "_f08_"]
    stem = lower[len("mpi_") :]
    names = [f"ompi_{stem}_f", lower, lower + "_", lower + "__", c_name.upper()]
    if via_pmpi:
        names.append("p" + lower + "_")
    return names


# MPICH 4.0's own mpi_f08 MPI_Waitsome and MPI_Testsome give 0-based indices: the library keeps them, so that a
# program sees what it sees without the library.
MPICH_F08_KEPT = {"MPI_Waitsome", "MPI_Testsome"}


def in_mpich_f08(c_name, arguments):
    """Whether the library defines c_name's MPICH mpi_f08 entry point: the calls without a buffer (and without
    distributed-graph weights, whose mpi_f08 sentinels MPICH keeps to itself)."""
    return c_name not in MPICH_F08_KEPT and not re.search(r"\b(buf|weights)\s", arguments)


def rows(table):
    """The table's rows as (C function, Fortran arguments)."""
    joined = []
    for line in table.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line[0].isspace():
            joined[-1] += " " + line.strip()
        else:
            joined.append(line.strip())
    return [(row.split(None, 1) + [""])[:2] for row in joined]


def size_expression(spec):
    """[count] -> *count; [cartdim(comm)] -> cartesian_dimensions(*comm); [peers(comm)] -> peers(*comm)."""
    if spec.startswith("cartdim("):
        return f"cartesian_dimensions(*{spec[len('cartdim('):-1]})"
    if spec.startswith("peers("):
        return f"peers(*{spec[len('peers('):-1]})"
    return f"*{spec}"


def filled_expression(spec, c_names):
    """statuses[count:count] -> *count; [incount:outcount] -> *outcount; [count:flag?count] -> (flag ? *count : 0)."""
    if "?" in spec:
        condition, size = spec.split("?")
        return f"({c_names[condition]} != 0 ? *{size} : 0)"
    return f"*{spec}"


def entry_point(mpi, c_name, arguments):
    via_pmpi = c_name.endswith("+")
    c_name = c_name.rstrip("+")
    parsed = [ARGUMENT.match(a.strip()) for a in arguments.split(",") if a.strip()]
    if any(p is None for p in parsed):
        raise SystemExit(f"{c_name}: cannot read its arguments '{arguments}'")
    c_names = {p["name"]: f"c_{p['name']}" for p in parsed}
    parameters, pre, call, post, always, completed = [], [], [], [], [], []
    for p in parsed:
        if p["kind"] not in KINDS:
            raise SystemExit(f"{c_name}: unknown kind '{p['kind']}'")
        before, argument, after = KINDS[p["kind"]]
        fields = {
            "n": p["name"],
            "c": c_names[p["name"]],
            "size": size_expression(p["size"]) if p["size"] else None,
            "filled": filled_expression(p["filled"], c_names) if p["filled"] else None,
        }
        parameters.append(f"{'void' if p['kind'] == 'buf' else 'MPI_Fint'}* {p['name']}")
        if before:
            pre.append(before.format(**fields))
            if p["kind"] in ("requests", "statuses", "logicals", "types"):
                pre.append(f"if (!{fields['c']}.ok()) return set_error(ierror, MPI_ERR_NO_MEM);")
        call.append(argument.format(**fields))
        if after:
            target = post
            if after.startswith("always: "):
                target, after = always, after[len("always: ") :]
            elif after.startswith("completed: "):
                target, after = completed, after[len("completed: ") :]
            target.append(after.format(**fields))
    parameters.append("MPI_Fint* ierror")

    body = ["LOCKSTEP_FORTRAN_CALL_SITE();"] + pre
    if c_name == "MPI_Init":
        body += ["int argc = 0;", "char** argv = nullptr;"]
        call = ["&argc", "&argv"]
    elif c_name == "MPI_Init_thread":
        body += ["int argc = 0;", "char** argv = nullptr;"]
        call = ["&argc", "&argv"] + call
    body.append(f"const int rc = {c_name}({', '.join(call)});")
    body += always
    if completed:
        body.append("if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) {")
        body += ["    " + s for s in completed]
        body.append("}")
    if post:
        body.append("if (rc == MPI_SUCCESS) {")
        body += ["    " + s for s in post]
        body.append("}")
    body.append("set_error(ierror, rc);")

    names = fortran_names(mpi, c_name, via_pmpi)
    signature = ", ".join(parameters)
    lines = [f"// {c_name}", f"LOCKSTEP_FORTRAN_ENTRY void {names[0]}({signature}) {{"]
    lines += ["    " + b for b in body]
    lines.append("}")
    for alias in names[1:]:
        lines.append(f'LOCKSTEP_FORTRAN_ENTRY void {alias}({signature}) __attribute__((alias("{names[0]}")));')
    return "\n".join(lines)


HEADER = """\
// Generated by check/fortran/entry_points.py from its table: edit the table, not this file.
// The Fortran entry points of Open MPI's bindings (mpif.h, `use mpi`, `use mpi_f08`) and of MPICH's mpi_f08 calls
// without a buffer, each a call to this library's C function.
#include <mpi.h>

#include "fortran/call_site.hpp"
#include "fortran/conversions.hpp"

#define LOCKSTEP_FORTRAN_ENTRY extern "C" __attribute__((visibility("default")))

using namespace lockstep::check::fortran;  // NOLINT(google-build-using-namespace): generated code

"""


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    table = rows(TABLE)
    text = HEADER + "#if defined(OPEN_MPI)\n\n"
    text += "\n\n".join(entry_point("openmpi", name, arguments) for name, arguments in table)
    text += "\n\n#elif defined(MPICH)  // mpi_f08 only\n\n"
    mpich = [(name.rstrip("+"), arguments) for name, arguments in table if in_mpich_f08(name.rstrip("+"), arguments)]
    text += "\n\n".join(entry_point("mpich", name, arguments) for name, arguments in mpich)
    text += "\n\n#endif\n"
    with open(sys.argv[1], "w") as out:
        out.write(text)


if __name__ == "__main__":
    main()
