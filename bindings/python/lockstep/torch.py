"""lockstep.torch: lockstep as the torch.distributed backend "lockstep".

    import lockstep.torch, torch.distributed as dist
    dist.init_process_group("lockstep")            # under mpirun/srun/lockstep launch: nothing to set
    dist.all_reduce(x)                             # through lockstep: debug-mode checks, the watchdog
    model = torch.nn.parallel.DistributedDataParallel(model)

It also registers the checking backends "lockstep_gloo" and "lockstep_nccl" (lockstep/torch_checked.py): torch's gloo
or NCCL carries every collective, and lockstep checks each call's signature in debug mode and watches it for hangs.

Importing this module registers the backend (once), extends torch's env:// rendezvous to jobs that set no RANK and
WORLD_SIZE (rank and size are then MPI's), and wraps torch.distributed._make_nccl_premul_sum and the reductions that
take an op, so that a PREMUL_SUM's factor reaches the backend. Every collective is lockstep's non-blocking one,
called on the caller's memory through DLPack without a copy (bool tensors as their uint8 view): the Work returned is
pending, wait() raises the operation's error, and get_future() completes with the output tensors when the operation
does, as DDP's communication hooks expect.

How torch reaches a Python process group: torch.distributed's functions call the methods below directly; DDP's C++
parts (Reducer, _broadcast_coalesced, _verify_params_across_processes) reach allreduce, broadcast and allgather through
the C++ trampoline of ProcessGroup, and call the Work's wait, get_future and result through Work's trampoline. That
works only while the Work's Python object lives, which pybind11 does not ensure once the object went to C++: each
_Work keeps itself alive until it finished and was waited for or had its future taken (see _Work).

Groups: torch calls the backend's creator on the members of a group only, with the group's own PrefixStore. Each member
writes its lockstep (world) rank there and reads the others', so every member knows the group's world ranks in group
rank order; the group is then a duplicate of lockstep's world communicator (the same ranks in the same order) or
Communicator.world().create_group(ranks), created by the members alone, with the group's timeout as its watchdog
timeout.
"""
import collections
import datetime
import functools
import inspect
import os
import socket
import sys
import threading
import time
import urllib.parse
import zlib

import torch
import torch.distributed as dist
import torch.utils.dlpack

import lockstep

if not dist.is_available():  # pragma: no cover - Debian's torch has torch.distributed
    raise ImportError("lockstep.torch: this torch was built without torch.distributed")

from torch._C import _distributed_c10d as _c10d  # noqa: E402 (after the availability check)

__all__ = [
    "BACKEND",
    "GLOO_BACKEND",
    "NCCL_BACKEND",
    "ProcessGroupChecked",
    "ProcessGroupLockstep",
    "init_process_group",
]

BACKEND = "lockstep"

# ------------------------------------------------------------------------------------------------ reductions

# torch's reduction → lockstep's. Bool tensors travel as uint8 (0/1): a sum there would store 2, so logical OR (sum)
# and AND (product) are max and min, as torch's own bool arithmetic has it; the bitwise ops work on 0/1 as they are.
_OPS = {
    "SUM": "sum",
    "PRODUCT": "prod",
    "MIN": "min",
    "MAX": "max",
    "AVG": "mean",
    "BAND": "band",
    "BOR": "bor",
    "BXOR": "bxor",
}
_BOOL_OPS = {"SUM": "max", "PRODUCT": "min", "MIN": "min", "MAX": "max", "BAND": "band", "BOR": "bor", "BXOR": "bxor"}


def _op_name(op):
    """SUM, AVG, ...: the name of a ReduceOp (torch 1.13's struct has .op, a RedOpType; older ones are the enum)."""
    if op is None:
        return "SUM"
    op = getattr(op, "reduceOp", op)  # an options object
    return getattr(getattr(op, "op", op), "name", str(op))


