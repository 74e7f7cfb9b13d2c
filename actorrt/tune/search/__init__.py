"""Search algorithms (Ray's ``ray.tune.search``)."""

from .._search import BasicVariantGenerator as BasicVariantGenerator
from .._search import ConcurrencyLimiter as ConcurrencyLimiter
from .._search import Searcher as Searcher

__all__ = ["BasicVariantGenerator", "ConcurrencyLimiter", "Searcher"]
