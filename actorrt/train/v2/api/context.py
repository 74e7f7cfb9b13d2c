"""Ray's ``ray.train.v2.api.context``: a worker's ``TrainContext``."""

from ... import TrainContext as TrainContext

__all__ = ["TrainContext"]