def _reduction(op, tensor, call):
    """The keywords of lockstep's reduction for torch's ReduceOp (or an options object holding one)."""
    name = _op_name(op)
    if name == "PREMUL_SUM":
        factor = getattr(_CALL_FACTOR, "value", None)
        if factor is None:
            raise lockstep.UnsupportedError(
                f"lockstep backend: {call} with a ReduceOp.PREMUL_SUM whose factor lockstep cannot read (torch keeps "
                f"it in C++): make it with torch.distributed._make_nccl_premul_sum(factor) after importing "
                f"lockstep.torch, and pass it to torch.distributed's all_reduce, reduce, reduce_scatter or "
                f"reduce_scatter_tensor"
            )
        return {"op": "premul_sum", "factor": factor}
    table = _BOOL_OPS if tensor.dtype == torch.bool else _OPS
    if name in table:
        return {"op": table[name]}
    if name == "AVG":
        raise lockstep.UnsupportedError(
            f"lockstep backend: {call} with ReduceOp.AVG on a bool tensor is not supported; cast to a float dtype"
        )
    raise lockstep.UnsupportedError(f"lockstep backend: {call} with ReduceOp.{name}: an op lockstep does not know")


# torch's PREMUL_SUM op keeps its factor in C++, out of a Python backend's reach. So lockstep.torch wraps the function
# that makes one, to remember each op's factor, and the functions that take an op, to hand that factor to the backend
# for the duration of the call (per thread).
_PREMUL_FACTORS = collections.OrderedDict()  # id(op) -> (op, factor); the newest _PREMUL_KEPT
_PREMUL_KEPT = 4096
_CALL_FACTOR = threading.local()


def _premul_factor(factor):
    """A float, or the one-element tensor of torch's list form (one tensor per device: one device per process)."""
    if isinstance(factor, (list, tuple)):
        if len(factor) != 1:
            raise lockstep.UnsupportedError(
                f"lockstep backend: _make_nccl_premul_sum with {len(factor)} factors: one process drives one device"
            )
        factor = factor[0]
    if isinstance(factor, torch.Tensor):
        if factor.numel() != 1:
            raise lockstep.ShapeError(f"lockstep backend: a PREMUL_SUM factor of {factor.numel()} elements, not one")
        factor = factor.item()
    return factor


def _wrap_premul_maker(maker):
    @functools.wraps(maker)
    def make(factor):
        op = maker(factor)
        _PREMUL_FACTORS[id(op)] = (op, _premul_factor(factor))
        while len(_PREMUL_FACTORS) > _PREMUL_KEPT:
            _PREMUL_FACTORS.popitem(last=False)
        return op

    return make


def _wrap_reduction_call(function):
    signature = inspect.signature(function)

    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            op = signature.bind_partial(*args, **kwargs).arguments.get("op")
        except TypeError:
            op = None
        entry = _PREMUL_FACTORS.get(id(op)) if op is not None else None
        if entry is None or entry[0] is not op:
            return function(*args, **kwargs)
        _CALL_FACTOR.value = entry[1]
        try:
            return function(*args, **kwargs)
        finally:
            _CALL_FACTOR.value = None

    call.__wrapped_by_lockstep__ = True
    return call


def _install_premul_wrappers():
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    for module in (c10d, dist):
        if module is None:
            continue
        maker = getattr(module, "_make_nccl_premul_sum", None)
        if maker is not None and not getattr(maker, "__wrapped_by_lockstep__", False):
            wrapped = _wrap_premul_maker(maker)
            wrapped.__wrapped_by_lockstep__ = True
            setattr(module, "_make_nccl_premul_sum", wrapped)
        for name in ("all_reduce", "reduce", "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base"):
            function = getattr(module, name, None)
            if function is not None and not getattr(function, "__wrapped_by_lockstep__", False):
                setattr(module, name, _wrap_reduction_call(function))


_install_premul_wrappers()


# ------------------------------------------------------------------------------------------------ tensors

_DTYPES = {
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.complex64,
    torch.complex128,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
} | {
    getattr(torch, name) for name in ("uint16", "uint32", "uint64") if hasattr(torch, name)
}  # torch 2.3 and later


