"""Trial schedulers (Ray's ``ray.tune.schedulers``).

``PB2`` needs ``pip install 'actorrt[pb2]'``; it is also in ``actorrt.tune.schedulers.pb2``.
``DistributeResources`` and ``DistributeResourcesToTopJob`` are in
``actorrt.tune.schedulers.resource_changing_scheduler``, as in Ray.
"""

from .._hyperband import HyperBandForBOHB as HyperBandForBOHB
from .._hyperband import HyperBandScheduler as HyperBandScheduler
from .._pb2 import PB2 as PB2
from .._pbt import PopulationBasedTraining as PopulationBasedTraining
from .._resource_changing import ResourceChangingScheduler as ResourceChangingScheduler
from .._schedulers import ASHAScheduler as ASHAScheduler
from .._schedulers import AsyncHyperBandScheduler as AsyncHyperBandScheduler
from .._schedulers import FIFOScheduler as FIFOScheduler
from .._schedulers import MedianStoppingRule as MedianStoppingRule
from .._schedulers import TrialScheduler as TrialScheduler

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
