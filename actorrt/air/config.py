"""Ray's ``ray.air.config``: the run configs where Ray 2.x programs import them from
(``actorrt.train``'s objects)."""

from ..train import CheckpointConfig as CheckpointConfig
from ..train import FailureConfig as FailureConfig
from ..train import RunConfig as RunConfig
from ..train import ScalingConfig as ScalingConfig

__all__ = ["CheckpointConfig", "FailureConfig", "RunConfig", "ScalingConfig"]
