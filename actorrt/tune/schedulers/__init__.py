"""Trial schedulers (Ray's ``ray.tune.schedulers``), one module each as in Ray.

``PB2`` needs ``pip install 'actorrt[pb2]'``. ``DistributeResources`` and
``DistributeResourcesToTopJob`` are in
``actorrt.tune.schedulers.resource_changing_scheduler``, as in Ray.
"""

from .async_hyperband import ASHAScheduler as ASHAScheduler
from .async_hyperband import AsyncHyperBandScheduler as AsyncHyperBandScheduler
from .hb_bohb import HyperBandForBOHB as HyperBandForBOHB
from .hyperband import HyperBandScheduler as HyperBandScheduler
from .median_stopping_rule import MedianStoppingRule as MedianStoppingRule
from .pb2 import PB2 as PB2
from .pbt import PopulationBasedTraining as PopulationBasedTraining
from .resource_changing_scheduler import ResourceChangingScheduler as ResourceChangingScheduler
from .trial_scheduler import FIFOScheduler as FIFOScheduler
from .trial_scheduler import TrialScheduler as TrialScheduler

__all__ = [
    "PB2",
    "ASHAScheduler",
    "AsyncHyperBandScheduler",
    "FIFOScheduler",
    "HyperBandForBOHB",
    "HyperBandScheduler",
    "MedianStoppingRule",
    "PopulationBasedTraining",
    "ResourceChangingScheduler",
    "TrialScheduler",
]
