"""PB2: Population Based Bandits (Parker-Holder et al., 2020), Ray Tune's ``PB2``.

PBT's exploit (the bottom ``quantile_fraction`` restart from the top's checkpoints), with a
model-based explore: at each perturbation point the scheduler records every trial's
(time, reward, hyperparameters); the data is the reward's change per unit of time over each
interval, with the time and the reward at its start. A Gaussian process fit to it predicts
the improvement of hyperparameters from the donor's (time, reward), and the new config is
the one with the highest upper confidence bound within ``hyperparam_bounds``; the configs of
the other running trials count as pending points (they shrink the variance near them), so a
batch of restarts spreads out.

Ray's PB2 fits GPy with a time-varying squared-exponential kernel; this one fits
scikit-learn's Gaussian process (an anisotropic RBF plus white noise) on the same inputs, and
maximises the bound over random candidates, so its choices differ from Ray's for the same
seed. Needs ``pip install 'actorrt[pb2]'`` (scikit-learn, scipy).
"""

from __future__ import annotations

import itertools
import logging
import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from ..search._library_search import import_library, unflatten
from ..search.sample import Float, Integer, is_normal
from .pbt import PopulationBasedTraining

__all__ = ["PB2"]

logger = logging.getLogger("actorrt.tune")
EXTRA = "pb2"
_told = False  # the difference from Ray is said once per process
CANDIDATES = 2000  # random points the upper confidence bound is maximised over
MAX_POINTS = 1000  # the latest data points the GP is fit on (Ray keeps as many)


class PB2(PopulationBasedTraining):
    """Population Based Bandits (Ray Tune's ``PB2``); see the module docstring.

    Args:
        time_attr, metric, mode, perturbation_interval, quantile_fraction,
            custom_explore_fn: as for :class:`PopulationBasedTraining`.
        hyperparam_bounds: ``{"name": [lower, upper]}`` of the continuous (or integer)
            hyperparameters explored; nested dicts allowed. Required.
        log_config: accepted as in Ray (the restarted config is in the trial's params).
        require_attrs: as in Ray: a result without ``time_attr`` or the metric is an error
            (``False``: skipped, with one warning).
        synch: accepted as in Ray; ``True`` (synchronous PB2) is not supported.
        seed: seeds the candidates (not in Ray's signature: an addition).
    """

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        perturbation_interval: float = 60.0,
        hyperparam_bounds: Mapping[str, Any] | None = None,
        quantile_fraction: float = 0.25,
        log_config: bool = True,
        require_attrs: bool = True,
        synch: bool = False,
        custom_explore_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        seed: int | None = None,
    ) -> None:
        import_library("sklearn", "PB2", EXTRA)
        if not hyperparam_bounds:
            raise ValueError("PB2 needs hyperparam_bounds: {'name': [lower, upper], ...}")
        if synch:
            raise ValueError("PB2(synch=True) is not supported; use the default synch=False")
        self.bounds = _flat_bounds(hyperparam_bounds)
        global _told
        if not _told:
            _told = True
            logger.warning(
                "PB2: the bandit's Gaussian process is scikit-learn's (RBF and white noise) "
                "where Ray's PB2 uses GPy's time-varying kernel; its choices differ from Ray's"
            )
        mutations = {  # what PBT's resampling draws from, within the bounds
            name: Float(low, high) for name, (low, high) in self.bounds.items()
        }
        super().__init__(
            time_attr=time_attr, metric=metric, mode=mode,
            perturbation_interval=perturbation_interval,
            hyperparam_mutations=unflatten(mutations), quantile_fraction=quantile_fraction,
            resample_probability=0.0, custom_explore_fn=custom_explore_fn, seed=seed,
            require_attrs=require_attrs,
        )
        self.log_config = log_config
        # (trial id, time, reward, hyperparameter values) at each perturbation point
        self.data: list[tuple[str, float, float, tuple[float, ...]]] = []
        self._last_saved: dict[str, float] = {}

    def _values(self, config: Mapping[str, Any]) -> tuple[float, ...]:
        return tuple(float(_get(config, name)) for name in self.bounds)

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> str:
        if self._metric and self.time_attr in result and self._metric in result:
            t = float(result[self.time_attr])
            last = self._last_saved.get(trial.trial_id, -math.inf)
            if t >= self.burn_in_period and t - last >= self.perturbation_interval:
                self._last_saved[trial.trial_id] = t
                reward = float(result[self._metric]) * (1 if self._mode == "max" else -1)
                self.data.append((trial.trial_id, t, reward, self._values(trial.config)))
        return super().on_trial_result(controller, trial, result)

    def _new_config(self, trial: Any, donor: Any) -> dict[str, Any]:
        new = self.select(donor.trial_id, donor.config, exclude=trial.trial_id)
        if self.custom_explore_fn is not None:
            new = self.custom_explore_fn(new)
        last = [row for row in self.data if row[0] == donor.trial_id]
        if last:  # the restarted trial's next interval starts from the donor's point
            _, t, reward, _ = last[-1]
            self.data.append((trial.trial_id, t, reward, self._values(new)))
            self._last_saved[trial.trial_id] = t
        return new

    def _intervals(self) -> list[tuple[float, float, tuple[float, ...], float]]:
        """(time, reward before, hyperparameters, reward change per unit of time) of each
        interval a trial ran with one config."""
        rows: dict[tuple[str, tuple[float, ...]], list[tuple[float, float]]] = {}
        for trial_id, t, reward, values in sorted(self.data, key=lambda r: r[1]):
            rows.setdefault((trial_id, values), []).append((t, reward))
        out = []
        for (_, values), points in rows.items():
            for (t0, r0), (t1, r1) in itertools.pairwise(points):
                if t1 > t0:
                    out.append((t1, r0, values, (r1 - r0) / (t1 - t0)))
        out.sort(key=lambda r: r[0])
        return out[-MAX_POINTS:]

    def select(
        self, donor_id: str, config: dict[str, Any], exclude: str | None = None
    ) -> dict[str, Any]:
        """The config a trial restarting from ``donor_id`` (with ``config``) gets: the
        GP-UCB choice, or ``config`` unchanged while there is no data for the donor."""
        import numpy as np

        intervals = self._intervals()
        mine = [r for r in self.data if r[0] == donor_id]
        if len(intervals) < 2 or not mine:
            return _copy(config)
        _, t_new, r_new, _ = mine[-1]
        lows = np.array([b[0] for b in self.bounds.values()])
        spans = np.array([b[1] - b[0] for b in self.bounds.values()])
        x = np.array([[t, r, *v] for t, r, v, _ in intervals], dtype=float)
        y = np.array([d for *_, d in intervals], dtype=float)
        head_lo = x[:, :2].min(axis=0)
        head_span = np.maximum(x[:, :2].max(axis=0) - head_lo, 1e-9)

        def scale(t: float, r: float, values: Any) -> Any:
            head = (np.array([t, r]) - head_lo) / head_span
            return np.concatenate([head, (np.asarray(values) - lows) / spans])

        xs = np.array([scale(row[0], row[1], row[2:]) for row in x])
        pending = [
            self._values(other.config) for other_id, other in self._trials.items()
            if other_id not in (exclude, donor_id) and getattr(other, "status", "") == "RUNNING"
        ]
        rng = np.random.default_rng(self._rng.getrandbits(32))
        candidates = rng.random((CANDIDATES, len(self.bounds)))
        head = np.tile(scale(t_new, r_new, lows)[:2], (CANDIDATES, 1))
        best = _ucb_choice(xs, y, np.hstack([head, candidates]), [
            scale(t_new, r_new, p) for p in pending
        ])
        chosen = lows + candidates[best] * spans
        new = _copy(config)
        for name, value in zip(self.bounds, chosen, strict=True):
            old = _get(config, name)
            _set(new, name, round(float(value)) if isinstance(old, int) else float(value))
        return new


