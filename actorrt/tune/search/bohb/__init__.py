"""Ray's ``ray.tune.search.bohb``; needs ``pip install 'actorrt[bohb]'``."""

from .bohb_search import TuneBOHB as TuneBOHB

# Shown under the module users import it from.
TuneBOHB.__module__ = __name__

__all__ = ["TuneBOHB"]
