"""lockstep.torch's checking backends: torch's own gloo (or NCCL) carries every collective, and lockstep checks and
watches each one.

    import lockstep.torch, torch.distributed as dist
    dist.init_process_group("lockstep_gloo")      # or "lockstep_nccl"; under mpirun, srun or lockstep launch
    dist.all_reduce(x)                             # gloo moves the data; lockstep checks the call and watches it

Before each collective is handed to the wrapped process group, lockstep numbers it on a communicator of its own for
the group (Communicator.begin_foreign): in debug mode (LOCKSTEP_DEBUG_MODE=1, lockstep.init(debug=True), or
`group.debug = True` on every rank) every rank's signature of the call (collective, dtype, shape, device, root,
reduce op, the caller's Python file:line) is exchanged over MPI and compared, and a mismatch raises the same
lockstep.SignatureMismatchError on every rank before gloo sees the call. The call stays on lockstep's watchdog board
from its issue until the wrapped Work completes: a call that outlives lockstep's timeout (LOCKSTEP_TIMEOUT, or the
group's timeout) becomes lockstep's hang report (which ranks never arrived, each rank's Python line) and the job ends,
instead of a silent wait in gloo. The Work returned is the wrapped backend's own, so DDP, futures and communication
hooks see gloo's (or NCCL's) behaviour unchanged. Sends and receives are passed through unchecked and unwatched.

The names are "lockstep_gloo" and "lockstep_nccl", not "lockstep:gloo": torch 2.x reads a backend string with a colon
as "device:backend" pairs (BackendConfig: "cpu:gloo,cuda:nccl"), so "lockstep:gloo" would be taken for the device
"lockstep". torch lowercases backend names and accepts letters, digits and underscores in a plugin's name on 1.13 and
2.x alike.

How a call ends on the board: the Works of a group are kept, oldest first, and those found completed are ended
(Communicator.end_foreign) when the group issues its next call and, for a program that stops issuing calls, by one
daemon thread that looks every WATCH_PERIOD seconds. Nothing runs on gloo's own threads, and a completed call leaves
the board at most WATCH_PERIOD later, far below any watchdog timeout.
"""
import atexit
import inspect
import threading
import time
import weakref

import torch
import torch.distributed as dist

import lockstep

from torch._C import _distributed_c10d as _c10d  # noqa: E402 (lockstep.torch checked its availability)

__all__ = ["GLOO_BACKEND", "NCCL_BACKEND", "ProcessGroupChecked"]

GLOO_BACKEND = "lockstep_gloo"
NCCL_BACKEND = "lockstep_nccl"
WATCH_PERIOD = 0.02  # seconds between the completion thread's looks at outstanding Works

# The C interface's frozen values (lockstep.h): collectives, dtypes (None: a dtype lockstep does not know, compared as
# none) and reduce ops.
_BARRIER, _BROADCAST, _REDUCE, _ALLREDUCE, _GATHER, _ALLGATHER, _SCATTER, _REDUCE_SCATTER, _ALLTOALL = range(9)
_ALLTOALLV = 10
_DTYPES = {
    torch.float32: 0,
    torch.float64: 1,
    torch.float16: 2,
    torch.bfloat16: 3,
    torch.int8: 4,
    torch.uint8: 5,
    torch.int32: 6,
    torch.int64: 7,
    torch.bool: 8,
    torch.int16: 9,
    torch.complex64: 13,
    torch.complex128: 14,
}
for _name, _code in (("uint16", 10), ("uint32", 11), ("uint64", 12)):  # torch 2.3 and later
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = _code
_REDUCE_NAMES = {"SUM": 0, "PRODUCT": 1, "MAX": 2, "MIN": 3, "AVG": 4, "BAND": 5, "BOR": 6, "BXOR": 7, "PREMUL_SUM": 8}
# By the value of torch's RedOpType (a ReduceOp holds one as .op): an int, so one cheap lookup per call (hashing the
# enum member itself costs microseconds).
_RED_OP_TYPE = getattr(dist.ReduceOp, "RedOpType", None)
_REDUCE_CODES = {
    getattr(_RED_OP_TYPE, name).value: code for name, code in _REDUCE_NAMES.items() if hasattr(_RED_OP_TYPE, name)
}


