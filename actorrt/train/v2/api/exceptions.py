"""Ray's ``ray.train.v2.api.exceptions``: how a run fails."""

from ... import ControllerError as ControllerError
from ... import TrainingFailedError as TrainingFailedError
from ... import WorkerGroupError as WorkerGroupError

__all__ = ["ControllerError", "TrainingFailedError", "WorkerGroupError"]
