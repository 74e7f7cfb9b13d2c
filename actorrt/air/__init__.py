"""``actorrt.air``: the ``ray.air`` names of Ray 2.7, which tutorials still use.

They are Train's objects under their older home: ``RunConfig``, ``ScalingConfig``,
``CheckpointConfig``, ``FailureConfig``, ``Checkpoint`` and ``Result`` are
``actorrt.train``'s, and ``air.session.report`` / ``get_checkpoint`` / ``get_context`` are
``train.report`` / ``train.get_checkpoint`` / ``train.get_context`` (which, in a Tune
function trainable, report to the trial). A ``RunConfig`` from here given to
``tune.Tuner`` takes its ``stop=`` and ``callbacks=`` as Ray 2.7 did.
"""

from ..train import Checkpoint as Checkpoint
from ..train import CheckpointConfig as CheckpointConfig
from ..train import FailureConfig as FailureConfig
from ..train import Result as Result
from ..train import RunConfig as RunConfig
from ..train import ScalingConfig as ScalingConfig
from . import session as session

__all__ = [
    "Checkpoint",
    "CheckpointConfig",
    "FailureConfig",
    "Result",
    "RunConfig",
    "ScalingConfig",
    "session",
]
