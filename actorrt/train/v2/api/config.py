"""Ray's ``ray.train.v2.api.config``: the run's configs (``actorrt.train``'s)."""

from ... import CheckpointConfig as CheckpointConfig
from ... import FailureConfig as FailureConfig
from ... import RunConfig as RunConfig
from ... import ScalingConfig as ScalingConfig

__all__ = ["CheckpointConfig", "FailureConfig", "RunConfig", "ScalingConfig"]
