"""Ray's ``ray.tune.search.nevergrad``; needs ``pip install 'actorrt[nevergrad]'``."""

from .nevergrad_search import NevergradSearch as NevergradSearch

# Shown under the module users import it from.
NevergradSearch.__module__ = __name__

__all__ = ["NevergradSearch"]
