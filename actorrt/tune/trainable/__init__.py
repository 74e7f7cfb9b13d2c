"""The class trainable API and the wrappers of a trainable (Ray's ``ray.tune.trainable``)."""

from .trainable import Trainable as Trainable
from .util import with_parameters as with_parameters

__all__ = ["Trainable", "with_parameters"]
