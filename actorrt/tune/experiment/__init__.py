"""Trials as the controller records them (Ray's ``ray.tune.experiment``)."""

from .trial import Trial as Trial

__all__ = ["Trial"]
