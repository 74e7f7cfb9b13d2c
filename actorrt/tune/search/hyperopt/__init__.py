"""Ray's ``ray.tune.search.hyperopt``; needs ``pip install 'actorrt[hyperopt]'``."""

from .hyperopt_search import HyperOptSearch as HyperOptSearch

# Shown under the module users import it from.
HyperOptSearch.__module__ = __name__

__all__ = ["HyperOptSearch"]
