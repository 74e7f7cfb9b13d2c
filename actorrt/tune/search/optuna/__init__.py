"""Optuna search (Ray's ``ray.tune.search.optuna``); needs ``pip install 'actorrt[optuna]'``."""

from .optuna_search import OptunaSearch as OptunaSearch

# Shown under the module users import it from.
OptunaSearch.__module__ = __name__

__all__ = ["OptunaSearch"]
