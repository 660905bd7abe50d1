"""lockstep.torch: lockstep as the torch.distributed backend "lockstep".

    import lockstep.torch, torch.distributed as dist
    lockstep.torch.init_process_group()            # under mpirun/srun: no MASTER_ADDR, MASTER_PORT, RANK
    dist.all_reduce(x)                             # through lockstep: debug-mode checks, the watchdog
    model = torch.nn.parallel.DistributedDataParallel(model)

Importing this module registers the backend (once). Every collective is lockstep's, called on the caller's memory
through DLPack without a copy (bool tensors as their uint8 view), and blocks until it is done: the Work returned is
already complete, and its future holds the output tensors, as DDP's communication hooks expect.

How torch (1.13) reaches a Python process group: torch.distributed's functions call the methods below directly; DDP's
C++ parts (Reducer, _broadcast_coalesced, _verify_params_across_processes) reach allreduce, broadcast and allgather
through the C++ trampoline of ProcessGroup. A Work returned to C++ must be a C++ one: pybind11 lets the Python part of
a Python Work subclass die once C++ holds it, and C++ then waits forever in the base Work::wait. So results are C++
works wrapped around a completed torch.futures.Future (_create_work_from_future); only recv_anysource, which
torch.distributed.recv calls from Python for its `_source_rank()`, returns a Python Work.

Groups: torch calls the backend's creator on the members of a group only, with the group's own PrefixStore. Each member
writes its lockstep (world) rank there and reads the others', so every member knows the group's world ranks in group
rank order; the group is then lockstep's world communicator (the same ranks in the same order) or
Communicator.world().create_group(ranks), created by the members alone.
"""
import datetime
import functools
import os
import socket
import zlib

import torch
import torch.distributed as dist
import torch.utils.dlpack

import lockstep

if not dist.is_available():  # pragma: no cover - Debian's torch has torch.distributed
    raise ImportError("lockstep.torch: this torch was built without torch.distributed")

from torch._C import _distributed_c10d as _c10d  # noqa: E402 (after the availability check)

__all__ = ["BACKEND", "ProcessGroupLockstep", "init_process_group"]

BACKEND = "lockstep"

# ------------------------------------------------------------------------------------------------ reductions

# torch's reduction → lockstep's. Bool tensors travel as uint8 (0/1): a sum there would store 2, so logical OR (sum)
# and AND (product) are max and min, as torch's own bool arithmetic has it.
_OPS = {"SUM": "sum", "PRODUCT": "prod", "MIN": "min", "MAX": "max", "AVG": "mean"}
_BOOL_OPS = {"SUM": "max", "PRODUCT": "min", "MIN": "min", "MAX": "max"}
_INSTEAD = {
    "BAND": "ReduceOp.MIN on 0/1 or bool tensors (logical AND)",
    "BOR": "ReduceOp.MAX on 0/1 or bool tensors (logical OR)",
    "BXOR": "ReduceOp.SUM on 0/1 values, then % 2",
    "PREMUL_SUM": "a multiplication before ReduceOp.SUM",
}


def _op_name(op):
    """SUM, AVG, ...: the name of a ReduceOp (torch 1.13's struct has .op, a RedOpType; older ones are the enum)."""
    if op is None:
        return "SUM"
    op = getattr(op, "reduceOp", op)  # an options object
    return getattr(getattr(op, "op", op), "name", str(op))


def _lockstep_op(op, tensor, call):
    name = _op_name(op)
    table = _BOOL_OPS if tensor.dtype == torch.bool else _OPS
    if name in table:
        return table[name]
    if name == "AVG":
        raise lockstep.UnsupportedError(
            f"lockstep backend: {call} with ReduceOp.AVG on a bool tensor is not supported; cast to a float dtype"
        )
    instead = _INSTEAD.get(name, "ReduceOp.SUM, PRODUCT, MIN, MAX or AVG")
    raise lockstep.UnsupportedError(
        f"lockstep backend: {call} with ReduceOp.{name} is not supported (lockstep reduces with sum, prod, min, max "
        f"and mean); use {instead}, or a gloo group (dist.new_group(backend='gloo')) for this call"
    )


# ------------------------------------------------------------------------------------------------ tensors

_DTYPES = {
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.uint8,
    torch.int32,
    torch.int64,
    torch.bool,
}


