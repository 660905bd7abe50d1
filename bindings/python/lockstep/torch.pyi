# Type stubs of lockstep.torch: its public names (__all__).
import datetime
from typing import Any, Optional, Union

from torch._C._distributed_c10d import ProcessGroup

from lockstep import Communicator

BACKEND: str
GLOO_BACKEND: str
NCCL_BACKEND: str

class ProcessGroupLockstep(ProcessGroup):
    comm: Communicator  # rank i is the group's rank i
    blocking: bool  # True: every call waits for its operation before it returns
    def __init__(self, comm: Communicator, rank: int, size: int) -> None: ...

def init_process_group(
    backend: str = "lockstep", timeout: Optional[Union[float, datetime.timedelta]] = None, **kwargs: Any
) -> None: ...

class ProcessGroupChecked(ProcessGroup):
    wrapped: ProcessGroup  # the process group that carries the calls (gloo, NCCL)
    comm: Communicator  # lockstep's communicator over the same processes, in the same order
    backend: str  # "lockstep_gloo" or "lockstep_nccl"
    debug: bool  # debug mode of the checks (settable, on every rank at the same point)
    def __init__(self, wrapped: ProcessGroup, comm: Communicator, rank: int, size: int, backend: str) -> None: ...
