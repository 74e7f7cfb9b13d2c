"""Ray's ``ray.tune.schedulers.resource_changing_scheduler``."""

from .._resource_changing import DistributeResources as DistributeResources
from .._resource_changing import DistributeResourcesToTopJob as DistributeResourcesToTopJob
from .._resource_changing import ResourceChangingScheduler as ResourceChangingScheduler

__all__ = ["DistributeResources", "DistributeResourcesToTopJob", "ResourceChangingScheduler"]

