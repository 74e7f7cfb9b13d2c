"""Ray's ``ray.train.v2.torch.torch_trainer``: ``TorchTrainer``."""

from ...torch import TorchTrainer as TorchTrainer

__all__ = ["TorchTrainer"]
