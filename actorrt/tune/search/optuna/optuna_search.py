"""``OptunaSearch``: Optuna's samplers (TPE by default) through its ask-and-tell interface.

Each trial is one Optuna trial: ``suggest`` asks the study for values of the space's
distributions, results are reported to it as intermediate values (step:
``training_iteration``), and the trial's end is told with its last value of the metric.

Tune's domains become Optuna distributions (upper bounds as Tune has them: ``randint``'s
excluded, ``qrandint``'s included; quantised values stay multiples of ``q`` inside the
bounds, as Tune draws them). ``grid_search``, ``randn``/``qrandn`` and ``qloguniform`` have
no Optuna counterpart and are refused with the name of the parameter; ``sample_from`` values
are computed after Optuna's values, from the config they make.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Mapping
from typing import Any

from ..._controller._storage import flatten
from .._library_search import import_library, param_name, unflatten
from ..sample import Categorical, Domain, Float, Function, Integer, is_normal
from ..searcher import Searcher, overlay
from ..variant_generator import _copy_structure, _is_grid, _walk, resolve_one

__all__ = ["OptunaSearch"]

logger = logging.getLogger("actorrt.tune")

_PRIMITIVE = (type(None), bool, int, float, str)


def _import_optuna() -> Any:
    return import_library("optuna", "OptunaSearch", "optuna")


class _Param:
    """One searched parameter: where it goes in the config, its Optuna distribution, and
    how an Optuna value becomes a config value (and back, for ``points_to_evaluate``)."""

    def __init__(
        self, path: tuple[Any, ...], distribution: Any, choices: list[Any] | None = None
    ) -> None:
        self.path = path
        self.name = param_name(path)
        self.distribution = distribution
        self.choices = choices  # choice() values Optuna cannot store: Optuna holds indices

    def value(self, optuna_value: Any) -> Any:
        return self.choices[optuna_value] if self.choices is not None else optuna_value

    def optuna_value(self, value: Any) -> Any:
        if self.choices is None:
            return value
        for i, choice in enumerate(self.choices):
            if choice == value:
                return i
        raise ValueError(
            f"points_to_evaluate gives {self.name}={value!r}, which is not one of its "
            f"choices {self.choices!r}"
        )


def _quantized_bounds(lower: float, upper: float, q: float) -> tuple[int, int]:
    low, high = math.ceil(lower / q - 1e-9), math.floor(upper / q + 1e-9)
    if low > high:
        raise ValueError(f"no multiple of q={q} lies in [{lower}, {upper}]")
    return low, high


def _convert(path: tuple[Any, ...], domain: Domain, optuna: Any) -> _Param:
    """The Optuna distribution of one Tune domain (``ValueError`` if it has none)."""
    dist = optuna.distributions
    name = param_name(path)
    if is_normal(domain):
        raise ValueError(
            f"OptunaSearch cannot search {name}={domain!r}: Optuna has no normal "
            "distribution; use tune.uniform or tune.loguniform over a range"
        )
    if isinstance(domain, Float):
        if domain.q is not None and domain.log_base is not None:
            raise ValueError(
                f"OptunaSearch cannot search {name}={domain!r}: Optuna has no quantised "
                "log-uniform distribution; use tune.loguniform or tune.quniform"
            )
        if domain.q is not None:
            low, high = _quantized_bounds(domain.lower, domain.upper, domain.q)
            return _Param(path, dist.FloatDistribution(low * domain.q, high * domain.q,
                                                       step=domain.q))
        return _Param(path, dist.FloatDistribution(
            domain.lower, domain.upper, log=domain.log_base is not None
        ))
    if isinstance(domain, Integer):
        # Tune's upper bound is excluded, Optuna's included; a quantized one is included
        # (Ray's rule: the draw rounds to the multiples of q up to upper)
        upper = domain.upper if domain.q is not None else domain.upper - 1
        if domain.q is not None and domain.log:
            raise ValueError(
                f"OptunaSearch cannot search {name}={domain!r}: Optuna has no quantised "
                "log-uniform integers"
            )
        if domain.q is not None:
            low, high = _quantized_bounds(domain.lower, upper, domain.q)
            return _Param(path, dist.IntDistribution(low * domain.q, high * domain.q,
                                                     step=domain.q))
        return _Param(path, dist.IntDistribution(domain.lower, upper, log=domain.log))
    if isinstance(domain, Categorical):
        if all(isinstance(c, _PRIMITIVE) for c in domain.categories):
            return _Param(path, dist.CategoricalDistribution(domain.categories))
        indices = list(range(len(domain.categories)))
        return _Param(path, dist.CategoricalDistribution(indices), list(domain.categories))
    raise ValueError(f"OptunaSearch cannot search {name}={domain!r}: unknown domain")


def _parameters(space: Mapping[str, Any], optuna: Any) -> dict[str, _Param]:
    """The searched parameters of ``space``, by name (``a/b`` for nested keys)."""
    params: dict[str, _Param] = {}
    for path, value in _walk(dict(space)):
        if _is_grid(value):
            raise ValueError(
                f"OptunaSearch cannot take grid_search (at {param_name(path)!r}): Optuna draws "
                "each trial's values itself; use tune.choice([...]) there, or the default "
                "search for a grid"
            )
        if isinstance(value, optuna.distributions.BaseDistribution):
            params[param_name(path)] = _Param(path, value)
        elif isinstance(value, Domain) and not isinstance(value, Function):
            params[param_name(path)] = _convert(path, value, optuna)
    return params


def _has_search_values(space: Mapping[str, Any], optuna: Any) -> list[str]:
    found = []
    for path, value in _walk(dict(space)):
        if _is_grid(value) or isinstance(value, Domain | optuna.distributions.BaseDistribution):
            found.append(param_name(path))
    return found


class OptunaSearch(Searcher):
    """Search with Optuna (Ray Tune's ``OptunaSearch``), through its ask-and-tell interface.

    Args:
        space: the space to search. ``None`` (usual): the Tuner's ``param_space``, whose Tune
            domains are converted. Else a dict of Tune domains or Optuna distributions
            (nested dicts become ``a/b`` parameter names), or a define-by-run function
            ``space(optuna_trial) -> dict | None`` that calls ``optuna_trial.suggest_*``
            and may return constants to add to the config. With a ``space`` here, the
            ``param_space`` may hold only constants (they are added to every config).
        metric: the metric to optimise (default: ``TuneConfig.metric``); a list of
            metrics makes a multi-objective study (one direction per metric).
        mode: ``"min"`` or ``"max"`` (default: ``TuneConfig.mode``); with a list of
            metrics, a list of modes as long.
        sampler: an ``optuna.samplers.BaseSampler`` (default: ``TPESampler(seed=seed)``).
        study_name: the Optuna study's name (default ``"optuna"``, as Ray's). With a
            ``storage`` that already holds a study of that name, the sweep continues it
            (``load_if_exists``, as in Ray); its directions must be this search's.
        storage: where Optuna keeps the study: an ``optuna.storages.BaseStorage`` (e.g.
            ``RDBStorage("sqlite:///optuna.db")``) or an RDB URL string (default: in
            memory). Each ask, report and tell is written there as it happens, so
            ``optuna.load_study`` and optuna-dashboard read the study while it runs, and
            ``Tuner.restore`` continues the same study.
        seed: the default sampler's seed (default: ``TuneConfig.seed``); with a ``sampler``,
            give it the seed instead.
        points_to_evaluate: configs (possibly partial) to evaluate first, enqueued in the
            study; what they leave out is sampled.
        evaluated_rewards: the known values of ``points_to_evaluate`` (one per point; a
            list per point for multi-objective): the points are added to the study as
            finished trials and not run. They must be complete configs.

    Each Tune trial is an Optuna trial. Results are reported to it as intermediate values
    (step ``training_iteration``); its end is told as: finished with a value of the metric:
    ``COMPLETE``; errored after reporting the metric: ``PRUNED`` (Optuna keeps its last
    intermediate value); otherwise (errored before, or never reported the metric, or a
    non-finite last value): ``FAIL``, which samplers ignore.

    Optuna draws from what it has been told, so give it few trials at once: the controller
    suggests one trial at a time for any searcher but the default; cap running trials with
    ``TuneConfig(max_concurrent_trials=...)`` (a ``ConcurrencyLimiter``). The number of
    trials is ``TuneConfig.num_samples``. The study is ``self.study`` (``study.trials``,
    ``study.best_params``).

    Raises:
        ImportError: optuna is not installed.
        ValueError: a bad argument; at the Tuner's start, a parameter Optuna cannot search
            (``grid_search``, ``randn``, ``qloguniform``), no metric or mode, or a space
            given both here and in ``param_space``.
    """

    def __init__(
        self,
        space: dict[str, Any] | Callable[[Any], dict[str, Any] | None] | None = None,
        metric: str | list[str] | None = None,
        mode: str | list[str] | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        sampler: Any = None,
        study_name: str | None = None,
        storage: Any = None,
        seed: int | None = None,
        evaluated_rewards: list[Any] | None = None,
    ) -> None:
        optuna = _import_optuna()
        self._objectives: list[tuple[str, str]] | None = None
        if isinstance(metric, list) or isinstance(mode, list):
            if not (
                isinstance(metric, list) and isinstance(mode, list) and metric
                and len(metric) == len(mode)
            ):
                raise ValueError(
                    f"a multi-objective OptunaSearch needs a list of metrics and a list of "
                    f"modes as long, got metric={metric!r}, mode={mode!r}"
                )
            for m in mode:
                if m not in ("min", "max"):
                    raise ValueError(f"each mode must be 'min' or 'max', got {m!r} in {mode!r}")
            self._objectives = list(zip(metric, mode, strict=True))
            metric, mode = metric[0], mode[0]
        super().__init__(metric=metric, mode=mode)
        if mode not in (None, "min", "max"):
            raise ValueError(f"mode must be 'min', 'max' or None, got {mode!r}")
        if evaluated_rewards is not None and (
            not isinstance(evaluated_rewards, list)
            or len(evaluated_rewards) != len(points_to_evaluate or [])
        ):
            raise ValueError(
                f"evaluated_rewards must be a list with one value per point of "
                f"points_to_evaluate ({len(points_to_evaluate or [])}), got "
                f"{evaluated_rewards!r}"
            )
        self.evaluated_rewards = evaluated_rewards
        if sampler is not None and not isinstance(sampler, optuna.samplers.BaseSampler):
            raise ValueError(f"sampler must be an optuna.samplers.BaseSampler, got {sampler!r}")
        if sampler is not None and seed is not None:
            raise ValueError(
                f"OptunaSearch got both a sampler and seed={seed!r}; give the seed to the "
                "sampler (e.g. TPESampler(seed=...))"
            )
        if storage is not None and not isinstance(storage, str | optuna.storages.BaseStorage):
            raise ValueError(
                f"storage must be an optuna.storages.BaseStorage or an RDB URL, got {storage!r}"
            )
        if study_name is not None and not isinstance(study_name, str):
            raise ValueError(f"study_name must be a string, got {study_name!r}")
        self._study_name = study_name or "optuna"  # Ray's default name
        self._storage = storage
        if space is not None and not (isinstance(space, dict) or callable(space)):
            raise ValueError(
                f"space must be a dict or a function of an optuna trial, got {space!r}"
            )
        self._space = space
        self._define_by_run = callable(space) and not isinstance(space, dict)
        self._params: dict[str, _Param] = (
            _parameters(space, optuna) if isinstance(space, dict) else {}
        )
        self._constants: dict[str, Any] = {}
        self._sampler = sampler
        self._seed = seed
        self.points_to_evaluate = list(points_to_evaluate or [])
        self.study: Any = None
        self._trials: dict[str, Any] = {}  # Tune trial id -> Optuna trial
        self._steps: dict[str, int] = {}  # the last step reported, per trial

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        optuna = _import_optuna()
        super().set_search_properties(metric, mode, config)
        if self._space is None:
            self._params = _parameters(config, optuna)
            self._constants = dict(config)
        else:
            searched = _has_search_values(config, optuna)
            if searched:
                raise ValueError(
                    f"OptunaSearch was given a space, and param_space also has search "
                    f"values at {searched}; give the search space in one place"
                )
            self._constants = dict(config)
        if self._seed is None and self._sampler is None:
            self._seed = spec.get("seed")
        self._make_study()
        return True

    def _make_study(self) -> None:
        if self.study is not None:
            return
        if self._metric is None or self._mode is None:
            raise ValueError(
                f"OptunaSearch needs a metric and a mode (got metric={self._metric!r}, "
                f"mode={self._mode!r}): pass them to OptunaSearch(metric=..., mode=...) or "
                "TuneConfig(metric=..., mode=...)"
            )
        if not self._params and not self._define_by_run:
            raise ValueError(
                "OptunaSearch has nothing to search: the space has no tune domains "
                "(tune.uniform, tune.choice, ...) or Optuna distributions"
            )
        optuna = _import_optuna()
        sampler = self._sampler or optuna.samplers.TPESampler(seed=self._seed)
        modes = [m for _, m in self._objectives] if self._objectives else [self._mode]
        directions = ["minimize" if m == "min" else "maximize" for m in modes]
        self.study = optuna.create_study(
            storage=self._storage, sampler=sampler, study_name=self._study_name,
            load_if_exists=True, directions=directions,
        )
        found = [d.name.lower() for d in self.study.directions]
        if found != directions:
            study, self.study = self.study, None
            raise ValueError(
                f"OptunaSearch: the study {study.study_name!r} in {self._storage!r} "
                f"optimises {found}, this search {directions}: use another study_name"
            )
        if self.evaluated_rewards is None:
            for point in self.points_to_evaluate:
                self.study.enqueue_trial(self._point_params(point))
            return
        for point, reward in zip(self.points_to_evaluate, self.evaluated_rewards, strict=True):
            params = self._point_params(point)
            missing = sorted(set(self._params) - set(params))
            if missing or self._define_by_run:
                raise ValueError(
                    f"evaluated_rewards needs complete points of a dict space; {point!r} "
                    f"misses {missing}" if missing else
                    "evaluated_rewards cannot be used with a define-by-run space"
                )
            values = list(reward) if isinstance(reward, list | tuple) else [reward]
            if len(values) != len(directions):
                raise ValueError(
                    f"evaluated_rewards: {reward!r} gives {len(values)} value(s) for "
                    f"{len(directions)} objective(s)"
                )
            self.study.add_trial(optuna.trial.create_trial(
                params=params,
                distributions={n: self._params[n].distribution for n in params},
                values=[float(v) for v in values],
            ))

    @staticmethod
    def convert_search_space(spec: dict[str, Any]) -> dict[str, Any]:
        """Optuna's form of a Tune param space: ``{"a/b": distribution}`` (a ``choice``
        of values Optuna cannot store becomes a distribution of their indices)."""
        optuna = _import_optuna()
        return {name: p.distribution for name, p in _parameters(spec, optuna).items()}

    def _point_params(self, point: Mapping[str, Any]) -> dict[str, Any]:
        flat = flatten(point)
        if self._define_by_run:
            return flat
        unknown = sorted(set(flat) - set(self._params))
        if unknown:
            raise ValueError(
                f"points_to_evaluate names {unknown}, which are not searched parameters "
                f"(those are {sorted(self._params)})"
            )
        return {name: self._params[name].optuna_value(v) for name, v in flat.items()}

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        self._make_study()
        if self._define_by_run:
            assert callable(self._space)
            ot_trial = self.study.ask()
            extra = self._space(ot_trial)
            if extra is not None and not isinstance(extra, Mapping):
                raise TypeError(
                    f"the define-by-run space function must return a dict or None, "
                    f"got {extra!r}"
                )
            values = unflatten({**ot_trial.params, **(extra or {})})
            config = overlay(self._constants, values)
        else:
            ot_trial = self.study.ask({p.name: p.distribution for p in self._params.values()})
            config = _copy_structure(self._constants)
            for param in self._params.values():
                _put(config, param.path, param.value(ot_trial.params[param.name]))
            # sample_from values (and any constant structure) resolved from the config.
            resolved = resolve_one(config, {}, random.Random(ot_trial.number))
            assert isinstance(resolved, dict)
            config = resolved
        self._trials[trial_id] = ot_trial
        return config

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        ot_trial = self._trials.get(trial_id)
        if self._objectives:
            return  # Optuna keeps no intermediate values of a multi-objective study
        value = result.get(self._metric) if self._metric else None
        step = result.get("training_iteration")
        if ot_trial is None or not isinstance(value, int | float) or not isinstance(step, int):
            return
        if step <= self._steps.get(trial_id, 0):
            return  # a retry reporting again from its checkpoint: Optuna has these steps
        self._steps[trial_id] = step
        ot_trial.report(float(value), step)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        ot_trial = self._trials.pop(trial_id, None)
        reported = self._steps.pop(trial_id, None) is not None
        if ot_trial is None:
            return
        state = _import_optuna().trial.TrialState
        if self._objectives:
            got = [(result or {}).get(m) for m, _ in self._objectives]
            if not error and all(
                isinstance(v, int | float) and math.isfinite(v) for v in got
            ):
                self.study.tell(ot_trial, [float(v) for v in got])  # type: ignore[arg-type]
            else:
                self.study.tell(ot_trial, state=state.FAIL)
            return
        value = (result or {}).get(self._metric) if self._metric else None
        if isinstance(value, int | float) and math.isfinite(value) and not error:
            self.study.tell(ot_trial, float(value))
        elif error and reported:
            self.study.tell(ot_trial, state=state.PRUNED)
        else:
            self.study.tell(ot_trial, state=state.FAIL)

    def set_state(self, state: Any) -> None:
        super().set_state(state)
        if self.study is None or not self._trials:
            return
        # The study's storage may be ahead of the saved state (an RDB storage is written
        # as results come): resume each live trial's steps from what the study holds.
        running = {
            t.number: t for t in self.study.get_trials(
                deepcopy=False, states=(_import_optuna().trial.TrialState.RUNNING,)
            )
        }
        for trial_id, ot_trial in self._trials.items():
            held = running.get(ot_trial.number)
            if held is not None and held.intermediate_values:
                self._steps[trial_id] = max(held.intermediate_values)

    @property
    def metric(self) -> Any:
        """The metric, or the list of metrics of a multi-objective search."""
        return [m for m, _ in self._objectives] if self._objectives else self._metric

    @property
    def mode(self) -> Any:
        return [m for _, m in self._objectives] if self._objectives else self._mode

    def __repr__(self) -> str:
        return f"OptunaSearch(metric={self.metric!r}, mode={self.mode!r})"


def _put(config: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    """Set ``value`` at ``path``, making the dicts on the way that are missing (a space
    given to OptunaSearch need not have its structure in ``param_space``)."""
    node: Any = config
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
    node[path[-1]] = value
