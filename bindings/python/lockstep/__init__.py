"""lockstep: an MPI-native distributed runtime, from Python.

The package is a thin layer over the extension module `lockstep._lockstep`, which binds lockstep's stable C interface
(lockstep.h, liblockstep_c.so.1). Collectives work in place on the caller's memory: numpy arrays and other
buffer-protocol objects are wrapped without a copy, DLPack producers (torch, cupy, jax, numpy) are imported without one.

    import numpy as np, lockstep
    comm = lockstep.Communicator.world()
    x = np.ones(4, dtype=np.float32)
    comm.allreduce(x)          # x now holds the sum over every rank
    request = comm.allreduce(x, async_op=True)   # returns at once: a lockstep.Request
    request.wait()             # x now holds the sum again

Every collective and send/recv takes async_op=True and then returns a lockstep.Request (wait, test, is_completed,
result, source); errors of the operation are raised at its wait or test. The objects given to the call must be neither
written (inputs) nor read (outputs) before it completed.

Every status code of the C interface is one exception class below, a subclass of lockstep.Error (a RuntimeError) with
`.status` and `.name`; its message is the library's full text (lockstep_last_error()).

MPI: lockstep initialises MPI on first use unless something (mpi4py, the program) already did, in which case it adopts
that MPI and leaves finalising it to its owner. When lockstep owns MPI, it finalises it at interpreter exit; mpi4py
imported later sees MPI initialised and leaves it alone. `Communicator.from_mpi4py(comm)` runs lockstep on any mpi4py
communicator.
"""
import atexit as _atexit
import builtins as _builtins
import functools as _functools
import gc as _gc
import os as _os
import sys as _sys

from . import _lockstep
from ._lockstep import Communicator, Request, RequestWarning, Tensor

__all__ = [
    "__version__",
    "version",
    "build_info",
    "init",
    "finalize",
    "is_initialized",
    "owns_mpi",
    "rank",
    "size",
    "local_rank",
    "local_size",
    "Tensor",
    "empty",
    "from_dlpack",
    "as_tensor",
    "Communicator",
    "Request",
    "RequestWarning",
    "set_trigger",
    "check_trigger",
    "find_executable_batch_size",
    "free_memory",
    "set_seed",
    "log",
    "get_logger",
    "Logger",
    "Error",
    "SignatureMismatchError",
    "ShapeError",
    "DTypeError",
    "DeviceError",
    "OutOfMemoryError",
    "MpiError",
    "CudaError",
    "TimeoutError",
    "ReadOnlyError",
    "UnsupportedError",
    "VersionError",
    "InvalidArgumentError",
    "InvalidUsageError",
    "InternalError",
    "CallRejectedError",
    "DistributedError",
    "ConfigError",
    "LockstepRuntimeError",
    "RuntimeError_",
    "CallbackError",
]

# ------------------------------------------------------------------------------------------------ errors


class Error(RuntimeError):
    """Every error lockstep raises. `.status` is the C interface's code (lockstep.h), `.name` its name."""

    status = None
    name = None


# The status codes, {"LOCKSTEP_ERROR_SHAPE": 2, ...}, as the C library names them: the classes below take their numbers
# from it, not from literals of their own.
_STATUS_CODES = {name: code for code, name in _lockstep.STATUS_NAMES.items()}


def _error_class(class_name, status_name, *extra_bases, doc):
    cls = type(
        class_name,
        (Error,) + extra_bases,
        {
            "__doc__": doc,
            "__module__": __name__,
            "status": _STATUS_CODES[status_name],
            "name": status_name,
        },
    )
    return cls