def _check_layout(tensor, call):
    """Sparse and other non-strided tensors are refused before any collective (DLPack cannot carry them)."""
    if tensor.layout != torch.strided:
        raise lockstep.UnsupportedError(
            f"lockstep backend: {call} on a tensor of layout {tensor.layout}: lockstep carries dense (strided) tensors "
            f"only; call .to_dense() first (for a sparse gradient, allreduce its dense form, or all_gather its "
            f"indices and values)"
        )


def _check_dtype(tensor, call):
    _check_layout(tensor, call)
    if tensor.dtype not in _DTYPES:
        raise lockstep.DTypeError(
            f"lockstep backend: {call} on a {tensor.dtype} tensor: lockstep carries float32, float64, float16, "
            f"bfloat16, complex64, complex128, int8, uint8, int16, uint16, int32, uint32, int64, uint64 and bool; "
            f"cast it to one of them"
        )


def _dl(tensor):
    """The DLPack capsule lockstep reads and writes `tensor` through (contiguous; bool as its uint8 view, since torch
    exports no DLPack bool)."""
    if tensor.dtype == torch.bool:
        tensor = tensor.view(torch.uint8)
    return torch.utils.dlpack.to_dlpack(tensor)


def _contiguous(tensor):
    return tensor if tensor.is_contiguous() else tensor.contiguous()


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
        _check_layout(tensor, call)
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


def _seconds(timeout):
    """A Work.wait timeout in seconds, or None for none: a timedelta (torch's Python and C++ callers), a number of
    seconds, None; zero is torch's kNoTimeout."""
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else float(timeout)
    return None if seconds <= 0 else seconds


class _Work(_c10d.Work):
    """The work of one backend call: lockstep requests issued with async_op=True, what torch gets once they completed
    (a list of tensors, as gloo's futures hold), and what must happen first (copies back from contiguous or stacked
    buffers).

    Whoever sees the requests complete first finishes the work: a thread in wait(), or the process's completer thread
    (for callers that only look at get_future(), as DDP's communication hooks do). Then the future holds the result,
    or the operation's lockstep error, which wait() raises.

    A Python Work returned to C++ (DDP's Reducer, _broadcast_coalesced) stays reachable from C++ only while its Python
    object lives, and pybind11 lets that object go as soon as the Python method returns. So every _Work keeps itself
    alive (_LIVE) until it finished and somebody waited for it or took its future; works that nobody ever looks at are
    let go after the newest _UNSEEN_KEPT."""

    def __init__(self, requests, result, finish=None, source=False, completer=True):
        super().__init__()
        self._requests = list(requests)
        self._result = result
        self._finish = finish
        self._source = -1
        self._wants_source = source
        self._future = torch.futures.Future()
        self._lock = threading.Lock()
        self._claimed = False
        self._done = threading.Event()
        self._error = None
        self._seen = False
        _LIVE.add(self)
        if not self._requests:
            self._complete()
        elif completer:
            _COMPLETER.add(self)

    # ---- completion

    def _ready(self):
        return all(request.is_completed() for request in self._requests)

    def _block(self, seconds):
        """Waits up to `seconds` for the first request not yet completed (the GIL released), without raising."""
        for request in self._requests:
            if not request.is_completed():
                try:
                    request.wait(seconds)
                except Exception:  # noqa: BLE001 - the error is raised by _complete, to whoever waits
                    pass
                return

    def _complete(self):
        """Finishes the work once its requests completed: the first caller runs the copies and sets the future."""
        with self._lock:
            if self._claimed:
                return
            self._claimed = True
        first_error = None
        for request in self._requests:  # every request, so none is dropped before it completed
            try:
                request.wait()
            except BaseException as error:  # noqa: BLE001 - handed to the future and to wait()
                first_error = first_error or error
        try:
            if first_error is not None:
                raise first_error
            if self._wants_source:
                self._source = self._requests[0].source
            if self._finish is not None:
                self._finish()
        except BaseException as error:  # noqa: BLE001 - handed to the future and to wait()
            self._error = error
            self._requests = []
            self._done.set()
            self._future.set_exception(error)
        else:
            self._requests = []
            self._done.set()
            self._future.set_result(self._result)
        self._release()

    def _release(self):
        """Once finished, a work is kept for C++ no more: let go at once when somebody waited for it or took its future,
        else kept among the newest unseen ones."""
        if not self._done.is_set() or self not in _LIVE:
            return
        _LIVE.discard(self)
        if not self._seen:
            _UNSEEN.append(self)

    # ---- torch's Work

    def wait(self, timeout=None):
        """Blocks until the call completed; raises its error (a lockstep.Error), or lockstep.TimeoutError when
        `timeout` (a timedelta or seconds; 0 or None: no limit) ran out first."""
        self._seen = True
        return self._wait(timeout)

    def _wait(self, timeout=None):
        """wait(), without counting as the caller's: a blocking group's own wait, before the work reaches its caller
        (C++ may still call wait() through the trampoline, which needs this object alive)."""
        seconds = _seconds(timeout)
        if not self._done.is_set():
            deadline = None if seconds is None else time.monotonic() + seconds
            for request in list(self._requests):
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    finished = request.wait(left)
                except Exception:  # noqa: BLE001 - completed with an error: raised below, as the future holds it
                    finished = True
                if not finished:
                    raise lockstep.TimeoutError(
                        f"lockstep backend: Work.wait: {request!r} did not complete within {seconds:g} s"
                    )
            self._complete()
            self._done.wait()
        self._release()
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self):
        if not self._done.is_set() and not self._claimed and self._requests and self._ready():
            self._complete()
        return self._done.is_set()

    def is_success(self):
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error if self.is_completed() else None

    def synchronize(self):
        pass

    def result(self):
        self.wait()
        return self._result

    def get_future(self):
        self._seen = True
        self._release()
        return self._future

    def source_rank(self):
        self.wait()
        return self._source

    def _source_rank(self):
        return self.source_rank()


