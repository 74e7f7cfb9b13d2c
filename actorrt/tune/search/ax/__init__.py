"""Ray's ``ray.tune.search.ax``; needs ``pip install 'actorrt[ax]'``."""

from .ax_search import AxSearch as AxSearch

# Shown under the module users import it from.
AxSearch.__module__ = __name__

__all__ = ["AxSearch"]
