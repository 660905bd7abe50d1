# Type stubs of lockstep.torch_checked: its public names (__all__).

from torch._C._distributed_c10d import ProcessGroup

from lockstep import Communicator

GLOO_BACKEND: str
NCCL_BACKEND: str
WATCH_PERIOD: float

class ProcessGroupChecked(ProcessGroup):
    wrapped: ProcessGroup  # the process group that carries the calls (gloo, NCCL)
    comm: Communicator  # lockstep's communicator over the same processes, in the same order
    backend: str  # "lockstep_gloo" or "lockstep_nccl"
    debug: bool  # debug mode of the checks (settable, on every rank at the same point)
    def __init__(self, wrapped: ProcessGroup, comm: Communicator, rank: int, size: int, backend: str) -> None: ...
    def getBackendName(self) -> str: ...
