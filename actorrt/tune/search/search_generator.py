"""Ray's ``ray.tune.search.search_generator``: ``SearchGenerator``, a ``Searcher`` wrapped
as Ray's older ``SearchAlgorithm`` interface took it."""

from __future__ import annotations

from typing import Any

from .search_algorithm import SearchAlgorithm
from .searcher import Searcher
from .util import set_search_properties_compatibly

__all__ = ["SearchGenerator"]


class SearchGenerator(SearchAlgorithm):
    """Wraps ``searcher`` (``SearchGenerator(OptunaSearch(...))``); given as
    ``TuneConfig(search_alg=...)`` or ``tune.run(search_alg=...)``, the searcher it wraps
    is the one that runs."""

    def __init__(self, searcher: Searcher) -> None:
        if not isinstance(searcher, Searcher):
            raise TypeError(
                f"SearchGenerator() takes a tune Searcher, got {type(searcher).__name__}: "
                f"{searcher!r}"
            )
        self.searcher = searcher

    @property
    def metric(self) -> str | None:
        return self.searcher.metric

    @property
    def mode(self) -> str | None:
        return self.searcher.mode

    def set_search_properties(self, metric: str | None, mode: str | None,
                              config: dict[str, Any], **spec: Any) -> bool:
        return bool(set_search_properties_compatibly(
            self.searcher.set_search_properties, metric, mode, config, **spec
        ))

    def __repr__(self) -> str:
        return f"SearchGenerator({self.searcher!r})"