def _reduce_code(opts):
    """The C code of the reduce op of an options object, a ReduceOp or a RedOpType (None: SUM, torch's default)."""
    if opts is None:
        return 0
    op = getattr(opts, "reduceOp", opts)
    op = getattr(op, "op", op)
    code = _REDUCE_CODES.get(getattr(op, "value", None)) if _RED_OP_TYPE is not None else None
    if code is None:
        code = _REDUCE_NAMES.get(getattr(op, "name", str(op).rsplit(".", 1)[-1]), -1)
    return code


def _root(opts):
    """The root of an options object or the older int argument (None: 0, torch's default)."""
    if opts is None:
        return 0
    if isinstance(opts, int):
        return opts
    return opts.rootRank


def _first(tensors):
    """The tensor a call's signature describes: the tensor itself, or the first of a list (one per device)."""
    if isinstance(tensors, torch.Tensor):
        return tensors
    return tensors[0] if len(tensors) else None


def _tensor_signature(tensor, root=-1, op=-1, varying_dim=None):
    """(dtype, shape, device, root, op, varying_dim) of a call on `tensor` (None: none, as a barrier)."""
    if tensor is None:
        return None, (), 0, root, op, varying_dim
    return _DTYPES.get(tensor.dtype), tensor.shape, 1 if tensor.is_cuda else 0, root, op, varying_dim


def _flat_signature(tensors, op=-1, varying_dim=None):
    """A call on tensors laid end to end (the coalesced collectives, all_to_all of lists): their total size."""
    first = _first(tensors)
    if first is None:
        return _tensor_signature(None, -1, op, varying_dim)
    total = sum(t.numel() for t in tensors)
    return _DTYPES.get(first.dtype), (total,), 1 if first.is_cuda else 0, -1, op, varying_dim


# What each collective's signature describes, from its arguments in any of torch's call forms.
def _describe_allreduce(tensors, opts=None):
    return _tensor_signature(_first(tensors), -1, _reduce_code(opts))


def _describe_allreduce_coalesced(tensors, opts=None):
    return _flat_signature(tensors, _reduce_code(opts))


def _describe_reduce(tensors, opts=None, op=None):
    if isinstance(tensors, torch.Tensor):  # reduce(tensor, root, op)
        return _tensor_signature(tensors, _root(opts), _reduce_code(op))
    return _tensor_signature(_first(tensors), _root(opts), _reduce_code(opts))


def _describe_broadcast(tensors, opts=None):
    return _tensor_signature(_first(tensors), _root(opts))


def _describe_allgather(outputs, inputs, opts=None):
    return _tensor_signature(_first(inputs))


def _describe_allgather_base(output, input, opts=None):
    return _tensor_signature(input)


def _describe_allgather_coalesced(outputs, inputs, opts=None):
    return _flat_signature(inputs)


def _describe_gather(outputs, inputs, opts=None):
    return _tensor_signature(_first(inputs), _root(opts))


def _describe_scatter(outputs, inputs, opts=None):
    return _tensor_signature(_first(outputs), _root(opts))


def _describe_reduce_scatter(outputs, inputs, opts=None):
    return _tensor_signature(_first(outputs), -1, _reduce_code(opts))


def _describe_reduce_scatter_base(output, input, opts=None):
    return _tensor_signature(output, -1, _reduce_code(opts))


def _describe_alltoall_base(output, input, output_split_sizes, input_split_sizes, opts=None):
    # Uneven splits: the first dimension may differ between ranks, the others must agree.
    return _tensor_signature(input, varying_dim=0 if (output_split_sizes or input_split_sizes) else None)


def _describe_alltoall(outputs, inputs, opts=None):
    return _flat_signature(inputs, varying_dim=0)


def _describe_barrier(opts=None):
    return _tensor_signature(None)


def _describe_monitored_barrier(*args, **kwargs):
    return _tensor_signature(None)