_LIVE = set()
_UNSEEN = collections.deque(maxlen=1024)  # finished works nobody waited for nor took the future of, newest last


class _Completer:
    """One daemon thread per process that finishes works nobody waits for: it waits (the GIL released) on the oldest
    pending work's requests, up to 1 ms at a time, and finishes every work whose requests completed. Collectives of a
    communicator complete in issue order; sends and receives in any order, so it looks at all of them each time."""

    def __init__(self):
        self._condition = threading.Condition()
        self._pending = []
        self._thread = None

    def add(self, work):
        with self._condition:
            self._pending.append(work)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lockstep.torch completer", daemon=True)
                self._thread.start()
            self._condition.notify()

    def _run(self):
        while True:
            with self._condition:
                while not self._pending:
                    self._condition.wait()
                works = list(self._pending)
            finished = []
            for work in works:
                try:
                    if work._claimed or work._ready():
                        work._complete()
                        finished.append(work)
                except Exception:  # noqa: BLE001 - a request the library no longer knows (after finalize)
                    work._complete()
                    finished.append(work)
            if finished:
                with self._condition:
                    self._pending = [work for work in self._pending if not work._done.is_set()]
            else:
                works[0]._block(0.001)


_COMPLETER = _Completer()


def _copy_back(work, tensor):
    """What finishes a call made on `work`, a contiguous copy of `tensor` (nothing when it is `tensor` itself)."""
    if work is tensor:
        return None
    return lambda: tensor.copy_(work)


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

    Every method issues lockstep's non-blocking form of its call (the communicator's progress thread runs it) and
    returns a pending Work at once: wait() blocks until it completed and raises its error, get_future() completes when
    it completes. The call forms are those of torch's ProcessGroup bindings (a list and an options object, or the
    older tensor/root/op forms)."""

    def __init__(self, comm, rank, size):
        super().__init__(rank, size)
        self.comm = comm
        # True: every call waits for its operation, in the calling thread, before it returns. The default where the
        # communicator has no progress thread (its operations then run inside wait on the calling thread, and the
        # completer thread must not run them: MPI may allow the main thread only); settable, for comparisons.
        self.blocking = not comm.progress_thread

    def _work(self, requests, result, finish=None, source=False):
        work = _Work(requests, result, finish, source, completer=not self.blocking)
        if self.blocking:
            work._wait()
        return work

    def getBackendName(self):
        return BACKEND

    def __repr__(self):
        return f"ProcessGroupLockstep(rank={self.rank()}, size={self.size()}, comm={self.comm!r})"

    # ---------------------------------------------------------------------------------------- reductions

    @_joined("allreduce")
    def allreduce(self, tensors, opts=None):
        tensor = _single(tensors, "allreduce")
        _check_dtype(tensor, "allreduce")
        reduction = _reduction(opts, tensor, "allreduce")
        work = _contiguous(tensor)
        request = self.comm.allreduce(_dl(work), tag="torch allreduce", async_op=True, **reduction)
        return self._work([request], [tensor], _copy_back(work, tensor))

    @_joined("allreduce")
    def allreduce_coalesced(self, tensors, opts=None):
        """One allreduce over the tensors laid end to end (as gloo does): they share one dtype."""
        if not tensors:
            return self._work([], [])
        first = tensors[0]
        _check_dtype(first, "allreduce_coalesced")
        for tensor in tensors:
            if tensor.dtype != first.dtype:
                raise lockstep.DTypeError(
                    "lockstep backend: allreduce_coalesced needs tensors of one dtype, got "
                    f"{first.dtype} and {tensor.dtype}"
                )
        reduction = _reduction(opts, first, "allreduce_coalesced")
        flat = torch.cat([tensor.reshape(-1) for tensor in tensors])
        request = self.comm.allreduce(_dl(flat), tag="torch allreduce_coalesced", async_op=True, **reduction)

        def finish():
            offset = 0
            for tensor in tensors:
                tensor.copy_(flat[offset : offset + tensor.numel()].view(tensor.shape))
                offset += tensor.numel()

        return self._work([request], list(tensors), finish)

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
        reduction = _reduction(reduce_op, tensor, "reduce")
        work = _contiguous(tensor)
        request = self.comm.reduce(_dl(work), root=root, tag="torch reduce", async_op=True, **reduction)
        return self._work([request], [tensor], _copy_back(work, tensor))

    def _reduce_scatter_rows(self, output, stacked, opts, call):
        reduction = _reduction(opts, output, call)
        rows = _rows(output)
        work = _contiguous(rows)
        request = self.comm.reduce_scatter(_dl(stacked), out=_dl(work), tag=f"torch {call}", async_op=True, **reduction)
        return self._work([request], [output], _copy_back(work, rows))

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
        rows = _rows(output)
        stacked = torch.stack([tensor.reshape(rows.shape) for tensor in inputs]).view(_stacked_shape(rows, self.size()))
        return self._reduce_scatter_rows(output, stacked, op, "reduce_scatter")

    @_joined("reduce_scatter")
    def _reduce_scatter_base(self, output, input, opts=None):
        _check_dtype(output, "_reduce_scatter_base")
        if input.dtype != output.dtype or input.numel() != self.size() * output.numel():
            raise lockstep.ShapeError(
                f"lockstep backend: reduce_scatter_tensor: the input ({input.dtype}, {input.numel()} elements) must be "
                f"the group's size ({self.size()}) times the output ({output.dtype}, {output.numel()} elements)"
            )
        stacked = _contiguous(input).view(_stacked_shape(_rows(output), self.size()))
        return self._reduce_scatter_rows(output, stacked, opts, "reduce_scatter_tensor")

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
        work = _contiguous(tensor)
        request = self.comm.broadcast(_dl(work), root=root, tag="torch broadcast", async_op=True)
        return self._work([request], [tensor], _copy_back(work, tensor))

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
        request = self.comm.gather(
            _dl(rows), root=root, out=None if stacked is None else _dl(stacked), tag="torch gather", async_op=True
        )
        finish = None if stacked is None else lambda: _unstack(stacked, rows, outputs)
        return self._work([request], [outputs] if outputs else [], finish)

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
        work = _contiguous(rows)
        request = self.comm.scatter(
            None if stacked is None else _dl(stacked), _dl(work), root=root, tag="torch scatter", async_op=True
        )
        return self._work([request], [output], _copy_back(work, rows))

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
        request = self.comm.allgather(_dl(rows), out=_dl(stacked), tag="torch allgather", async_op=True)
        return self._work([request], [outputs], lambda: _unstack(stacked, rows, outputs))

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
        request = self.comm.allgather(
            _dl(rows),
            out=_dl(work.view(_stacked_shape(rows, self.size()))),
            tag="torch all_gather_into_tensor",
            async_op=True,
        )
        return self._work([request], [output], _copy_back(work, output))

    @_joined("allgather")
    def allgather_coalesced(self, output_lists, input_list, opts=None):
        """One allgather of the inputs laid end to end; output_lists[r][j] gets rank r's input_list[j]."""
        _count(output_lists, self.size(), "allgather_coalesced")
        if not input_list:
            return self._work([], output_lists)
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
        request = self.comm.allgather(_dl(flat), out=_dl(gathered), tag="torch allgather_coalesced", async_op=True)

        def finish():
            for outputs, block in zip(output_lists, gathered.view(self.size(), flat.numel())):
                offset = 0
                for output in outputs:
                    output.copy_(block[offset : offset + output.numel()].view(output.shape))
                    offset += output.numel()

        return self._work([request], output_lists, finish)

    @_joined("alltoall")
    def alltoall(self, output_tensors, input_tensors, opts=None):
        """Tensor j of this rank's input list to rank j, laid end to end: one alltoallv of their element counts."""
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
        request = self._alltoallv(
            flat_out, flat_in, [t.numel() for t in output_tensors], [t.numel() for t in input_tensors], "alltoall"
        )

        def finish():
            offset = 0
            for output in output_tensors:
                output.copy_(flat_out[offset : offset + output.numel()].view(output.shape))
                offset += output.numel()

        return self._work([request], list(output_tensors), finish)

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
        row = 1
        for extent in out_rows.shape[1:]:
            row *= extent
        work = _contiguous(out_rows)
        request = self._alltoallv(
            work.reshape(-1),
            _contiguous(in_rows).reshape(-1),
            [rows * row for rows in out_splits],
            [rows * row for rows in in_splits],
            "all_to_all_single",
        )
        return self._work([request], [output], _copy_back(work, out_rows))

    def _even_splits(self, rows, what):
        if rows.shape[0] % self.size():
            raise lockstep.ShapeError(
                f"lockstep backend: all_to_all_single without split sizes: the {what}'s first "
                f"dimension ({rows.shape[0]}) is not a multiple of the group's size "
                f"({self.size()})"
            )
        return [rows.shape[0] // self.size()] * self.size()

    def _alltoallv(self, output, input, out_counts, in_counts, call):
        """Elements in_counts[j] of the flat `input` to rank j; from rank i into the flat `output` at out_counts[i]:
        lockstep's alltoallv, one call, no padding."""
        return self.comm.alltoallv(
            _dl(input), in_counts, out_counts, out=_dl(output), tag=f"torch {call}", async_op=True
        )

    # ---------------------------------------------------------------------------------------- point to point

    def send(self, tensors, dstRank, tag=0):
        tensor = _single(tensors, "send")
        _check_dtype(tensor, "send")
        request = self.comm.send(_dl(_contiguous(tensor)), dstRank, tag=tag, name="torch send", async_op=True)
        return self._work([request], [tensor])

    def recv(self, tensors, srcRank, tag=0):
        return self._recv(tensors, srcRank, tag)

    def recv_anysource(self, tensors, tag=0):
        # torch.distributed.recv asks this Work for the sender (work._source_rank()).
        return self._recv(tensors, lockstep._lockstep.ANY_SOURCE, tag)

    def _recv(self, tensors, source, tag):
        tensor = _single(tensors, "recv")
        _check_dtype(tensor, "recv")
        work = _contiguous(tensor)
        request = self.comm.recv(_dl(work), source=source, tag=tag, name="torch recv", async_op=True)
        return self._work([request], [tensor], _copy_back(work, tensor), source=True)

    # batch_isend_irecv brackets its sends and receives with these (torch 1.13); they are posted at once anyway.
    def _start_coalescing(self, *args):
        pass

    def _end_coalescing(self, *args):
        return self._work([], [])

    # ---------------------------------------------------------------------------------------- barrier

    @_joined("barrier")
    def barrier(self, opts=None):
        return self._work([self.comm.barrier(tag="torch barrier", async_op=True)], [])


def _unstack(stacked, rows, outputs):
    """Copies block r of `stacked` (count blocks of `rows`' shape) into outputs[r]."""
    for output, block in zip(outputs, stacked.view((len(outputs),) + tuple(rows.shape))):
        output.copy_(block.view(output.shape))


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


def _group_timeout(timeout):
    """The watchdog timeout (seconds) of a group's communicator: the group's own timeout when the program gave one,
    else lockstep's setting (None: LOCKSTEP_TIMEOUT, config `timeout`, 600 s by default). torch passes its default
    (30 minutes) when the program gave none, and that default is not taken as the program's choice."""
    if timeout is None or timeout == getattr(dist, "default_pg_timeout", None):
        return None
    return max(timeout.total_seconds(), 0.001)


def _create_process_group(store, rank, size, timeout):
    """The creator torch calls (backend "lockstep") on each member of a new group."""
    lockstep.init()
    ranks = _world_ranks(store, rank, size)
    world = lockstep.Communicator.world()
    options = {}
    seconds = _group_timeout(timeout)
    if seconds is not None:
        options["timeout"] = seconds
    # Each group its own communicator (a duplicate of the world for a group of every rank): its calls never pair up
    # with those of another group or of lockstep.Communicator.world(), and its debug switch is its own.
    if ranks == list(range(world.size)):
        comm = world.dup(**options)
    else:
        comm = world.create_group(ranks, _group_tag(ranks), **options)
    return ProcessGroupLockstep(comm, rank, size)


def _register():
    plugins = getattr(dist.Backend, "_plugins", {})
    if BACKEND.upper() in plugins or hasattr(dist.Backend, BACKEND.upper()):
        return
    keywords = {}
    # torch 2.x asks which devices a backend serves (a feature check, not a version test).
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        keywords["devices"] = ["cpu", "cuda"]
    dist.Backend.register_backend(BACKEND, _create_process_group, **keywords)


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


# -------------------------------------------------------------------------------------------- env:// without variables

_RENDEZVOUS = sys.modules.get("torch.distributed.rendezvous")
_TORCH_ENV_HANDLER = getattr(_RENDEZVOUS, "_rendezvous_handlers", {}).get("env")


def _given(url, name, variable):
    """Whether the rendezvous URL's query (torch puts rank= and world_size= there) or the environment gives `name`."""
    query = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
    return name in query or bool(os.environ.get(variable))


def _env_rendezvous(url, timeout=None, **kwargs):
    """torch's env:// rendezvous, or, when neither the environment nor the call gives a rank and a world size (a job
    started by mpirun or srun with nothing set), lockstep's: rank and size are MPI's, and rank 0's store address is
    broadcast through lockstep. So plain dist.init_process_group("lockstep") (or "gloo") works under mpirun, srun and
    `lockstep launch`; a job that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun, `lockstep launch`)
    keeps torch's own rendezvous."""
    has_rank = _given(url, "rank", "RANK")
    has_size = _given(url, "world_size", "WORLD_SIZE")
    if has_rank or has_size:
        yield from _TORCH_ENV_HANDLER(url, **({} if timeout is None else {"timeout": timeout}), **kwargs)
        return
    timeout = _timedelta(timeout)
    lockstep.init()
    world = lockstep.Communicator.world()
    yield (_rendezvous_store(world, timeout), world.rank, world.size)
    raise lockstep.InvalidUsageError("lockstep backend: env:// cannot rendezvous again (torch asked for a new one)")


if _TORCH_ENV_HANDLER is not None:  # feature check: torch's table of rendezvous handlers by URL scheme
    _RENDEZVOUS._rendezvous_handlers["env"] = _env_rendezvous

# The checking backends "lockstep_gloo" and "lockstep_nccl" (gloo or NCCL carries the calls; lockstep checks and
# watches them), registered with this module.
from lockstep.torch_checked import GLOO_BACKEND, NCCL_BACKEND, ProcessGroupChecked  # noqa: E402
