# Type stubs of lockstep.torch: its public names (__all__).
import datetime
from typing import Any, Optional, Union

from torch._C._distributed_c10d import ProcessGroup

from lockstep import Communicator
from lockstep.torch_checked import GLOO_BACKEND as GLOO_BACKEND
from lockstep.torch_checked import NCCL_BACKEND as NCCL_BACKEND
from lockstep.torch_checked import ProcessGroupChecked as ProcessGroupChecked

BACKEND: str

class ProcessGroupLockstep(ProcessGroup):
    comm: Communicator  # rank i is the group's rank i
    blocking: bool  # True: every call waits for its operation before it returns
    def __init__(self, comm: Communicator, rank: int, size: int) -> None: ...

def init_process_group(
    backend: str = "lockstep", timeout: Optional[Union[float, datetime.timedelta]] = None, **kwargs: Any
) -> None: ...
