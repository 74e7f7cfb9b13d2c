"""Ray's ``ray.tune.search.search_algorithm``: the ``SearchAlgorithm`` interface.

Tune here runs ``Searcher`` objects directly; a ``SearchAlgorithm`` is what Ray's older API
wrapped one in. :class:`~actorrt.tune.search.search_generator.SearchGenerator` is the one
kind there is, and ``TuneConfig(search_alg=SearchGenerator(searcher))`` runs ``searcher``.
"""

from __future__ import annotations

__all__ = ["SearchAlgorithm"]


class SearchAlgorithm:
    """The base of Ray's search algorithm wrappers (see the module docstring)."""
