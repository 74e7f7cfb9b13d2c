"""Population Based Training: exploit the best trials' checkpoints, explore by perturbing.

Every ``perturbation_interval`` (in ``time_attr`` units), a trial in the bottom
``quantile_fraction`` of the population (by its latest score) is restarted from the latest
checkpoint of a trial in the top fraction, with that trial's config explored: each value named
in ``hyperparam_mutations`` is resampled (with ``resample_probability``) or perturbed (numbers
times a factor of ``perturbation_factors``; list values move to a neighbour). The restart
happens inside the same trial actor and reservation: its current attempt ends at its next
``tune.report`` (``tune.StopTrial``), and a new attempt starts from the copied checkpoint, so
``training_iteration`` continues from the donor's. Trainables must report checkpoints.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Mapping
from typing import Any

from ..search.sample import Domain, Function
from .trial_scheduler import TrialScheduler

__all__ = ["PopulationBasedTraining"]

logger = logging.getLogger("actorrt.tune")


class _State:
    def __init__(self) -> None:
        self.last_perturbation = 0.0
        self.score: float | None = None


def _finished(trial: Any) -> bool:
    """Whether ``trial`` has ended for good, or ends at the result it just gave."""
    status = getattr(trial, "status", None)
    last = getattr(trial, "last_result", None) or {}
    return status in ("TERMINATED", "ERROR") or bool(last.get("done"))


class PopulationBasedTraining(TrialScheduler):
    """PBT (Jaderberg et al., 2017), Ray Tune's ``PopulationBasedTraining``.

    Args:
        time_attr: the result key that measures progress.
        metric, mode: what is optimised (default: ``TuneConfig``'s).
        perturbation_interval: how often (in ``time_attr``) a trial may be exploited.
        burn_in_period: no exploitation before this much ``time_attr``.
        hyperparam_mutations: ``{key: list | domain | callable}`` (nested dicts allowed):
            what explore may change, and how to resample it.
        quantile_fraction: the share of trials at the bottom (exploited) and the top
            (donors); at most half.
        resample_probability: the chance to resample a value instead of perturbing it.
        perturbation_factors: the factors a number is multiplied by when perturbed.
        custom_explore_fn: ``config -> config``, applied after the mutations.
        seed: seeds the choices.
        require_attrs: a result without ``time_attr`` or the metric ends the experiment with
            a ``RuntimeError`` (as in Ray); ``False``: such results are skipped, with one
            warning.
        log_config: accepted as in Ray; Ray's policy files (``pbt_global.txt``,
            ``pbt_policy_*.txt``) are not written: each restarted config is in the trial's
            params and results.
        synch: accepted as in Ray; ``True`` (synchronous PBT) is a ``ValueError``.
    """

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        perturbation_interval: float = 60.0,
        burn_in_period: float = 0.0,
        hyperparam_mutations: Mapping[str, Any] | None = None,
        quantile_fraction: float = 0.25,
        resample_probability: float = 0.25,
        perturbation_factors: tuple[float, float] = (1.2, 0.8),
        custom_explore_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        seed: int | None = None,
        require_attrs: bool = True,
        log_config: bool = True,
        synch: bool = False,
    ) -> None:
        super().__init__(metric, mode)
        if synch:
            raise ValueError(
                "PopulationBasedTraining(synch=True) (synchronous PBT) is not supported; use "
                "the default synch=False (see docs/porting.md)"
            )
        self.log_config = log_config
        if not perturbation_interval > 0:
            raise ValueError(
                f"perturbation_interval must be positive, got {perturbation_interval!r}"
            )
        if not 0 <= quantile_fraction <= 0.5:
            raise ValueError(f"quantile_fraction must be within 0..0.5, got {quantile_fraction!r}")
        if not 0 <= resample_probability <= 1:
            raise ValueError(
                f"resample_probability must be within 0..1, got {resample_probability!r}"
            )
        if not hyperparam_mutations and custom_explore_fn is None:
            raise ValueError(
                "PopulationBasedTraining needs hyperparam_mutations or custom_explore_fn: "
                "something to explore"
            )
        self.time_attr = time_attr
        self.perturbation_interval = perturbation_interval
        self.burn_in_period = burn_in_period
        self.hyperparam_mutations = dict(hyperparam_mutations or {})
        self.quantile_fraction = quantile_fraction
        self.resample_probability = resample_probability
        self.perturbation_factors = perturbation_factors
        self.custom_explore_fn = custom_explore_fn
        self._rng = random.Random(seed)
        self._state: dict[str, _State] = {}
        self._trials: dict[str, Any] = {}
        self.num_exploits = 0
        self.require_attrs = require_attrs
        self._warned_missing = False

    def _without(self, missing: list[str], trial: Any, result: dict[str, Any]) -> str:
        """A result that lacks ``missing`` (time_attr or the metric): Ray's ``require_attrs``."""
        name = type(self).__name__
        what = (
            f"{name}: trial {getattr(trial, 'trial_id', trial)}'s result has no {missing} "
            f"(its keys: {sorted(result)})"
        )
        if self.require_attrs:
            raise RuntimeError(
                f"{what}; report them, or pass {name}(require_attrs=False) to skip such results"
            )
        if not self._warned_missing:
            self._warned_missing = True
            logger.warning("%s; skipped (require_attrs=False)", what)
        return self.CONTINUE

    def on_trial_add(self, controller: Any, trial: Any) -> None:
        self._state[trial.trial_id] = _State()
        self._trials[trial.trial_id] = trial

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> str:
        if self._metric is None or self._mode is None:
            raise ValueError(
                "PopulationBasedTraining needs a metric and a mode: pass them to it or to "
                "TuneConfig"
            )
        missing = [k for k in (self.time_attr, self._metric) if k not in result]
        if missing:
            return self._without(missing, trial, result)
        if trial.trial_id not in self._state:
            self.on_trial_add(controller, trial)
        state = self._state[trial.trial_id]
        t = float(result[self.time_attr])
        state.score = float(result[self._metric]) * (1 if self._mode == "max" else -1)
        if t < self.burn_in_period or t - state.last_perturbation < self.perturbation_interval:
            return self.CONTINUE
        state.last_perturbation = t
        lower, upper = self._quantiles()
        if trial.trial_id not in lower:
            return self.CONTINUE
        donors = [self._trials[d] for d in upper if self._trials[d].checkpoint is not None]
        if not donors:
            return self.CONTINUE
        donor = self._rng.choice(donors)
        trial.restart_from(self._new_config(trial, donor), donor)
        self.num_exploits += 1
        return self.PAUSE

    def _quantiles(self) -> tuple[list[str], list[str]]:
        # Finished trials are out of the population, as in Ray: never exploited, never
        # donors (cloning one would run the clone past its stop criteria).
        scored = sorted(
            (s.score, trial_id)
            for trial_id, s in self._state.items()
            if s.score is not None and not _finished(self._trials[trial_id])
        )
        if len(scored) < 2:
            return [], []
        count = min(math.ceil(len(scored) * self.quantile_fraction), len(scored) // 2)
        return [t for _, t in scored[:count]], [t for _, t in scored[-count:]]

    def _new_config(self, trial: Any, donor: Any) -> dict[str, Any]:
        """The config ``trial`` restarts with from ``donor``'s checkpoint (PB2 overrides)."""
        return self.explore(donor.config)

    def explore(self, config: dict[str, Any]) -> dict[str, Any]:
        """A new config from ``config``: mutated where ``hyperparam_mutations`` says."""
        new = self._mutate(config, self.hyperparam_mutations)
        if self.custom_explore_fn is not None:
            new = self.custom_explore_fn(new)
        return new

    def _mutate(self, config: dict[str, Any], mutations: Mapping[str, Any]) -> dict[str, Any]:
        new = dict(config)
        for key, spec in mutations.items():
            if isinstance(spec, Mapping):
                new[key] = self._mutate(dict(config.get(key) or {}), spec)
                continue
            value = config.get(key)
            if isinstance(spec, list | tuple):
                if value not in spec or self._rng.random() < self.resample_probability:
                    new[key] = self._rng.choice(list(spec))
                else:
                    i = list(spec).index(value) + self._rng.choice((-1, 1))
                    new[key] = spec[min(max(i, 0), len(spec) - 1)]
            elif self._rng.random() < self.resample_probability or not isinstance(
                value, int | float
            ):
                new[key] = self._resample(key, spec)
            else:
                factor = self._rng.choice(self.perturbation_factors)
                new[key] = type(value)(value * factor)
        return new

    def _resample(self, key: str, spec: Any) -> Any:
        if isinstance(spec, Domain) and not isinstance(spec, Function):
            return spec._draw(self._rng)
        if callable(spec):
            return spec()
        raise ValueError(
            f"hyperparam_mutations[{key!r}] must be a list, a tune domain or a callable, "
            f"got {spec!r}"
        )

    def on_trial_complete(self, controller: Any, trial: Any, result: dict[str, Any]) -> None:
        self._state.pop(trial.trial_id, None)

    def on_trial_error(self, controller: Any, trial: Any) -> None:
        self._state.pop(trial.trial_id, None)
