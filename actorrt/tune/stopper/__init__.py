"""Stoppers for ``RunConfig(stop=...)`` (Ray's ``ray.tune.stopper``), one module each as in Ray."""

from .experiment_plateau import ExperimentPlateauStopper as ExperimentPlateauStopper
from .function_stopper import FunctionStopper as FunctionStopper
from .maximum_iteration import MaximumIterationStopper as MaximumIterationStopper
from .noop import NoopStopper as NoopStopper
from .stopper import CombinedStopper as CombinedStopper
from .stopper import Stopper as Stopper
from .timeout import TimeoutStopper as TimeoutStopper
from .trial_plateau import TrialPlateauStopper as TrialPlateauStopper

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
