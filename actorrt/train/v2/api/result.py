"""Ray's ``ray.train.v2.api.result``: a run's ``Result``."""

from ... import Result as Result

__all__ = ["Result"]
