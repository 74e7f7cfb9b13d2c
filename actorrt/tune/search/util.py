"""Ray's ``ray.tune.search.util``: the search package's logger, and how a searcher is given
the experiment's properties whatever its ``set_search_properties`` takes."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["logger", "set_search_properties_compatibly"]

logger = logging.getLogger("actorrt.tune.search")

UPDATE_SIGNATURE = (
    "Please update custom Searcher to take in function signature as "
    "``def set_search_properties(metric, mode, config, **spec) -> bool``."
)


def set_search_properties_compatibly(
    set_search_properties: Callable[..., Any],
    metric: str | None,
    mode: str | None,
    config: dict[str, Any],
    **spec: Any,
) -> bool:
    """Call a searcher's ``set_search_properties`` with ``spec`` (``num_samples``, ...)
    when it takes them; one written for older Ray, ``(metric, mode, config)`` only, is
    called without them, with a warning saying to update it (as Ray does)."""
    try:
        parameters = inspect.signature(set_search_properties).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: give it everything
        return bool(set_search_properties(metric, mode, config, **spec))
    takes_spec = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters) or all(
        name in {p.name for p in parameters} for name in spec
    )
    if takes_spec:
        return bool(set_search_properties(metric, mode, config, **spec))
    logger.warning(UPDATE_SIGNATURE)
    return bool(set_search_properties(metric, mode, config))
