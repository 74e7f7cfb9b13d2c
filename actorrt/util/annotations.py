"""Ray's ``ray.util.annotations`` name for its deprecation warnings:
``RayDeprecationWarning``, the category of every deprecation warning actorrt's Tune and
Train raise (a ``DeprecationWarning`` subclass, so filters on either work)."""

from .._shared._deprecation import RayDeprecationWarning as RayDeprecationWarning

__all__ = ["RayDeprecationWarning"]