def _check_dtype(tensor, call):
    if tensor.dtype not in _DTYPES:
        raise lockstep.DTypeError(
            f"lockstep backend: {call} on a {tensor.dtype} tensor: lockstep carries float32, float64, float16, "
            f"bfloat16, int8, uint8, int32, int64 and bool; cast it (int16 to int32, complex with torch.view_as_real)"
        )


def _dl(tensor):
    """The DLPack capsule lockstep reads and writes `tensor` through (contiguous; bool as its uint8 view, since torch
    exports no DLPack bool)."""
    if tensor.dtype == torch.bool:
        tensor = tensor.view(torch.uint8)
    return torch.utils.dlpack.to_dlpack(tensor)


def _contiguous(tensor):
    return tensor if tensor.is_contiguous() else tensor.contiguous()


def _in_place(tensor, collective):
    """Runs `collective(capsule)` on `tensor`'s memory; a non-contiguous tensor through a contiguous copy."""
    work = _contiguous(tensor)
    collective(_dl(work))
    if work is not tensor:
        tensor.copy_(work)


def _rows(tensor):
    """`tensor` with a first dimension to split or stack along (a 0-d tensor as [1])."""
    return tensor if tensor.dim() > 0 else tensor.reshape(1)


def _stacked_shape(rows, count):
    """[count * d0, ...]: `count` tensors of `rows`' shape concatenated along dimension 0."""
    return (count * rows.shape[0],) + tuple(rows.shape[1:])


def _single(tensors, call):
    if isinstance(tensors, torch.Tensor):
        return tensors
    if len(tensors) != 1:
        raise lockstep.UnsupportedError(
            f"lockstep backend: {call} takes one tensor per process (got {len(tensors)}); one process driving several "
            f"devices is not supported: run one process per device"
        )
    return tensors[0]


def _same_layout(tensors, like, call):
    """Checks that every tensor of a list matches `like` in dtype and number of elements, as the stacked collectives
    need (torch checks neither)."""
    for tensor in tensors:
        if tensor.dtype != like.dtype:
            raise lockstep.DTypeError(
                f"lockstep backend: {call}: a {tensor.dtype} tensor where {like.dtype} is "
                f"expected; every tensor of the call has one dtype"
            )
        if tensor.numel() != like.numel():
            raise lockstep.ShapeError(
                f"lockstep backend: {call}: a tensor of shape {list(tensor.shape)} where "
                f"{like.numel()} elements (shape {list(like.shape)}) are expected"
            )


def _count(tensors, size, call):
    if len(tensors) != size:
        raise lockstep.ShapeError(
            f"lockstep backend: {call} needs one tensor per rank of the group ({size}), " f"got {len(tensors)}"
        )


# ------------------------------------------------------------------------------------------------ work

_HAVE_FUTURE_WORK = hasattr(_c10d, "_create_work_from_future") and hasattr(torch.futures, "Future")


class _CompletedWork(_c10d.Work):
    """A finished call, for callers in Python (C++ callers get _completed's C++ work, see the module's comment)."""

    def __init__(self, result, source_rank=-1):
        super().__init__()
        self._result = result
        self._source = source_rank
        self._future = torch.futures.Future()
        self._future.set_result(result)

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def exception(self):
        return None

    def synchronize(self):
        pass

    def result(self):
        return self._result

    def get_future(self):
        return self._future

    def source_rank(self):
        return self._source

    def _source_rank(self):
        return self._source


def _completed(result):
    """The Work of a call that has finished with `result` (a list of tensors: what gloo's futures hold)."""
    if not _HAVE_FUTURE_WORK:  # pragma: no cover - torch 1.13 has it
        return _CompletedWork(result)
    future = torch.futures.Future()
    future.set_result(result)
    return _c10d._create_work_from_future(future)


# ------------------------------------------------------------------------------------------------ the process group


def _joined(kind):
    """A method that checks its arguments before its collective: when it raises before this rank entered any
    collective (a dtype or op lockstep lacks, lists of the wrong length, a torch error while laying tensors out), this
    rank joins the collective as rejected, so the other ranks, already in it, are not left waiting. In debug mode every
    rank then raises the same CallRejectedError naming this rank and the reason; otherwise this rank's own error."""

    def wrap(method):
        @functools.wraps(method)
        def call(self, *args, **kwargs):
            entered = lockstep._lockstep._calls_entered()
            try:
                return method(self, *args, **kwargs)
            except Exception as error:
                if (
                    lockstep._lockstep._calls_entered() == entered
                    and not self.comm.freed
                    and not lockstep._lockstep.is_finalized()
                ):
                    self.comm._reject(
                        kind, -1, f"lockstep backend: {method.__name__}: {type(error).__name__}: " f"{error}"
                    )
                raise

        return call

    return wrap


