"""Stoppers for ``RunConfig(stop=...)`` (Ray's ``ray.tune.stopper``)."""

from ._stopper import CombinedStopper as CombinedStopper
from ._stopper import ExperimentPlateauStopper as ExperimentPlateauStopper
from ._stopper import FunctionStopper as FunctionStopper
from ._stopper import MaximumIterationStopper as MaximumIterationStopper
from ._stopper import NoopStopper as NoopStopper
from ._stopper import Stopper as Stopper
from ._stopper import TimeoutStopper as TimeoutStopper
from ._stopper import TrialPlateauStopper as TrialPlateauStopper

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