def _checked(name, kind, describe):
    """A method that hands the call to the wrapped process group after lockstep's check (begin_foreign), and watches
    its Work until it completes. `name` is torch's name of the method, `kind` the C code of the collective."""
    tag = f"torch {name}"

    def call(self, *args, **kwargs):
        self._sweep()
        try:
            dtype, shape, device, root, op, varying_dim = describe(*args, **kwargs)
        except Exception as error:
            # This rank cannot describe its call (arguments of a form torch does not pass): the other ranks may be
            # in its signature exchange already, so it joins the call as rejected before it raises.
            if not self.comm.freed and not lockstep._lockstep.is_finalized():
                self.comm._reject(_KIND_NAMES[kind], -1, f"{self.backend}: {name}: {type(error).__name__}: {error}")
            raise
        number = self._begin(kind, dtype, shape, root, op, device=device, varying_dim=varying_dim, tag=tag)
        try:
            work = getattr(self.wrapped, name)(*args, **kwargs)
        except BaseException:
            self.comm.end_foreign(number)  # the wrapped backend refused the call: it never started
            raise
        self._pending.append((work, number))
        return work

    call.__name__ = name
    call.__doc__ = f"The wrapped process group's {name}, checked and watched by lockstep."
    return call


_KIND_NAMES = {
    _BARRIER: "barrier",
    _BROADCAST: "broadcast",
    _REDUCE: "reduce",
    _ALLREDUCE: "allreduce",
    _GATHER: "gather",
    _ALLGATHER: "allgather",
    _SCATTER: "scatter",
    _REDUCE_SCATTER: "reduce_scatter",
    _ALLTOALL: "alltoall",
    _ALLTOALLV: "alltoallv",
}


class ProcessGroupChecked(_c10d.ProcessGroup):
    """A torch.distributed process group whose collectives another process group carries (`wrapped`: gloo or NCCL),
    each checked (in debug mode) and watched by lockstep on `comm`, a lockstep Communicator over the same processes in
    the same order. Made by the backends "lockstep_gloo" and "lockstep_nccl"."""

    def __init__(self, wrapped, comm, rank, size, backend):
        super().__init__(rank, size)
        self.wrapped = wrapped
        self.comm = comm
        self.backend = backend
        self._begin = comm.begin_foreign  # the per-call path: one bound method, looked up once
        self._end = comm.end_foreign
        self._pending = []  # (Work, call number), oldest first
        self._lock = threading.Lock()
        _WATCHER.add(self)

    @property
    def debug(self):
        """Debug mode of this group's checks (settable; set the same value on every rank at the same point)."""
        return self.comm.debug

    @debug.setter
    def debug(self, on):
        self.comm.debug = on

    def _sweep(self):
        """Ends, oldest first, the calls whose Works completed (on the board, the oldest outstanding call stays)."""
        pending = self._pending
        if not pending:
            return
        with self._lock:
            done = 0
            for work, number in pending:
                if not work.is_completed():
                    break
                self._end(number)
                done += 1
            if done:
                del pending[:done]

    def getBackendName(self):
        """The backend's name, "lockstep_gloo" or "lockstep_nccl" (what torch's _get_backend_name reports)."""
        return self.backend

    def __repr__(self):
        return f"ProcessGroupChecked({self.backend}, rank={self.rank()}, size={self.size()}, comm={self.comm!r})"

    allreduce = _checked("allreduce", _ALLREDUCE, _describe_allreduce)
    allreduce_coalesced = _checked("allreduce_coalesced", _ALLREDUCE, _describe_allreduce_coalesced)
    reduce = _checked("reduce", _REDUCE, _describe_reduce)
    broadcast = _checked("broadcast", _BROADCAST, _describe_broadcast)
    allgather = _checked("allgather", _ALLGATHER, _describe_allgather)
    _allgather_base = _checked("_allgather_base", _ALLGATHER, _describe_allgather_base)
    allgather_coalesced = _checked("allgather_coalesced", _ALLGATHER, _describe_allgather_coalesced)
    gather = _checked("gather", _GATHER, _describe_gather)
    scatter = _checked("scatter", _SCATTER, _describe_scatter)
    reduce_scatter = _checked("reduce_scatter", _REDUCE_SCATTER, _describe_reduce_scatter)
    _reduce_scatter_base = _checked("_reduce_scatter_base", _REDUCE_SCATTER, _describe_reduce_scatter_base)
    alltoall_base = _checked("alltoall_base", _ALLTOALLV, _describe_alltoall_base)
    alltoall = _checked("alltoall", _ALLTOALLV, _describe_alltoall)
    barrier = _checked("barrier", _BARRIER, _describe_barrier)
    monitored_barrier = _checked("monitored_barrier", _BARRIER, _describe_monitored_barrier)

    # Point to point: the wrapped backend's, neither checked nor watched.
    def send(self, *args, **kwargs):
        return self.wrapped.send(*args, **kwargs)

    def recv(self, *args, **kwargs):
        return self.wrapped.recv(*args, **kwargs)

    def recv_anysource(self, *args, **kwargs):
        return self.wrapped.recv_anysource(*args, **kwargs)

    def _start_coalescing(self, *args, **kwargs):
        return self.wrapped._start_coalescing(*args, **kwargs)

    def _end_coalescing(self, *args, **kwargs):
        return self.wrapped._end_coalescing(*args, **kwargs)