SignatureMismatchError = _error_class(
    "SignatureMismatchError",
    "LOCKSTEP_ERROR_SIGNATURE_MISMATCH",
    doc="A collective whose calls differ between ranks (debug mode).",
)
ShapeError = _error_class("ShapeError", "LOCKSTEP_ERROR_SHAPE", doc="A wrong shape for the operation.")
DTypeError = _error_class("DTypeError", "LOCKSTEP_ERROR_DTYPE", doc="A wrong or unsupported element type.")
DeviceError = _error_class("DeviceError", "LOCKSTEP_ERROR_DEVICE", doc="A device that cannot be used.")
OutOfMemoryError = _error_class(
    "OutOfMemoryError",
    "LOCKSTEP_ERROR_OUT_OF_MEMORY",
    MemoryError,
    doc="An allocator ran out of memory (host or CUDA). Also a MemoryError.",
)
MpiError = _error_class("MpiError", "LOCKSTEP_ERROR_MPI", doc="An MPI call returned an error code.")
CudaError = _error_class("CudaError", "LOCKSTEP_ERROR_CUDA", doc="A CUDA or cuBLAS call returned an error code.")
TimeoutError = _error_class(
    "TimeoutError",
    "LOCKSTEP_ERROR_TIMEOUT",
    _builtins.TimeoutError,
    doc="A collective outlived its time limit (the watchdog's verdict). " "Also builtins.TimeoutError.",
)
ReadOnlyError = _error_class("ReadOnlyError", "LOCKSTEP_ERROR_READ_ONLY", doc="A write into a read-only tensor.")
UnsupportedError = _error_class(
    "UnsupportedError",
    "LOCKSTEP_ERROR_UNSUPPORTED",
    doc="An operation, dtype, device or layout this build does not support.",
)
VersionError = _error_class("VersionError", "LOCKSTEP_ERROR_VERSION", doc="The header and the library do not fit.")
InvalidArgumentError = _error_class(
    "InvalidArgumentError",
    "LOCKSTEP_ERROR_INVALID_ARGUMENT",
    ValueError,
    doc="An argument outside its domain. Also a ValueError.",
)
InvalidUsageError = _error_class(
    "InvalidUsageError",
    "LOCKSTEP_ERROR_INVALID_USAGE",
    doc="A call at the wrong time: before init, after finalize, on a freed communicator.",
)
InternalError = _error_class(
    "InternalError", "LOCKSTEP_ERROR_INTERNAL", doc="A failure lockstep did not expect: please report it."
)
CallRejectedError = _error_class(
    "CallRejectedError",
    "LOCKSTEP_ERROR_CALL_REJECTED",
    doc="A collective some rank could not start (in debug mode: raised on every rank).",
)
DistributedError = _error_class(
    "DistributedError", "LOCKSTEP_ERROR_DISTRIBUTED", doc="Another disagreement between ranks."
)
ConfigError = _error_class("ConfigError", "LOCKSTEP_ERROR_CONFIG", doc="A setting that cannot be used.")
LockstepRuntimeError = _error_class(
    "LockstepRuntimeError", "LOCKSTEP_ERROR_RUNTIME", doc="An error of the library without a more specific code."
)
RuntimeError_ = LockstepRuntimeError
CallbackError = _error_class(
    "CallbackError", "LOCKSTEP_ERROR_CALLBACK", doc="A callback of the caller (batch-size search) reported a failure."
)

_ERROR_CLASSES = {
    cls.status: cls
    for cls in (
        SignatureMismatchError,
        ShapeError,
        DTypeError,
        DeviceError,
        OutOfMemoryError,
        MpiError,
        CudaError,
        TimeoutError,
        ReadOnlyError,
        UnsupportedError,
        VersionError,
        InvalidArgumentError,
        InvalidUsageError,
        InternalError,
        CallRejectedError,
        DistributedError,
        ConfigError,
        LockstepRuntimeError,
        CallbackError,
    )
}
_lockstep._register_errors(Error, _ERROR_CLASSES)
# Frames of this package are wrappers: a collective's call site is the first frame outside it.
# Code objects carry their file's path as imported (relative when sys.path's entry was), so both forms are given.
_lockstep._set_package_dirs(
    sorted(
        {
            _os.path.dirname(__file__),
            _os.path.dirname(_os.path.abspath(__file__)),
            _os.path.dirname(_os.path.realpath(__file__)),
        }
        - {""}
    )
)

# ------------------------------------------------------------------------------------------------ runtime

__version__ = "{}.{}.{}".format(*_lockstep.version())


def version():
    """The C library's version, (major, minor, patch)."""
    return _lockstep.version()


build_info = _lockstep.build_info
init = _lockstep.init
finalize = _lockstep.finalize
is_initialized = _lockstep.is_initialized
owns_mpi = _lockstep.owns_mpi
rank = _lockstep.rank
size = _lockstep.size
local_rank = _lockstep.local_rank
local_size = _lockstep.local_size

empty = _lockstep.empty
from_dlpack = _lockstep.from_dlpack
as_tensor = _lockstep.as_tensor
free_memory = _lockstep.free_memory
set_seed = _lockstep.set_seed


def _at_exit():
    """Finalises lockstep when the interpreter ends. This runs before mpi4py's own exit handler (a Py_AtExit
    function, which comes after every atexit one): lockstep frees its communicators while MPI still runs, and calls
    MPI_Finalize only if it initialised MPI; mpi4py then finalises only if it initialised MPI and it is not finalised.
    When someone else finalised MPI already (mpi4py's MPI.Finalize()), lockstep's finalize makes no MPI call and only
    releases its own state, which must still happen before the interpreter's teardown."""
    if not _lockstep.is_initialized():
        return
    try:
        _lockstep.finalize()
    except Error as error:  # pragma: no cover - nothing left to report it to but stderr
        print(f"lockstep: finalize at exit failed: {error}", file=_sys.stderr)


_atexit.register(_at_exit)

# ------------------------------------------------------------------------------------------------ non-blocking


def _isend(self, x, dest, tag=0, *, name=None, stream=None):
    """send(x, dest, tag, async_op=True): a lockstep.Request for the send of x to rank `dest`."""
    return self.send(x, dest, tag, name=name, stream=stream, async_op=True)


def _irecv(self, x, source=_lockstep.ANY_SOURCE, tag=0, *, name=None, stream=None):
    """recv(x, source, tag, async_op=True): a lockstep.Request for a receive into x; its `source` (and result()) is
    the sender's rank."""
    return self.recv(x, source, tag, name=name, stream=stream, async_op=True)


Communicator.isend = _isend
Communicator.irecv = _irecv

