"""actorrt.train.torch: PyTorch DDP on a gang of training workers (Ray Train's names).

``TorchTrainer`` starts a ``torch.distributed`` process group in every worker (gloo on
CPU, NCCL with GPUs) before the training function runs and destroys it afterwards;
``prepare_model`` and ``prepare_data_loader`` make single-process code data-parallel.
"""

from ._config import TorchConfig as TorchConfig
from ._prepare import get_device as get_device
from ._prepare import prepare_data_loader as prepare_data_loader
from ._prepare import prepare_model as prepare_model
from ._trainer import TorchTrainer as TorchTrainer

__all__ = [
    "TorchConfig",
    "TorchTrainer",
    "get_device",
    "prepare_data_loader",
    "prepare_model",
]

for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("actorrt.train.torch._"):
        try:
            _obj.__module__ = "actorrt.train.torch"
        except (AttributeError, TypeError):
            pass
del _name, _obj
