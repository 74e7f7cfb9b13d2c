"""``BayesOptSearch``: Gaussian-process Bayesian optimisation (the bayesian-optimization package).

The library maximises a function over boxes of floats; each Tune trial is one suggested
point, and its end registers the point's value (the metric, negated for ``mode="min"``).
As Ray Tune does, results are held back until ``random_search_steps`` have come (the
suggestions before that are the library's random draws), and a point suggested again is
skipped (``skip_duplicate``); more than ``patience`` suggestions of one point end the search.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from ..._controller._storage import flatten
from .._library_search import LibrarySearcher, domains_of, import_library, join_plain, unflatten
from ..sample import Float, is_normal
from ..searcher import Searcher

__all__ = ["BayesOptSearch"]

logger = logging.getLogger("actorrt.tune")
EXTRA = "bayesopt"
PRECISION = 5  # digits a point is rounded to when looking for duplicates (as Ray)


def _bayes_opt() -> Any:
    return import_library("bayes_opt", "BayesOptSearch", EXTRA)


class BayesOptSearch(LibrarySearcher):
    """Search with bayesian-optimization (Ray Tune's ``BayesOptSearch``).

    Args:
        space: ``{"name": (lower, upper)}`` (nested dicts allowed) or a dict of
            ``tune.uniform`` domains; ``None`` (usual): the Tuner's ``param_space``.
        metric, mode: what is optimised (default: ``TuneConfig``'s).
        points_to_evaluate: complete configs to run first.
        utility_kwargs: the acquisition function (default
            ``{"kind": "ucb", "kappa": 2.576, "xi": 0.0}``).
        random_state: seeds the library.
        random_search_steps: how many results come before the GP sees any.
        verbose: the library's verbosity.
        patience: end the search when one point has been suggested more than this often.
        skip_duplicate: do not run a point twice (rounded to 5 digits).
        analysis: not supported (Ray's registration of an old ``ExperimentAnalysis``).

    Only float parameters can be searched, as in Ray: ``tune.loguniform`` and quantised
    floats are searched uniformly over their bounds (with a warning).
    """

    NAME = "BayesOptSearch"
    JOINS = True

    def __init__(
        self,
        space: dict[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        utility_kwargs: dict[str, Any] | None = None,
        random_state: int = 42,
        random_search_steps: int = 10,
        verbose: int = 0,
        patience: int = 5,
        skip_duplicate: bool = True,
        analysis: Any = None,
    ) -> None:
        _bayes_opt()
        if analysis is not None:
            raise ValueError(
                "BayesOptSearch(analysis=...) is not supported: give earlier results as "
                "points_to_evaluate and let them run, or use OptunaSearch(evaluated_rewards=...)"
            )
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ValueError(f"patience must be a positive int, got {patience!r}")
        if random_search_steps < 0:
            raise ValueError(f"random_search_steps must be >= 0, got {random_search_steps!r}")
        super().__init__(space, metric, mode, points_to_evaluate)
        self.utility_kwargs = dict(utility_kwargs or {"kind": "ucb", "kappa": 2.576, "xi": 0.0})
        self.random_state = random_state
        self.random_search_steps = random_search_steps
        self.verbose = verbose
        self.patience = patience
        self.skip_duplicate = skip_duplicate
        self._seen: Counter[tuple[Any, ...]] = Counter()
        self._buffered: list[tuple[dict[str, float], float]] | None = []
        self.optimizer: Any = None

    @staticmethod
    def convert_search_space(spec: dict[str, Any], join: bool = False) -> dict[str, Any]:
        """bayesian-optimization's bounds of a Tune param space: ``{"a/b": (lower, upper)}``;
        with ``join``, the space's other values (its own bounds) are kept beside them."""
        bounds: dict[str, tuple[float, float]] = {}
        _refuse_slashes(spec)
        for name, domain in domains_of(spec, "BayesOptSearch"):
            if not isinstance(domain, Float) or is_normal(domain):
                raise ValueError(
                    f"BayesOptSearch searches floats only (as Ray's): {name}={domain!r} "
                    "cannot be searched; use tune.uniform, or another searcher"
                )
            if domain.log_base is not None or domain.q is not None:
                logger.warning(
                    "BayesOptSearch searches %s uniformly within [%s, %s]: the library has no "
                    "log or quantised sampling (as in Ray)", name, domain.lower, domain.upper,
                )
            bounds[name] = (float(domain.lower), float(domain.upper))
        return join_plain(spec, bounds) if join else bounds

    def _setup(self) -> None:
        flat = flatten(self._space)
        for name, bound in flat.items():
            if not (isinstance(bound, tuple | list) and len(bound) == 2):
                raise ValueError(
                    f"BayesOptSearch: the space's {name!r} must be a (lower, upper) pair, "
                    f"got {bound!r}"
                )
        self._bounds = {name: (float(b[0]), float(b[1])) for name, b in flat.items()}
        bo = _bayes_opt()
        self.optimizer = bo.BayesianOptimization(
            f=None, pbounds=self._bounds, random_state=self.random_state, verbose=self.verbose
        )
        self.utility = bo.UtilityFunction(**self.utility_kwargs)
        for point in self._points:
            names = set(flatten(point))
            if names != set(self._bounds):
                raise ValueError(
                    f"BayesOptSearch: each of points_to_evaluate must give exactly the searched "
                    f"parameters {sorted(self._bounds)}, got {sorted(names)}"
                )

    def _key(self, params: dict[str, float]) -> tuple[Any, ...]:
        return tuple(round(float(params[k]), PRECISION) for k in sorted(params))

    def _ask(self, trial_id: str) -> tuple[Any, dict[str, Any]] | str | None:
        while True:
            if self._points:
                params = {k: float(v) for k, v in flatten(self._points.pop(0)).items()}
            else:
                params = {k: float(v) for k, v in self.optimizer.suggest(self.utility).items()}
            key = self._key(params)
            seen = key in self._seen
            self._seen[key] += 1
            if self._seen[key] > self.patience:
                logger.info(
                    "BayesOptSearch: %s suggested more than patience=%d times; the search ends",
                    params, self.patience,
                )
                return Searcher.FINISHED
            if not (seen and self.skip_duplicate):
                return params, unflatten(params)
            if self._live:
                return None  # wait: a result may move the model

    def _tell(self, token: Any, value: float | None) -> None:
        if value is None:
            return
        if self._buffered is not None:
            self._buffered.append((token, value))
            if len(self._buffered) < self.random_search_steps:
                return
            held, self._buffered = self._buffered, None
            for params, v in held:
                self._register(params, v)
            return
        self._register(token, value)

    def _register(self, params: dict[str, float], value: float) -> None:
        try:
            self.optimizer.register(params=params, target=self._sign * value)
        except KeyError:
            pass  # the library keeps one value per point; a repeat adds nothing


def _refuse_slashes(spec: Any, path: str = "") -> None:
    """A key holding ``/`` is refused, as Ray refuses it: the flat names ``a/b`` of nested
    keys could not be told apart from it."""
    if not isinstance(spec, dict):
        return
    for key, value in spec.items():
        if "/" in str(key):
            raise ValueError(
                f"BayesOptSearch cannot take the param_space key {path + str(key)!r}: a key "
                "may not hold '/', which joins the names of nested keys; rename it"
            )
        _refuse_slashes(value, f"{path}{key}/")
