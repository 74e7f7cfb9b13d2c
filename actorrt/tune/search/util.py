"""Ray's ``ray.tune.search.util``: the search package's logger."""

import logging

__all__ = ["logger"]

logger = logging.getLogger("actorrt.tune.search")
