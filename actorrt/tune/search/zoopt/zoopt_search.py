"""``ZOOptSearch``: ZOOpt's sequential RACOS (a classification-based derivative-free search).

ZOOpt's ``SRacosTune`` is made for Tune: ``suggest()`` gives a solution, or ``None`` while
its first ``budget``-sized sample waits for results, and ``complete(solution, value)`` tells
it the value (ZOOpt minimises: ``mode="max"`` values are negated). ZOOpt draws from numpy's
global random state, so the searcher's saved state includes that state.
"""

from __future__ import annotations

import logging
from typing import Any

from ..._controller._storage import flatten
from .._library_search import LibrarySearcher, domains_of, import_library, join_plain, unflatten
from ..hyperopt.hyperopt_search import _plain
from ..sample import Categorical, Float, Integer, is_normal
from ..searcher import Searcher

__all__ = ["ZOOptSearch"]

logger = logging.getLogger("actorrt.tune")
EXTRA = "zoopt"


def _zoopt() -> Any:
    return import_library("zoopt", "ZOOptSearch", EXTRA)


class ZOOptSearch(LibrarySearcher):
    """Search with ZOOpt (Ray Tune's ``ZOOptSearch``).

    Args:
        algo: ``"asracos"`` (default) or ``"sracos"``: both are ZOOpt's ``SRacosTune``.
        budget: how many trials ZOOpt plans (required).
        dim_dict: the space in ZOOpt's form ``{"name": (ValueType.CONTINUOUS, [lo, hi],
            precision) | (ValueType.DISCRETE, [lo, hi], ordered) | (ValueType.GRID,
            [choices])}``; ``None`` (usual): the Tuner's ``param_space``, converted.
        metric, mode: what is optimised (default: ``TuneConfig``'s).
        points_to_evaluate: complete configs ZOOpt takes as its first samples.
        parallel_num: how many trials ZOOpt lets run at once.
        **kwargs: more arguments for ``zoopt.Parameter`` (e.g. ``seed``).

    A trial that fails is told as the worst value seen so far (Ray tells ZOOpt nothing, which
    leaves its slot taken for good).
    """

    NAME = "ZOOptSearch"
    JOINS = True

    def __init__(
        self,
        algo: str = "asracos",
        budget: int | None = None,
        dim_dict: dict[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        parallel_num: int = 1,
        **kwargs: Any,
    ) -> None:
        _zoopt()
        if algo.lower() not in ("asracos", "sracos"):
            raise ValueError(f"algo must be 'asracos' or 'sracos', got {algo!r}")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ValueError(f"ZOOptSearch needs budget, a positive int; got {budget!r}")
        if isinstance(parallel_num, bool) or not isinstance(parallel_num, int) or (
            parallel_num < 1
        ):
            raise ValueError(f"parallel_num must be a positive int, got {parallel_num!r}")
        super().__init__(dim_dict, metric, mode, points_to_evaluate)
        self.algo = algo
        self.budget = budget
        self.parallel_num = parallel_num
        self.kwargs = kwargs
        self._worst: float | None = None
        self._np_state: Any = None

    @staticmethod
    def convert_search_space(spec: dict[str, Any], join: bool = False) -> dict[str, Any]:
        """ZOOpt's ``dim_dict`` of a Tune param space (names ``a/b``); with ``join``, the
        space's other values (ZOOpt's own dimensions) are kept beside them."""
        value_type = _zoopt().ValueType
        out: dict[str, Any] = {}
        for name, domain in domains_of(spec, "ZOOptSearch"):
            uniform = not (getattr(domain, "log_base", None) or getattr(domain, "log", False))
            q = getattr(domain, "q", None)
            if isinstance(domain, Float) and uniform and not is_normal(domain):
                # As Ray: a quantized uniform float is searched to the step's precision.
                out[name] = (value_type.CONTINUOUS, [domain.lower, domain.upper], q or 1e-10)
            elif isinstance(domain, Integer) and uniform and q is None:
                out[name] = (value_type.DISCRETE, [domain.lower, domain.upper - 1], True)
            elif isinstance(domain, Categorical):
                out[name] = (value_type.GRID, list(domain.categories))
            else:
                raise ValueError(
                    f"ZOOptSearch cannot search {name}={domain!r}: ZOOpt takes uniform "
                    "floats (quantized too), uniform integers and choices (as in Ray)"
                )
        return join_plain(spec, out) if join else out

    def _setup(self) -> None:
        zoopt = _zoopt()
        from zoopt.algos.opt_algorithms.racos.sracos import SRacosTune

        flat = flatten(self._space)
        self._keys = list(flat)
        init = None
        if self._points:
            init = []
            for point in self._points:
                values = flatten(point)
                if set(values) != set(self._keys):
                    raise ValueError(
                        f"ZOOptSearch: each of points_to_evaluate must give exactly the "
                        f"searched parameters {sorted(self._keys)}, got {sorted(values)}"
                    )
                init.append([values[k] for k in self._keys])
        dimension = zoopt.Dimension2([flat[k] for k in self._keys])
        parameter = zoopt.Parameter(budget=self.budget, init_samples=init, **self.kwargs)
        self.optimizer = SRacosTune(
            dimension=dimension, parameter=parameter, parallel_num=self.parallel_num
        )

    def _ask(self, trial_id: str) -> tuple[Any, dict[str, Any]] | str | None:
        solution = self.optimizer.suggest()
        opt = self.optimizer
        if solution is None and not self._live and (
            opt.complete_num >= opt._parameter.get_train_size()
        ):
            # Its first sample is all told and nothing runs: ZOOpt's gate, shut when asked
            # once more after that sample, would stay shut. Open it and ask again.
            opt.semaphore = 1
            solution = opt.suggest()
        if solution == "FINISHED":
            return Searcher.FINISHED
        if solution is None:
            return None  # ZOOpt waits for results
        values = dict(zip(self._keys, solution.get_x(), strict=True))
        return solution, unflatten(_plain(values))

    def _tell(self, token: Any, value: float | None) -> None:
        if value is not None:
            loss = -self._sign * value
            self._worst = loss if self._worst is None else max(self._worst, loss)
        else:
            loss = self._worst if self._worst is not None else 0.0
        self.optimizer.complete(token, loss)

    def get_state(self) -> Any:
        import numpy as np

        state = dict(vars(self))
        state["_np_state"] = np.random.get_state()  # ZOOpt's draws come from it
        return state

    def set_state(self, state: Any) -> None:
        import numpy as np

        vars(self).update(state)
        if state.get("_np_state") is not None:
            np.random.set_state(state["_np_state"])