class _Watcher:
    """One daemon thread that ends the completed calls of groups whose program stopped issuing calls."""

    def __init__(self):
        self._groups = weakref.WeakSet()
        self._thread = None
        self._lock = threading.Lock()

    def add(self, group):
        with self._lock:
            self._groups.add(group)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lockstep.torch watcher", daemon=True)
                self._thread.start()

    def _run(self):
        while True:
            time.sleep(WATCH_PERIOD)
            for group in list(self._groups):
                if not group._pending:
                    continue
                try:
                    group._sweep()
                except lockstep.Error:  # the communicator is gone (finalised): nothing left to watch
                    group._pending.clear()


_WATCHER = _Watcher()


@atexit.register
def _sweep_all():
    """At exit, before lockstep finalises (atexit runs its handlers in reverse order of registration): the calls that
    completed leave the board, so that a report that names this process says which call it completed last."""
    for group in list(_WATCHER._groups):
        try:
            group._sweep()
        except lockstep.Error:
            pass


def _creator(backend, carrier, make_wrapped):
    """The creator torch calls (backend `backend`) on each member of a new group: a lockstep communicator over the
    group's processes (lockstep.torch's), and the carrier's process group over a store of its own."""
    from lockstep import torch as lockstep_torch  # the rendezvous of group members is lockstep.torch's

    def create(store, rank, size, timeout):
        lockstep.init()
        ranks = lockstep_torch._world_ranks(store, rank, size)
        world = lockstep.Communicator.world()
        options = {"on_timeout": "end"}  # a stuck carrier's call cannot be failed from outside: the job ends
        seconds = lockstep_torch._group_timeout(timeout)
        if seconds is not None:
            options["timeout"] = seconds
        if ranks == list(range(world.size)):
            comm = world.dup(**options)
        else:
            comm = world.create_group(ranks, lockstep_torch._group_tag(ranks), **options)
        comm.set_carrier(f"{carrier} (torch backend {backend})")
        wrapped = make_wrapped(_c10d.PrefixStore(carrier, store), rank, size, timeout)
        return ProcessGroupChecked(wrapped, comm, rank, size, backend)

    return create


def _gloo(store, rank, size, timeout):
    return _c10d.ProcessGroupGloo(store, rank, size, timeout)


def _nccl(store, rank, size, timeout):
    nccl = getattr(_c10d, "ProcessGroupNCCL", None)
    if nccl is None or not dist.is_nccl_available():
        raise lockstep.UnsupportedError(
            f"{NCCL_BACKEND}: this torch ({torch.__version__}) was built without NCCL; use {GLOO_BACKEND}"
        )
    return nccl(store, rank, size, timeout)


def _register(backend, creator, devices):
    if backend.upper() in getattr(dist.Backend, "_plugins", {}) or hasattr(dist.Backend, backend.upper()):
        return
    keywords = {}
    # torch 2.x asks which devices a backend serves (a feature check, not a version test).
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        keywords["devices"] = devices
    dist.Backend.register_backend(backend, creator, **keywords)


_register(GLOO_BACKEND, _creator(GLOO_BACKEND, "gloo", _gloo), ["cpu", "cuda"])
_register(NCCL_BACKEND, _creator(NCCL_BACKEND, "nccl", _nccl), ["cuda"])
