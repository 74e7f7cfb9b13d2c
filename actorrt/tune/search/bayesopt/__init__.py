"""Ray's ``ray.tune.search.bayesopt``; needs ``pip install 'actorrt[bayesopt]'``."""

from .bayesopt_search import BayesOptSearch as BayesOptSearch

# Shown under the module users import it from.
BayesOptSearch.__module__ = __name__

__all__ = ["BayesOptSearch"]