# ------------------------------------------------------------------------------------------------ agreements


def _comm(comm):
    return Communicator.world() if comm is None else comm


def set_trigger(comm=None):
    """Sets this process's trigger on `comm` (the world by default); no communication."""
    _lockstep.set_trigger(_comm(comm))


def check_trigger(comm=None):
    """Collective: True on every rank if any rank set its trigger since the last check (which clears it)."""
    return _lockstep.check_trigger(_comm(comm))


def _is_out_of_memory(exception):
    """What the batch-size search counts as running out of memory: MemoryError (lockstep.OutOfMemoryError is one),
    torch's OutOfMemoryError, and the RuntimeErrors torch and its allocators raise for it."""
    if isinstance(exception, MemoryError):
        return True
    torch = _sys.modules.get("torch")
    oom = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None) if torch is not None else None
    if oom is not None and isinstance(exception, oom):
        return True
    if isinstance(exception, RuntimeError) and len(exception.args) == 1 and isinstance(exception.args[0], str):
        text = exception.args[0]
        return any(
            needle in text
            for needle in (
                "out of memory",
                "CUDA out of memory",
                "can't allocate memory",
                "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED",
            )
        )
    return False


def _release_cached_memory():
    _gc.collect()
    torch = _sys.modules.get("torch")
    if torch is not None and getattr(torch, "cuda", None) is not None:
        try:
            if torch.cuda.is_initialized():
                torch.cuda.empty_cache()
        except Exception:  # pragma: no cover - best effort only
            pass


def find_executable_batch_size(
    function=None, *, starting_batch_size=128, comm=None, factor=0.5, minimum=1, refine_upward=False
):
    """A decorator like accelerate's: calls `function(batch_size, *args, **kwargs)` with smaller and smaller sizes
    until it runs without running out of memory on every rank (all ranks agree on each size), and returns what that
    call returned.

    Out of memory: MemoryError, lockstep.OutOfMemoryError, torch.cuda.OutOfMemoryError, or a RuntimeError saying
    "out of memory". Any other exception stops the search on every rank: it is re-raised on the rank where it happened,
    and the other ranks raise DistributedError.

        @lockstep.find_executable_batch_size(starting_batch_size=256)
        def train(batch_size, model):
            ...
        train(model)
    """
    if function is None:
        return _functools.partial(
            find_executable_batch_size,
            starting_batch_size=starting_batch_size,
            comm=comm,
            factor=factor,
            minimum=minimum,
            refine_upward=refine_upward,
        )

    @_functools.wraps(function)
    def search(*args, **kwargs):
        results = {}

        def attempt(batch_size):
            try:
                results[batch_size] = function(batch_size, *args, **kwargs)
            except BaseException as error:
                if _is_out_of_memory(error):
                    # Drop the traceback (and the frames holding the failed attempt's memory) before the next size.
                    error.__traceback__ = None
                    del error
                    _release_cached_memory()
                    raise MemoryError("out of memory") from None
                raise

        size = _lockstep.find_executable_batch_size(
            _comm(comm), attempt, starting_batch_size, factor, minimum, refine_upward, _is_out_of_memory
        )
        search.batch_size = size
        return results.get(size)

    search.batch_size = None
    return search


# ------------------------------------------------------------------------------------------------ logging

_SCOPES = {"main": "main", "all": "all", "ordered": "ordered", "every": "all", "rank_order": "ordered"}


def log(message, level="info", scope="main", logger=None):
    """A record through lockstep's rank-aware logging. scope "main": rank 0 only; "all": every rank as it comes;
    "ordered": collective over the world, every rank's record printed in rank order. level: "debug", "info",
    "warning", "error" or "critical". Raises InvalidArgumentError for a level or scope it does not know."""
    _lockstep.log(str(message), level, _SCOPES.get(scope, scope) if isinstance(scope, str) else scope, logger)


class Logger:
    """A named logger over lockstep.log (lockstep.get_logger(name))."""

    def __init__(self, name):
        self.name = name

    def log(self, level, message, scope="main"):
        """lockstep.log(message, level, scope) under this logger's name."""
        log(message, level=level, scope=scope, logger=self.name)

    def debug(self, message, scope="main"):
        """A "debug" record under this logger's name (see lockstep.log for scope)."""
        log(message, "debug", scope, self.name)

    def info(self, message, scope="main"):
        """An "info" record under this logger's name (see lockstep.log for scope)."""
        log(message, "info", scope, self.name)

    def warning(self, message, scope="main"):
        """A "warning" record under this logger's name (see lockstep.log for scope)."""
        log(message, "warning", scope, self.name)

    def error(self, message, scope="main"):
        """An "error" record under this logger's name (see lockstep.log for scope)."""
        log(message, "error", scope, self.name)

    def critical(self, message, scope="main"):
        """A "critical" record under this logger's name (see lockstep.log for scope)."""
        log(message, "critical", scope, self.name)

    def __repr__(self):
        return f"lockstep.Logger({self.name!r})"


def get_logger(name):
    """A lockstep.Logger whose records carry `name`."""
    return Logger(name)
