"""Ray's ``ray.tune.search.zoopt``; needs ``pip install 'actorrt[zoopt]'``."""

from .zoopt_search import ZOOptSearch as ZOOptSearch

# Shown under the module users import it from.
ZOOptSearch.__module__ = __name__

__all__ = ["ZOOptSearch"]
