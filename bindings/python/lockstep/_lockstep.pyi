# Type stubs of the extension module lockstep._lockstep (bindings/python/*.cpp). Arrays are anything the binding takes
# without a copy: buffer-protocol objects (numpy arrays, bytearray, memoryview), DLPack producers (torch, cupy, jax)
# and lockstep.Tensor; they are typed Any, as numpy's and torch's types are optional here. A collective returns its
# blocking result, or with async_op=True a Request (the overloads below).
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Tuple, TypeVar, Union, overload

_T = TypeVar("_T")
_Array = Any
_Stream = Any  # a CUDA stream: an integer handle or an object with cuda_stream / __cuda_stream__ (torch, cupy)
_Tag = Optional[str]
_S = Optional[_Stream]
_Out = Optional[_Array]
_Sync = Literal[False]  # the blocking call: its result
_Async = Literal[True]  # the non-blocking one: a Request

ANY_SOURCE: int
UNDEFINED_COLOR: int
STATUS_NAMES: Dict[int, str]

class RequestWarning(RuntimeWarning): ...

class Tensor:
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def ndim(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def data_ptr(self) -> int: ...
    @property
    def numel(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def read_only(self) -> bool: ...
    def numpy(self) -> Any: ...
    def __len__(self) -> int: ...
    def __dlpack__(
        self,
        *,
        stream: Optional[_Stream] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...

class Request:
    def wait(self, timeout: Optional[float] = None) -> bool: ...
    def test(self) -> bool: ...
    def is_completed(self) -> bool: ...
    def result(self) -> Any: ...
    @property
    def source(self) -> Optional[int]: ...

class Communicator:
    @staticmethod
    def world() -> Communicator: ...
    @staticmethod
    def from_fortran(
        handle: int,
        *,
        debug: Optional[bool] = None,
        timeout: Optional[float] = None,
        shared_memory: Optional[bool] = None,
        on_timeout: Optional[str] = None,
    ) -> Communicator: ...
    @staticmethod
    def from_mpi4py(
        comm: Any,
        *,
        debug: Optional[bool] = None,
        timeout: Optional[float] = None,
        shared_memory: Optional[bool] = None,
        on_timeout: Optional[str] = None,
    ) -> Communicator: ...
    @property
    def rank(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def freed(self) -> bool: ...
    debug: bool
    @property
    def timeout(self) -> float: ...
    @property
    def fortran_handle(self) -> int: ...
    def set_step(self, step: int) -> None: ...
    @property
    def on_timeout(self) -> str: ...
    @property
    def timed_out(self) -> bool: ...
    @property
    def progress_thread(self) -> bool: ...
    def split(
        self, color: Optional[int], key: int = 0, *, timeout: Optional[float] = None, on_timeout: Optional[str] = None
    ) -> Optional[Communicator]: ...
    def dup(self, *, timeout: Optional[float] = None, on_timeout: Optional[str] = None) -> Communicator: ...
    def create_group(
        self, ranks: Sequence[int], tag: int = 0, *, timeout: Optional[float] = None, on_timeout: Optional[str] = None
    ) -> Optional[Communicator]: ...
    def free(self) -> None: ...
    def async_error(self) -> Optional[str]: ...
    def last_error(self) -> str: ...
    def abort(self, code: int = 1, reason: Optional[str] = None) -> None: ...
    # Collectives another library carries (gloo, NCCL): checked in debug mode and watched, no data moved.
    def begin_foreign(
        self,
        collective: Union[str, int],
        dtype: Any = None,
        shape: Sequence[int] = (),
        root: Optional[int] = None,
        op: Union[str, int, None] = None,
        *,
        device: Union[str, int] = "cpu",
        varying_dim: Optional[int] = None,
        tag: Optional[str] = None,
    ) -> int: ...
    def end_foreign(self, number: int) -> None: ...
    def set_carrier(self, name: str) -> None: ...
    @overload
    def barrier(self, *, tag: _Tag = None, stream: _S = None, async_op: _Sync = False) -> None: ...
    @overload
    def barrier(self, *, tag: _Tag = None, stream: _S = None, async_op: _Async) -> Request: ...
    @overload
    def broadcast(
        self, x: _T, root: int = 0, *, tag: _Tag = None, stream: _S = None, async_op: _Sync = False
    ) -> _T: ...
    @overload
    def broadcast(
        self, x: _Array, root: int = 0, *, tag: _Tag = None, stream: _S = None, async_op: _Async
    ) -> Request: ...
    @overload
    def allreduce(
        self,
        x: _T,
        op: str = "sum",
        out: None = None,
        *,
        tag: _Tag = None,
        stream: _S = None,
        async_op: _Sync = False,
        factor: Optional[float] = None,
    ) -> _T: ...
    @overload
    def allreduce(
        self,
        x: _Array,
        op: str = "sum",
        out: _Out = None,
        *,
        tag: _Tag = None,
        stream: _S = None,
        async_op: _Sync = False,
        factor: Optional[float] = None,
    ) -> Any: ...
    @overload
    def allreduce(
        self,
        x: _Array,
        op: str = "sum",
        out: _Out = None,
        *,
        tag: _Tag = None,
        stream: _S = None,
        async_op: _Async,
        factor: Optional[float] = None,
    ) -> Request: ...
    @overload
    def reduce(
        self,
        x: _Array,
        root: int = 0,
        op: str = "sum",
        out: _Out = None,
        *,
        tag: _Tag = None,
        stream: _S = None,
        async_op: _Sync = False,
        factor: Optional[float] = None,
    ) -> Any: ...
    @overload
    def reduce(
        self,
        x: _Array,
        root: int = 0,
        op: str = "sum",
        out: _Out = None,
        *,
        tag: _Tag = None,
        stream: _S = None,
        async_op: _Async,
        factor: Optional[float] = None,
    ) -> Request: ...
    @overload
    def allgather(
        self, x: _Array, out: _Out = None, *, tag: _Tag = None, stream: _S = None, async_op: _Sync = False
    ) -> Any: ...
    @overload
    def allgather(
        self, x: _Array, out: _Out = None, *, tag: _Tag = None, stream: _S = None, async_op: _Async
    ) -> Request: ...
    @overload
    def gather(
        self,
        x: _Array,
        root: int = 0,
        out: _Out = None,
        *,
        tag: _Tag = None,
        stream: _S = None,
        async_op: _Sync = False,
    ) -> Any: ...
    @overload
    def gather(
        self, x: _Array, root: int = 0, out: _Out = None, *, tag: _Tag = None, stream: _S = None, async_op: _Async
    ) -> Request: ...
    @overload
    def scatter(
        self, x: _Out, out: _T, root: int = 0, *, tag: _Tag = None, stream: _S = None, async_op: _Sync = False
    ) -> _T: ...
    @overload
    def scatter(
        self, x: _Out, out: _Array, root: int = 0, *, tag: _Tag = None, stream: _S = None, async_op: _Async
    ) -> Request: ...
    @overload
    def reduce_scatter(
        self,
        x: _Array,
        out: _Out = None,
        op: str = "sum",
        *,
        tag: _Tag = None,
        stream: _S = None,
        async_op: _Sync = False,
        factor: Optional[float] = None,
    ) -> Any: ...
    @overload
    def reduce_scatter(
        self,
        x: _Array,
        out: _Out = None,
        op: str = "sum",
        *,
        tag: _Tag = None,
        stream: _S = None,
        async_op: _Async,
        factor: Optional[float] = None,
    ) -> Request: ...
    @overload
    def alltoall(
        self, x: _Array, out: _Out = None, *, tag: _Tag = None, stream: _S = None, async_op: _Sync = False
    ) -> Any: ...
    @overload
    def alltoall(
        self, x: _Array, out: _Out = None, *, tag: _Tag = None, stream: _S = None, async_op: _Async
    ) -> Request: ...
    @overload
    def alltoallv(
        self,
        x: _Array,
        send_counts: Sequence[int],
        recv_counts: Sequence[int],
        out: _Out = None,
        *,
        tag: _Tag = None,
        stream: _S = None,
        async_op: _Sync = False,
    ) -> Any: ...
    @overload
    def alltoallv(
        self,
        x: _Array,
        send_counts: Sequence[int],
        recv_counts: Sequence[int],
        out: _Out = None,
        *,
        tag: _Tag = None,
        stream: _S = None,
        async_op: _Async,
    ) -> Request: ...
    @overload
    def gather_uneven(self, x: _Array, *, tag: _Tag = None, stream: _S = None, async_op: _Sync = False) -> Tensor: ...
    @overload
    def gather_uneven(self, x: _Array, *, tag: _Tag = None, stream: _S = None, async_op: _Async) -> Request: ...
    @overload
    def send(
        self, x: _Array, dest: int, tag: int = 0, *, name: _Tag = None, stream: _S = None, async_op: _Sync = False
    ) -> None: ...
    @overload
    def send(
        self, x: _Array, dest: int, tag: int = 0, *, name: _Tag = None, stream: _S = None, async_op: _Async
    ) -> Request: ...
    @overload
    def recv(
        self,
        x: _Array,
        source: int = ...,
        tag: int = 0,
        *,
        name: _Tag = None,
        stream: _S = None,
        async_op: _Sync = False,
    ) -> int: ...
    @overload
    def recv(
        self, x: _Array, source: int = ..., tag: int = 0, *, name: _Tag = None, stream: _S = None, async_op: _Async
    ) -> Request: ...
    # Added by lockstep/__init__.py: send and recv with async_op=True.
    def isend(self, x: _Array, dest: int, tag: int = 0, *, name: _Tag = None, stream: _S = None) -> Request: ...
    def irecv(self, x: _Array, source: int = ..., tag: int = 0, *, name: _Tag = None, stream: _S = None) -> Request: ...

def version() -> Tuple[int, int, int]: ...
def header_version() -> int: ...
def build_info() -> str: ...
def init(
    debug: Optional[bool] = None,
    timeout: Optional[float] = None,
    config_file: Optional[str] = None,
    on_timeout: Optional[str] = None,
) -> None: ...
def finalize() -> None: ...
def is_initialized() -> bool: ...
def is_finalized() -> bool: ...
def owns_mpi() -> bool: ...
def rank() -> int: ...
def size() -> int: ...
def local_rank() -> int: ...
def local_size() -> int: ...
def status_string(status: int) -> str: ...
def last_error() -> str: ...
def last_error_status() -> int: ...
def clear_last_error() -> None: ...
def dtype_size(dtype: str) -> int: ...
def empty(shape: Union[int, Sequence[int]], dtype: str = "float32", device: str = "cpu") -> Tensor: ...
def from_dlpack(obj: Any, copy: Optional[bool] = None) -> Tensor: ...
def as_tensor(obj: Any) -> Tensor: ...
def free_memory() -> None: ...
def set_seed(seed: int, device_specific: bool = False) -> None: ...
def set_trigger(comm: Communicator) -> None: ...
def check_trigger(comm: Communicator, *, tag: _Tag = None, stream: Optional[_Stream] = None) -> bool: ...
def find_executable_batch_size(
    comm: Communicator,
    function: Callable[[int], None],
    starting_batch_size: int,
    factor: float,
    minimum: int,
    refine_upward: bool,
    is_out_of_memory: Callable[[BaseException], bool],
) -> int: ...
def log(message: str, level: str = "info", scope: str = "main", logger: Optional[str] = None) -> None: ...
