"""Search algorithms (Ray's ``ray.tune.search``), in Ray's modules.

``sample`` holds the search space, ``variant_generator`` turns it into configs,
``searcher`` the interface, ``basic_variant`` the default search; ``concurrency_limiter`` and
``repeater`` wrap a searcher. The searchers around optional libraries are one package each,
as in Ray: ``actorrt.tune.search.hyperopt``, ``.bayesopt``, ``.nevergrad``, ``.bohb``,
``.optuna``, ``.zoopt``, ``.ax``.
"""

from .basic_variant import BasicVariantGenerator as BasicVariantGenerator
from .concurrency_limiter import ConcurrencyLimiter as ConcurrencyLimiter
from .repeater import Repeater as Repeater
from .searcher import Searcher as Searcher

__all__ = ["BasicVariantGenerator", "ConcurrencyLimiter", "Repeater", "Searcher"]
