"""Ray's ``ray.train.v2.torch``: ``actorrt.train.torch``'s names."""

from ...torch import TorchConfig as TorchConfig
from ...torch import TorchTrainer as TorchTrainer
from ...torch import get_device as get_device
from ...torch import get_devices as get_devices
from ...torch import prepare_data_loader as prepare_data_loader
from ...torch import prepare_model as prepare_model

__all__ = [
    "TorchConfig", "TorchTrainer", "get_device", "get_devices", "prepare_data_loader",
    "prepare_model",
]
