"""Stoppers for ``RunConfig(stop=...)`` (Ray's ``ray.tune.stopper``)."""

from ._stopper import CombinedStopper as CombinedStopper
from ._stopper import FunctionStopper as FunctionStopper
from ._stopper import Stopper as Stopper

__all__ = ["CombinedStopper", "FunctionStopper", "Stopper"]
