"""``NevergradSearch``: Nevergrad's gradient-free optimisers through ask and tell.

Each Tune trial is one ``optimizer.ask()`` candidate; its end tells the candidate's loss (the
metric, negated for ``mode="max"``: Nevergrad minimises). A trial that fails or never
reports the metric is not told, as in Ray Tune.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from .._library_search import LibrarySearcher, domains_of, import_library, unflatten
from ..hyperopt.hyperopt_search import _plain
from ..sample import Categorical, Float, Integer, is_normal

__all__ = ["NevergradSearch"]

logger = logging.getLogger("actorrt.tune.search")

EXTRA = "nevergrad"


def _ng() -> Any:
    return import_library("nevergrad", "NevergradSearch", EXTRA)


class NevergradSearch(LibrarySearcher):
    """Search with a Nevergrad optimiser (Ray Tune's ``NevergradSearch``).

    Args:
        optimizer: an optimiser class or configured optimiser (``ng.optimizers.OnePlusOne``,
            ``ng.optimizers.NGOpt``...), built here over the space; or an optimiser instance,
            which brings its own parametrization (then give no ``space``).
        optimizer_kwargs: more arguments for building the optimiser (``budget=...``).
        space: an ``ng.p.Dict`` or ``ng.p.Instrumentation`` (keyword arguments), or a dict
            of Tune domains; ``None`` (usual): the Tuner's ``param_space``.
        metric, mode: what is optimised (default: ``TuneConfig``'s).
        points_to_evaluate: complete configs to run first (``optimizer.suggest``).

    With ``TuneConfig(seed=...)`` and a space built here, the parametrization's random
    state is seeded with it (Ray leaves seeding to the user's parametrization).
    """

    NAME = "NevergradSearch"

    def __init__(
        self,
        optimizer: Any = None,
        optimizer_kwargs: dict[str, Any] | None = None,
        space: Any = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
    ) -> None:
        ng = _ng()
        base = ng.optimizers.base
        if optimizer is None:
            raise ValueError(
                "NevergradSearch needs an optimizer: e.g. "
                "NevergradSearch(optimizer=ng.optimizers.OnePlusOne)"
            )
        self._instance = isinstance(optimizer, base.Optimizer)
        if self._instance:
            if space is not None:
                raise ValueError(
                    "NevergradSearch got an optimizer instance and a space: an instance "
                    "brings its parametrization; pass the optimizer's class to search a space"
                )
            if optimizer_kwargs:
                raise ValueError("optimizer_kwargs apply to an optimizer class, not an instance")
            space = optimizer.parametrization
        elif not (isinstance(optimizer, base.ConfiguredOptimizer) or (
            isinstance(optimizer, type) and issubclass(optimizer, base.Optimizer)
        )):
            raise ValueError(
                f"optimizer must be a Nevergrad optimizer class, configured optimizer or "
                f"instance, got {optimizer!r}"
            )
        super().__init__(space, metric, mode, points_to_evaluate)
        self._factory = optimizer
        self._optimizer_kwargs = dict(optimizer_kwargs or {})
        self._nevergrad_opt: Any = optimizer if self._instance else None

    @staticmethod
    def convert_search_space(spec: dict[str, Any]) -> Any:
        """Nevergrad's form of a Tune param space: an ``ng.p.Dict`` keyed ``a/b``."""
        ng = _ng()
        params: dict[str, Any] = {}
        for name, domain in domains_of(spec, "NevergradSearch"):
            if is_normal(domain):
                raise ValueError(
                    f"NevergradSearch cannot search {name}={domain!r}: Nevergrad has no "
                    "normal sampling (as in Ray)"
                )
            if getattr(domain, "q", None) is not None:
                logger.warning(
                    "Nevergrad does not support quantization. Dropped quantization "
                    "(%s=%r is searched without its step).", name, domain,
                )
            if isinstance(domain, Float):
                params[name] = (
                    ng.p.Log(lower=domain.lower, upper=domain.upper) if domain.log_base
                    else ng.p.Scalar(lower=domain.lower, upper=domain.upper)
                )
            elif isinstance(domain, Integer):
                make = ng.p.Log if domain.log else ng.p.Scalar
                params[name] = make(
                    lower=domain.lower, upper=domain.upper - 1
                ).set_integer_casting()
            elif isinstance(domain, Categorical):
                params[name] = ng.p.Choice(list(domain.categories))
            else:
                raise ValueError(f"NevergradSearch cannot search {name}={domain!r}")
        return ng.p.Dict(**params)

    def _setup(self) -> None:
        ng = _ng()
        if not isinstance(self._space, ng.p.Parameter):
            raise ValueError(
                f"NevergradSearch: the space must be an ng.p.Dict or ng.p.Instrumentation "
                f"(or Tune domains), got {self._space!r}"
            )
        seed = getattr(self, "_spec", {}).get("seed")
        if self._nevergrad_opt is None:
            if seed is not None:
                self._space.random_state.seed(seed)
            self._nevergrad_opt = self._factory(
                parametrization=self._space, **self._optimizer_kwargs
            )

    def _ask(self, trial_id: str) -> tuple[Any, dict[str, Any]] | str | None:
        if self._points:  # one at a time, just before its ask (Nevergrad stacks them)
            point = self._points.pop(0)
            if isinstance(self._space, _ng().p.Instrumentation):
                self._nevergrad_opt.suggest(**point)
            else:
                self._nevergrad_opt.suggest(dict(point))
        candidate = self._nevergrad_opt.ask()
        if candidate.kwargs and not candidate.args:
            values = dict(candidate.kwargs)
        elif isinstance(candidate.value, Mapping):
            values = dict(candidate.value)
        else:
            raise ValueError(
                "NevergradSearch needs a parametrization of named values (ng.p.Dict, or "
                f"ng.p.Instrumentation of keyword arguments), got {candidate!r}"
            )
        return candidate, unflatten(_plain(values))

    def _tell(self, token: Any, value: float | None) -> None:
        if value is None or not math.isfinite(value):
            return
        self._nevergrad_opt.tell(token, -self._sign * value)

    @property
    def optimizer(self) -> Any:
        """The Nevergrad optimiser (``None`` before the Tuner's start)."""
        return self._nevergrad_opt
