"""Trials as the controller records them (Ray's ``ray.tune.experiment``)."""

from .experiment import Experiment as Experiment
from .trial import Trial as Trial

__all__ = ["Experiment", "Trial"]
