# Type stubs of lockstep.torch_checked: its public names (__all__), defined in lockstep.torch's stubs.
from lockstep.torch import GLOO_BACKEND as GLOO_BACKEND
from lockstep.torch import NCCL_BACKEND as NCCL_BACKEND
from lockstep.torch import ProcessGroupChecked as ProcessGroupChecked

WATCH_PERIOD: float
