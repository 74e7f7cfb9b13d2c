"""``AxSearch``: Bayesian optimisation with Ax (the ax-platform package) and BoTorch.

Each Tune trial is one Ax trial of an ``AxClient`` experiment: ``suggest`` asks the client
for the next parameters (``attach_trial`` for ``points_to_evaluate``), and a trial's end
completes the Ax trial with the metric (and the outcome constraints' metrics), or marks it
failed. While Ax's generation strategy wants results before it suggests more (its
parallelism limits), ``suggest`` answers "not now", as Ray Tune's does. The client itself
is the searcher's state, so ``Tuner.restore`` continues the same experiment.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from ..._controller._storage import flatten
from .._library_search import LibrarySearcher, domains_of, import_library, unflatten
from ..sample import Categorical, Float, Integer, is_normal
from ..variant_generator import _walk

__all__ = ["AxSearch"]

logger = logging.getLogger("actorrt.tune")
EXTRA = "ax"
DEFAULT_METRIC = "_metric"  # Ray's name for the metric when only a mode is given
FIXED_TYPES = (str, bool, int, float)  # the constants Ax takes as fixed parameters
PARAMETER_KEYS = {"range": "bounds", "choice": "values", "fixed": "value"}


def _ax_client() -> Any:
    return import_library("ax.service.ax_client", "AxSearch", EXTRA)


def _has_experiment(client: Any) -> bool:
    try:
        client.experiment  # noqa: B018 (raises when no experiment was created)
    except (AssertionError, ValueError):
        return False
    return True


def _check_parameters(space: list[Any]) -> None:
    for i, param in enumerate(space):
        kind = param.get("type") if isinstance(param, Mapping) else None
        if kind not in PARAMETER_KEYS or "name" not in param or PARAMETER_KEYS[kind] not in param:
            raise ValueError(
                f"AxSearch: space[{i}] = {param!r} is not an Ax parameter: each needs a "
                "'name' and a 'type' of 'range' (with 'bounds'), 'choice' (with 'values') or "
                "'fixed' (with 'value')"
            )


class AxSearch(LibrarySearcher):
    """Search with Ax (Ray Tune's ``AxSearch``).

    Args:
        space: Ax parameters (``[{"name": "x", "type": "range", "bounds": [0.0, 1.0]},
            ...]``) or a dict of tune domains; ``None`` (usual): the Tuner's ``param_space``.
        metric, mode: what is optimised (default: ``TuneConfig``'s; a mode alone optimises
            Ray's anonymous ``"_metric"``).
        points_to_evaluate: configs to run first (attached to the experiment as given).
        parameter_constraints: Ax's, such as ``"x1 + x2 <= 2.0"``.
        outcome_constraints: Ax's, such as ``"l2norm <= 1.25"``: each named metric must be
            in a trial's last result too.
        ax_client: an ``AxClient`` to use. If it already has an experiment, the experiment
            gives the space, metric and mode, and none of those may be given here.
        **ax_kwargs: passed to ``AxClient(...)`` (``random_seed``, ``verbose_logging``,
            ``generation_strategy``, ...); not allowed with ``ax_client``.
    """

    NAME = "AxSearch"

    def __init__(
        self,
        space: dict[str, Any] | list[dict[str, Any]] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        parameter_constraints: list[str] | None = None,
        outcome_constraints: list[str] | None = None,
        ax_client: Any = None,
        **ax_kwargs: Any,
    ) -> None:
        module = _ax_client()
        if ax_client is not None:
            if not isinstance(ax_client, module.AxClient):
                raise TypeError(f"AxSearch: ax_client must be an AxClient, got {ax_client!r}")
            if ax_kwargs:
                raise ValueError(
                    f"AxSearch: ax_kwargs {sorted(ax_kwargs)} are for the AxClient AxSearch "
                    "makes; with ax_client=... configure that client instead"
                )
            given = {
                "space": space, "metric": metric, "mode": mode,
                "parameter_constraints": parameter_constraints,
                "outcome_constraints": outcome_constraints,
            }
            if _has_experiment(ax_client) and any(v is not None for v in given.values()):
                raise ValueError(
                    "AxSearch: the AxClient already has an experiment, which gives the search "
                    "space, metric, mode and constraints; do not also pass "
                    f"{sorted(k for k, v in given.items() if v is not None)}"
                )
        if isinstance(space, list):
            _check_parameters(space)
        elif space is not None and not isinstance(space, Mapping):
            raise ValueError(
                f"AxSearch: space must be a list of Ax parameters or a dict of tune domains, "
                f"got {space!r}"
            )
        super().__init__(space, metric, mode, points_to_evaluate)
        self._parameter_constraints = parameter_constraints
        self._outcome_constraints = outcome_constraints
        self._ax = ax_client
        self._ax_kwargs = dict(ax_kwargs)
        self._warned_parallelism = False
        if ax_client is not None and _has_experiment(ax_client):
            # As Ray's: a client with its experiment is all it needs; it suggests at once.
            self._take_experiment_objective()
            self._space = []

    @staticmethod
    def convert_search_space(spec: dict[str, Any]) -> list[dict[str, Any]]:
        """Ax's parameters for a Tune param space, named ``a/b`` when nested: its constants
        as ``fixed`` parameters, then its domains as ``range`` and ``choice`` ones."""
        fixed = [
            {"name": "/".join(str(p) for p in path), "type": "fixed", "value": value}
            for path, value in _walk(dict(spec))
            if path and isinstance(value, FIXED_TYPES)
        ]
        searched = []
        for name, domain in domains_of(spec, "AxSearch"):
            if getattr(domain, "q", None) is not None:
                logger.warning(
                    "AxSearch searches %s without its quantisation (as in Ray): Ax has none",
                    name,
                )
            if isinstance(domain, Float) and not is_normal(domain):
                searched.append({
                    "name": name, "type": "range", "value_type": "float",
                    "bounds": [float(domain.lower), float(domain.upper)],
                    "log_scale": domain.log_base is not None,
                })
            elif isinstance(domain, Integer):
                searched.append({  # the domain's upper bound is excluded, Ax's included
                    "name": name, "type": "range", "value_type": "int",
                    "bounds": [int(domain.lower), int(domain.upper) - 1],
                    "log_scale": bool(domain.log),
                })
            elif isinstance(domain, Categorical):
                searched.append({"name": name, "type": "choice", "values": domain.categories})
            else:
                raise ValueError(
                    f"AxSearch cannot search {name}={domain!r} (as in Ray): use tune.uniform, "
                    "tune.loguniform, tune.randint, tune.lograndint or tune.choice"
                )
        return fixed + searched

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        if self._ready or self._ax is None or not _has_experiment(self._ax):
            return super().set_search_properties(metric, mode, config, **spec)
        # The client's experiment defines the search: only constants may come from Tune.
        self._take_experiment_objective()
        for name, value in (("metric", metric), ("mode", mode)):
            ours = self._metric if name == "metric" else self._mode
            if value is not None and value != ours:
                raise ValueError(
                    f"AxSearch: TuneConfig's {name}={value!r} differs from the AxClient "
                    f"experiment's objective ({name}={ours!r}); give the same, or none"
                )
        self._space = []  # the experiment's; a param space with domains is refused here
        return super().set_search_properties(None, None, config, **spec)

    def _take_experiment_objective(self) -> None:
        objective = self._ax.experiment.optimization_config.objective
        if not objective.is_single_objective:
            raise ValueError(
                "AxSearch supports an experiment with one objective (as Ray's); this one has "
                f"{objective!r}"
            )
        self._metric = objective.metric_names[0]
        self._mode = "min" if objective.minimize else "max"

    def _setup_once(self) -> None:
        if self._metric is None and self._mode is not None and self._ax is None:
            self._metric = DEFAULT_METRIC
        super()._setup_once()

    def _setup(self) -> None:
        module = _ax_client()
        if self._ax is None:
            self._ax = module.AxClient(**self._ax_kwargs)
        if not _has_experiment(self._ax):
            space = self._space
            if isinstance(space, Mapping):  # a dict with no search values: constants only
                space = self.convert_search_space(dict(space))
            self._ax.create_experiment(
                parameters=space,
                objectives={self._metric: module.ObjectiveProperties(
                    minimize=self._mode != "max"
                )},
                parameter_constraints=self._parameter_constraints,
                outcome_constraints=self._outcome_constraints,
            )
        self._take_experiment_objective()
        experiment = self._ax.experiment
        from ax.core.parameter import FixedParameter

        self._fixed = {
            name: p.value for name, p in experiment.parameters.items()
            if isinstance(p, FixedParameter)
        }
        self._outcomes = sorted({
            name for c in experiment.optimization_config.outcome_constraints
            for name in c.metric_names
        } - {self._metric})
        points, self._points = self._points, []
        for i, point in enumerate(points):
            params = {**self._fixed, **flatten(point)}
            try:
                experiment.search_space.check_membership(params, raise_error=True)
            except ValueError as exc:
                raise ValueError(
                    f"AxSearch: points_to_evaluate[{i}] = {point!r} is not in the search "
                    f"space: {exc}"
                ) from None
            self._points.append(params)

    def _ask(self, trial_id: str) -> tuple[Any, dict[str, Any]] | str | None:
        if self._points:
            params, index = self._ax.attach_trial(self._points.pop(0))
            return index, unflatten(params)
        from ax.exceptions.core import DataRequiredError
        from ax.exceptions.generation_strategy import MaxParallelismReachedException

        try:
            params, index = self._ax.get_next_trial()
        except (MaxParallelismReachedException, DataRequiredError) as exc:
            if not self._live:
                raise RuntimeError(
                    f"AxSearch: Ax suggests nothing more and waits for no trial: {exc}"
                ) from exc
            if not self._warned_parallelism:
                self._warned_parallelism = True
                logger.info(
                    "AxSearch: Ax waits for results before it suggests more (%s); trials "
                    "start as results come", exc,
                )
            return None
        return index, unflatten(params)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        if trial_id not in self._live:
            return
        index = self._live.pop(trial_id)
        values: dict[str, float] = {}
        missing = []
        for name in [self._metric, *self._outcomes]:
            value = (result or {}).get(name)
            if isinstance(value, int | float) and math.isfinite(value):
                values[name] = float(value)
            else:
                missing.append(name)
        if error or missing:
            if not error and result is not None:
                logger.warning(
                    "AxSearch: trial %s ended without a finite %s in its last result; Ax "
                    "marks it failed", trial_id, missing,
                )
            self._tell(index, None)
            return
        self._ax.complete_trial(
            trial_index=index, raw_data={n: (v, None) for n, v in values.items()}
        )

    def _tell(self, token: Any, value: float | None) -> None:
        self._ax.log_trial_failure(trial_index=token)
