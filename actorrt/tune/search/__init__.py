"""Search algorithms (Ray's ``ray.tune.search``).

The searchers around optional libraries live in submodules, as in Ray:
``actorrt.tune.search.hyperopt``, ``.bayesopt``, ``.nevergrad``, ``.bohb``, ``.optuna``,
``.zoopt``, ``.ax``.
"""

from .._repeater import Repeater as Repeater
from .._search import BasicVariantGenerator as BasicVariantGenerator
from .._search import ConcurrencyLimiter as ConcurrencyLimiter
from .._search import Searcher as Searcher

__all__ = ["BasicVariantGenerator", "ConcurrencyLimiter", "Repeater", "Searcher"]
