"""Stoppers for ``RunConfig(stop=...)`` (Ray's ``ray.tune.stopper``)."""

from .stopper import CombinedStopper as CombinedStopper
from .stopper import ExperimentPlateauStopper as ExperimentPlateauStopper
from .stopper import FunctionStopper as FunctionStopper
from .stopper import MaximumIterationStopper as MaximumIterationStopper
from .stopper import NoopStopper as NoopStopper
from .stopper import Stopper as Stopper
from .stopper import TimeoutStopper as TimeoutStopper
from .stopper import TrialPlateauStopper as TrialPlateauStopper

__all__ = [
    "CombinedStopper",
    "ExperimentPlateauStopper",
    "FunctionStopper",
    "MaximumIterationStopper",
    "NoopStopper",
    "Stopper",
    "TimeoutStopper",
    "TrialPlateauStopper",
]
