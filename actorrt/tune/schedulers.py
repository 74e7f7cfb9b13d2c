"""Trial schedulers (Ray's ``ray.tune.schedulers``)."""

from ._pbt import PopulationBasedTraining as PopulationBasedTraining
from ._schedulers import ASHAScheduler as ASHAScheduler
from ._schedulers import AsyncHyperBandScheduler as AsyncHyperBandScheduler
from ._schedulers import FIFOScheduler as FIFOScheduler
from ._schedulers import MedianStoppingRule as MedianStoppingRule
from ._schedulers import TrialScheduler as TrialScheduler

__all__ = [
    "ASHAScheduler",
    "AsyncHyperBandScheduler",
    "FIFOScheduler",
    "MedianStoppingRule",
    "PopulationBasedTraining",
    "TrialScheduler",
]