class ProcessGroupLockstep(_c10d.ProcessGroup):
    """A torch.distributed process group over a lockstep Communicator whose rank i is the group's rank i.

    Every method blocks until lockstep's collective is done and returns a completed Work. The call forms are those of
    torch's ProcessGroup bindings (a list and an options object, or the older tensor/root/op forms)."""

    def __init__(self, comm, rank, size):
        super().__init__(rank, size)
        self.comm = comm

    def getBackendName(self):
        return BACKEND

    def __repr__(self):
        return f"ProcessGroupLockstep(rank={self.rank()}, size={self.size()}, comm={self.comm!r})"

    # ---------------------------------------------------------------------------------------- reductions

    @_joined("allreduce")
    def allreduce(self, tensors, opts=None):
        tensor = _single(tensors, "allreduce")
        _check_dtype(tensor, "allreduce")
        op = _lockstep_op(opts, tensor, "allreduce")
        _in_place(tensor, lambda x: self.comm.allreduce(x, op=op, tag="torch allreduce"))
        return _completed([tensor])

    @_joined("allreduce")
    def allreduce_coalesced(self, tensors, opts=None):
        """One allreduce over the tensors laid end to end (as gloo does): they share one dtype."""
        if not tensors:
            return _completed([])
        first = tensors[0]
        _check_dtype(first, "allreduce_coalesced")
        for tensor in tensors:
            if tensor.dtype != first.dtype:
                raise lockstep.DTypeError(
                    "lockstep backend: allreduce_coalesced needs tensors of one dtype, got "
                    f"{first.dtype} and {tensor.dtype}"
                )
        op = _lockstep_op(opts, first, "allreduce_coalesced")
        flat = torch.cat([tensor.reshape(-1) for tensor in tensors])
        self.comm.allreduce(_dl(flat), op=op, tag="torch allreduce_coalesced")
        offset = 0
        for tensor in tensors:
            tensor.copy_(flat[offset : offset + tensor.numel()].view(tensor.shape))
            offset += tensor.numel()
        return _completed(list(tensors))

    @_joined("reduce")
    def reduce(self, tensors, opts=None, op=None):
        if isinstance(tensors, torch.Tensor):  # reduce(tensor, root, op=SUM)
            root, reduce_op = opts, op
        else:
            root, reduce_op = (opts.rootRank, opts.reduceOp) if opts is not None else (0, None)
            if opts is not None and opts.rootTensor != 0:
                raise lockstep.UnsupportedError(
                    "lockstep backend: reduce with rootTensor != 0 (one tensor per process)"
                )
        tensor = _single(tensors, "reduce")
        _check_dtype(tensor, "reduce")
        lockstep_op = _lockstep_op(reduce_op, tensor, "reduce")
        _in_place(tensor, lambda x: self.comm.reduce(x, root=root, op=lockstep_op, tag="torch reduce"))
        return _completed([tensor])

    @_joined("reduce_scatter")
    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        if isinstance(output_tensors, torch.Tensor):  # reduce_scatter(output, inputs, op=SUM)
            output, inputs, op = output_tensors, input_tensors, opts
        else:
            output = _single(output_tensors, "reduce_scatter")
            inputs = _single(input_tensors, "reduce_scatter")
            op = opts
        _count(inputs, self.size(), "reduce_scatter")
        _check_dtype(output, "reduce_scatter")
        _same_layout(inputs, output, "reduce_scatter")
        lockstep_op = _lockstep_op(op, output, "reduce_scatter")
        rows = _rows(output)
        stacked = torch.stack([tensor.reshape(rows.shape) for tensor in inputs]).view(_stacked_shape(rows, self.size()))
        _in_place(
            rows,
            lambda out: self.comm.reduce_scatter(_dl(stacked), out=out, op=lockstep_op, tag="torch reduce_scatter"),
        )
        return _completed([output])

    @_joined("reduce_scatter")
    def _reduce_scatter_base(self, output, input, opts=None):
        _check_dtype(output, "_reduce_scatter_base")
        if input.dtype != output.dtype or input.numel() != self.size() * output.numel():
            raise lockstep.ShapeError(
                f"lockstep backend: reduce_scatter_tensor: the input ({input.dtype}, {input.numel()} elements) must be "
                f"the group's size ({self.size()}) times the output ({output.dtype}, {output.numel()} elements)"
            )
        lockstep_op = _lockstep_op(opts, output, "reduce_scatter_tensor")
        rows = _rows(output)
        stacked = _contiguous(input).view(_stacked_shape(rows, self.size()))
        _in_place(
            rows,
            lambda out: self.comm.reduce_scatter(
                _dl(stacked), out=out, op=lockstep_op, tag="torch reduce_scatter_tensor"
            ),
        )
        return _completed([output])

    # ---------------------------------------------------------------------------------------- one to all, all to one

    @_joined("broadcast")
    def broadcast(self, tensors, opts=None):
        if isinstance(tensors, torch.Tensor):  # broadcast(tensor, root)
            root = opts
        else:
            root = opts.rootRank if opts is not None else 0
            if opts is not None and opts.rootTensor != 0:
                raise lockstep.UnsupportedError(
                    "lockstep backend: broadcast with rootTensor != 0 (one tensor per process)"
                )
        tensor = _single(tensors, "broadcast")
        _check_dtype(tensor, "broadcast")
        _in_place(tensor, lambda x: self.comm.broadcast(x, root=root, tag="torch broadcast"))
        return _completed([tensor])

    @_joined("gather")
    def gather(self, output_tensors, input_tensors, opts=None):
        if isinstance(input_tensors, torch.Tensor):  # gather(outputs, input, root)
            outputs, tensor, root = output_tensors, input_tensors, opts
        else:
            tensor = _single(input_tensors, "gather")
            root = opts.rootRank if opts is not None else 0
            outputs = _single(output_tensors, "gather") if self.rank() == root else []
        _check_dtype(tensor, "gather")
        rows = _rows(_contiguous(tensor))
        stacked = None
        if self.rank() == root:
            _count(outputs, self.size(), "gather")
            _same_layout(outputs, tensor, "gather")
            stacked = torch.empty(_stacked_shape(rows, self.size()), dtype=tensor.dtype, device=tensor.device)
        self.comm.gather(_dl(rows), root=root, out=None if stacked is None else _dl(stacked), tag="torch gather")
        if stacked is not None:
            for output, block in zip(outputs, stacked.view((self.size(),) + tuple(rows.shape))):
                output.copy_(block.view(output.shape))
        return _completed([outputs] if outputs else [])

    @_joined("scatter")
    def scatter(self, output_tensors, input_tensors, opts=None):
        if isinstance(output_tensors, torch.Tensor):  # scatter(output, inputs, root)
            output, inputs, root = output_tensors, input_tensors, opts
        else:
            output = _single(output_tensors, "scatter")
            root = opts.rootRank if opts is not None else 0
            inputs = _single(input_tensors, "scatter") if self.rank() == root else []
        _check_dtype(output, "scatter")
        rows = _rows(output)
        stacked = None
        if self.rank() == root:
            _count(inputs, self.size(), "scatter")
            _same_layout(inputs, output, "scatter")
            stacked = torch.stack([tensor.reshape(rows.shape) for tensor in inputs]).view(
                _stacked_shape(rows, self.size())
            )
        _in_place(
            rows,
            lambda out: self.comm.scatter(
                None if stacked is None else _dl(stacked), out, root=root, tag="torch scatter"
            ),
        )
        return _completed([output])

    # ---------------------------------------------------------------------------------------- all to all

    @_joined("allgather")
    def allgather(self, output_tensors, input_tensors, opts=None):
        if isinstance(input_tensors, torch.Tensor):  # allgather(outputs, input)
            outputs, tensor = output_tensors, input_tensors
        else:
            outputs = _single(output_tensors, "allgather")
            tensor = _single(input_tensors, "allgather")
        _check_dtype(tensor, "allgather")
        _count(outputs, self.size(), "allgather")
        _same_layout(outputs, tensor, "allgather")
        rows = _rows(_contiguous(tensor))
        stacked = torch.empty(_stacked_shape(rows, self.size()), dtype=tensor.dtype, device=tensor.device)
        self.comm.allgather(_dl(rows), out=_dl(stacked), tag="torch allgather")
        for output, block in zip(outputs, stacked.view((self.size(),) + tuple(rows.shape))):
            output.copy_(block.view(output.shape))
        return _completed([outputs])

    @_joined("allgather")
    def _allgather_base(self, output, input, opts=None):
        _check_dtype(input, "_allgather_base")
        if output.dtype != input.dtype or output.numel() != self.size() * input.numel():
            raise lockstep.ShapeError(
                f"lockstep backend: all_gather_into_tensor: the output ({output.dtype}, {output.numel()} elements) "
                f"must be the group's size ({self.size()}) times the input ({input.dtype}, {input.numel()} elements)"
            )
        rows = _rows(_contiguous(input))
        work = _contiguous(output)
        self.comm.allgather(
            _dl(rows), out=_dl(work.view(_stacked_shape(rows, self.size()))), tag="torch all_gather_into_tensor"
        )
        if work is not output:
            output.copy_(work)
        return _completed([output])

    @_joined("allgather")
    def allgather_coalesced(self, output_lists, input_list, opts=None):
        """One allgather of the inputs laid end to end; output_lists[r][j] gets rank r's input_list[j]."""
        _count(output_lists, self.size(), "allgather_coalesced")
        if not input_list:
            return _completed(output_lists)
        first = input_list[0]
        _check_dtype(first, "allgather_coalesced")
        for outputs in output_lists:
            if len(outputs) != len(input_list):
                raise lockstep.ShapeError(
                    "lockstep backend: allgather_coalesced needs one output per input on every "
                    f"rank ({len(input_list)}), got {len(outputs)}"
                )
            for output, tensor in zip(outputs, input_list):
                _same_layout([output, tensor], tensor, "allgather_coalesced")
        for tensor in input_list:
            if tensor.dtype != first.dtype:
                raise lockstep.DTypeError(
                    "lockstep backend: allgather_coalesced needs tensors of one dtype, got "
                    f"{first.dtype} and {tensor.dtype}"
                )
        flat = torch.cat([tensor.reshape(-1) for tensor in input_list])
        gathered = torch.empty(self.size() * flat.numel(), dtype=flat.dtype, device=flat.device)
        self.comm.allgather(_dl(flat), out=_dl(gathered), tag="torch allgather_coalesced")
        for outputs, block in zip(output_lists, gathered.view(self.size(), flat.numel())):
            offset = 0
            for output in outputs:
                output.copy_(block[offset : offset + output.numel()].view(output.shape))
                offset += output.numel()
        return _completed(output_lists)

    @_joined("alltoall")
    def alltoall(self, output_tensors, input_tensors, opts=None):
        """Block j of this rank's input list to rank j: the tensors laid end to end, one alltoall_base."""
        _count(output_tensors, self.size(), "alltoall")
        _count(input_tensors, self.size(), "alltoall")
        first = input_tensors[0]
        _check_dtype(first, "alltoall")
        for tensor in list(input_tensors) + list(output_tensors):
            if tensor.dtype != first.dtype:
                raise lockstep.DTypeError(
                    f"lockstep backend: alltoall needs tensors of one dtype, got {first.dtype} " f"and {tensor.dtype}"
                )
        flat_in = torch.cat([tensor.reshape(-1) for tensor in input_tensors])
        flat_out = torch.empty(sum(t.numel() for t in output_tensors), dtype=first.dtype, device=first.device)
        self._alltoall_rows(
            flat_out, flat_in, [t.numel() for t in output_tensors], [t.numel() for t in input_tensors], "alltoall"
        )
        offset = 0
        for output in output_tensors:
            output.copy_(flat_out[offset : offset + output.numel()].view(output.shape))
            offset += output.numel()
        return _completed(list(output_tensors))

    @_joined("alltoall")
    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        _check_dtype(input, "all_to_all_single")
        if output.dtype != input.dtype:
            raise lockstep.DTypeError(
                f"lockstep backend: all_to_all_single: output {output.dtype}, input " f"{input.dtype}"
            )
        size = self.size()
        out_rows, in_rows = _rows(output), _rows(input)
        out_splits = list(output_split_sizes) or self._even_splits(out_rows, "output")
        in_splits = list(input_split_sizes) or self._even_splits(in_rows, "input")
        if (
            len(out_splits) != size
            or len(in_splits) != size
            or sum(out_splits) != out_rows.shape[0]
            or sum(in_splits) != in_rows.shape[0]
            or out_rows.shape[1:] != in_rows.shape[1:]
        ):
            raise lockstep.ShapeError(
                f"lockstep backend: all_to_all_single: splits {in_splits} -> {out_splits} do not fit input "
                f"{list(input.shape)} and output {list(output.shape)} in a group of {size}"
            )
        work = _contiguous(out_rows)
        self._alltoall_rows(work, _contiguous(in_rows), out_splits, in_splits, "all_to_all_single")
        if work is not out_rows:
            out_rows.copy_(work)
        return _completed([output])

    def _even_splits(self, rows, what):
        if rows.shape[0] % self.size():
            raise lockstep.ShapeError(
                f"lockstep backend: all_to_all_single without split sizes: the {what}'s first "
                f"dimension ({rows.shape[0]}) is not a multiple of the group's size "
                f"({self.size()})"
            )
        return [rows.shape[0] // self.size()] * self.size()

    def _alltoall_rows(self, output, input, out_splits, in_splits, call):
        """Rows in_splits[j] of `input` to rank j; rows from rank i into `output` at out_splits[i].

        lockstep's alltoall moves equal blocks, so every block is padded to the largest block of the call on any rank.
        That size is agreed with one allreduce (max) first, on every call: whether blocks are uneven is not something
        a rank can see from its own splits alone, and every rank must make the same calls."""
        size = self.size()
        longest = torch.tensor([max(in_splits + out_splits)], dtype=torch.int64)
        self.comm.allreduce(_dl(longest), op="max", tag=f"torch {call} block size")
        block = int(longest.item())
        if block == 0:
            return
        rest = tuple(input.shape[1:])
        if in_splits == [block] * size:
            padded_in = input
        else:
            padded_in = torch.zeros((size * block,) + rest, dtype=input.dtype, device=input.device)
            offset = 0
            for j, rows in enumerate(in_splits):
                padded_in[j * block : j * block + rows] = input[offset : offset + rows]
                offset += rows
        if out_splits == [block] * size:
            self.comm.alltoall(_dl(padded_in), out=_dl(output), tag=f"torch {call}")
            return
        padded_out = torch.empty((size * block,) + rest, dtype=input.dtype, device=input.device)
        self.comm.alltoall(_dl(padded_in), out=_dl(padded_out), tag=f"torch {call}")
        offset = 0
        for i, rows in enumerate(out_splits):
            output[offset : offset + rows] = padded_out[i * block : i * block + rows]
            offset += rows

    # ---------------------------------------------------------------------------------------- point to point

    def send(self, tensors, dstRank, tag=0):
        tensor = _single(tensors, "send")
        _check_dtype(tensor, "send")
        self.comm.send(_dl(_contiguous(tensor)), dstRank, tag=tag, name="torch send")
        return _completed([tensor])

    def recv(self, tensors, srcRank, tag=0):
        tensor = _single(tensors, "recv")
        _check_dtype(tensor, "recv")
        _in_place(tensor, lambda x: self.comm.recv(x, source=srcRank, tag=tag, name="torch recv"))
        return _completed([tensor])

    def recv_anysource(self, tensors, tag=0):
        tensor = _single(tensors, "recv")
        _check_dtype(tensor, "recv")
        sources = []
        _in_place(tensor, lambda x: sources.append(self.comm.recv(x, source=-1, tag=tag, name="torch recv")))
        # torch.distributed.recv asks this Work for the sender (work._source_rank()), from Python.
        return _CompletedWork([tensor], sources[0])

    # ---------------------------------------------------------------------------------------- barrier

    @_joined("barrier")
    def barrier(self, opts=None):
        self.comm.barrier(tag="torch barrier")
        return _completed([])


# ------------------------------------------------------------------------------------------------ creation

_RANK_KEY = "lockstep/world_rank/{}"


def _world_ranks(store, group_rank, group_size):
    """The lockstep world ranks of the group's members, in group rank order, through the group's PrefixStore."""
    store.set(_RANK_KEY.format(group_rank), str(lockstep.rank()))
    ranks = [int(store.get(_RANK_KEY.format(r))) for r in range(group_size)]
    if len(set(ranks)) != group_size:
        raise lockstep.InvalidUsageError(
            f"lockstep backend: the torch group's processes are not distinct lockstep ranks (world ranks {ranks}): "
            f"launch the job with mpirun or srun, one lockstep process per torch rank"
        )
    return ranks


def _group_tag(ranks):
    """The tag of MPI_Comm_create_group: the same on every member, and different for groups of other members."""
    return zlib.crc32(",".join(map(str, ranks)).encode()) % 32768


def _create_process_group(store, rank, size, timeout):
    """The creator torch calls (backend "lockstep") on each member of a new group."""
    lockstep.init()
    ranks = _world_ranks(store, rank, size)
    world = lockstep.Communicator.world()
    # Each group its own communicator (a duplicate of the world for a group of every rank): its calls never pair up
    # with those of another group or of lockstep.Communicator.world(), and its debug switch is its own.
    comm = world.dup() if ranks == list(range(world.size)) else world.create_group(ranks, _group_tag(ranks))
    return ProcessGroupLockstep(comm, rank, size)


def _register():
    plugins = getattr(dist.Backend, "_plugins", {})
    if BACKEND.upper() in plugins or hasattr(dist.Backend, BACKEND.upper()):
        return
    dist.Backend.register_backend(BACKEND, _create_process_group)


_register()

# ------------------------------------------------------------------------------------------------ init_process_group

_ADDRESS_BYTES = 256


def _timedelta(timeout):
    if timeout is None:
        return getattr(dist, "default_pg_timeout", datetime.timedelta(minutes=30))
    if isinstance(timeout, datetime.timedelta):
        return timeout
    return datetime.timedelta(seconds=float(timeout))


def _store_host():
    """The address the other ranks reach rank 0's store at: loopback when the whole job is on this node; else the
    address lockstep's watchdog publishes (LOCKSTEP_WATCHDOG_HOST), else this host's name's address."""
    host = os.environ.get("LOCKSTEP_WATCHDOG_HOST")
    if host:
        return host
    if lockstep.local_size() == lockstep.size():
        return "127.0.0.1"
    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
    except OSError:
        return name
    return name if address.startswith("127.") else address


def _rendezvous_store(world, timeout):
    """Rank 0 opens a TCPStore on a free port and broadcasts host:port (a byte tensor) to the others."""
    address = torch.zeros(_ADDRESS_BYTES, dtype=torch.uint8)
    server = None
    if world.rank == 0:
        host = _store_host()
        server = dist.TCPStore(host, 0, world.size, True, timeout, wait_for_workers=False)
        text = f"{host}:{server.port}".encode()
        address[: len(text)] = torch.tensor(list(text), dtype=torch.uint8)
    world.broadcast(_dl(address), root=0, tag="torch rendezvous address")
    if server is not None:
        return server
    host, port = bytes(address.tolist()).rstrip(b"\0").decode().rsplit(":", 1)
    return dist.TCPStore(host, int(port), world.size, False, timeout)


def init_process_group(backend=BACKEND, timeout=None, **kwargs):
    """torch.distributed.init_process_group for a job that mpirun or srun started: rank and size are lockstep's, and
    the rendezvous store's address is agreed through lockstep (no MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE).

    backend: "lockstep" (the default) or any other torch backend ("gloo") that should use this rendezvous.
    timeout: seconds or a timedelta for torch's store and backend (lockstep's own watchdog keeps its LOCKSTEP_TIMEOUT).
    Other keywords (group_name, pg_options) go to torch.distributed.init_process_group."""
    for name in ("store", "rank", "world_size", "init_method"):
        if name in kwargs:
            raise lockstep.InvalidArgumentError(
                f"lockstep.torch.init_process_group takes {name} from lockstep; call "
                f"torch.distributed.init_process_group to give your own"
            )
    if dist.is_initialized():
        raise lockstep.InvalidUsageError("lockstep.torch.init_process_group: torch.distributed is initialised already")
    timeout = _timedelta(timeout)
    lockstep.init()
    world = lockstep.Communicator.world()
    store = _rendezvous_store(world, timeout)
    dist.init_process_group(backend, store=store, rank=world.rank, world_size=world.size, timeout=timeout, **kwargs)
