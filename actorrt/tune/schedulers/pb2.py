"""Ray's ``ray.tune.schedulers.pb2``; needs ``pip install 'actorrt[pb2]'``."""

from .._pb2 import PB2 as PB2

__all__ = ["PB2"]