def _ucb_choice(x: Any, y: Any, candidates: Any, pending: list[Any]) -> int:
    """The index of the candidate with the highest GP-UCB: the mean of a GP fit to
    ``(x, y)``, and the deviation of the same GP with the pending points added (at their
    predicted values), so running configs are not chosen again."""
    with warnings.catch_warnings():  # the fit's convergence notes are no user's concern
        warnings.simplefilter("ignore")
        return _ucb_index(x, y, candidates, pending)


def _ucb_index(x: Any, y: Any, candidates: Any, pending: list[Any]) -> int:
    import numpy as np
    from sklearn.gaussian_process import (  # type: ignore[import-untyped]
        GaussianProcessRegressor,
    )
    from sklearn.gaussian_process.kernels import (  # type: ignore[import-untyped]
        RBF,
        ConstantKernel,
        WhiteKernel,
    )

    dims = x.shape[1]
    kernel = ConstantKernel(1.0) * RBF(np.ones(dims), (1e-2, 1e2)) + WhiteKernel(1e-2)
    gp = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0)
    gp.fit(x, y)
    mean = gp.predict(candidates)
    spread_gp = gp
    if pending:
        extra = np.array(pending)
        spread_gp = GaussianProcessRegressor(gp.kernel_, normalize_y=True, optimizer=None)
        spread_gp.fit(np.vstack([x, extra]), np.concatenate([y, gp.predict(extra)]))
    _, std = spread_gp.predict(candidates, return_std=True)
    kappa = math.sqrt(0.2 + max(0.0, math.log(0.4 * len(x))))  # grows with the data
    return int(np.argmax(mean + kappa * std * (y.std() or 1.0)))


def _flat_bounds(bounds: Mapping[str, Any], prefix: str = "") -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for key, value in bounds.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flat_bounds(value, f"{name}/"))
        elif isinstance(value, Integer | Float) and not is_normal(value):
            out[name] = (float(value.lower), float(value.upper))
        elif (
            isinstance(value, list | tuple) and len(value) == 2
            and all(isinstance(v, int | float) for v in value) and value[0] < value[1]
        ):
            out[name] = (float(value[0]), float(value[1]))
        else:
            raise ValueError(
                f"hyperparam_bounds[{name!r}] must be [lower, upper] with lower < upper, "
                f"got {value!r}"
            )
    return out


def _get(config: Mapping[str, Any], name: str) -> Any:
    node: Any = config
    for part in name.split("/"):
        node = node[part]
    return node


def _set(config: dict[str, Any], name: str, value: Any) -> None:
    node = config
    *parents, leaf = name.split("/")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value


def _copy(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _copy(v) if isinstance(v, Mapping) else v for k, v in config.items()}
