"""``TuneBOHB``: BOHB's model (Falkner, Klein and Hutter, 2018) over a ConfigSpace space.

Ray Tune's ``TuneBOHB`` drives hpbandster's BOHB config generator. hpbandster is
unmaintained (its last release is from 2019) and pulls Pyro4, serpent and netifaces, which do
not install cleanly on current Pythons, so this module implements the same model here:

- every result is an observation of (config, budget, loss), the budget being the
  ``hyperband_info["budget"]`` that :class:`HyperBandForBOHB` puts in results (else the
  ``training_iteration``);
- a new config is, with probability ``random_fraction`` or while no budget has enough
  observations, a random draw from the ConfigSpace; otherwise it comes from the largest budget
  with enough observations: its best ``top_n_percent`` form the "good" kernel density, the rest
  the "bad" one (product kernels on ConfigSpace's [0, 1] vectors: Gaussian for numbers,
  Aitchison-Aitken for categories, bandwidths by Scott's rule, no narrower than
  ``min_bandwidth``); ``num_samples`` candidates are drawn from the good density widened by
  ``bandwidth_factor``, and the one with the highest good/bad ratio is proposed.

These are hpbandster's ``bohb_config`` keys and defaults; the KDE is written here (numpy)
instead of statsmodels', so proposals differ from Ray's for the same seed.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from ..._controller._storage import flatten
from .._library_search import LibrarySearcher, domains_of, import_library, unflatten
from ..hyperopt.hyperopt_search import _plain
from ..sample import Categorical, Float, Integer, is_normal

__all__ = ["TuneBOHB"]

logger = logging.getLogger("actorrt.tune")
EXTRA = "bohb"
_told = False  # the difference from Ray is said once per process
_DEFAULTS = {
    "min_points_in_model": None,
    "top_n_percent": 15,
    "num_samples": 64,
    "random_fraction": 1 / 3,
    "bandwidth_factor": 3.0,
    "min_bandwidth": 1e-3,
}


def _cs() -> Any:
    return import_library("ConfigSpace", "TuneBOHB", EXTRA)


class TuneBOHB(LibrarySearcher):
    """BOHB's model-based search (Ray Tune's ``TuneBOHB``); use it with
    :class:`~actorrt.tune.schedulers.HyperBandForBOHB`.

    Args:
        space: a ``ConfigSpace.ConfigurationSpace`` or a dict of Tune domains; ``None``
            (usual): the Tuner's ``param_space``, converted with :meth:`convert_search_space`.
        bohb_config: the model's settings (hpbandster's names): ``min_points_in_model``,
            ``top_n_percent``, ``num_samples``, ``random_fraction``, ``bandwidth_factor``,
            ``min_bandwidth``.
        metric, mode: what is optimised (default: ``TuneConfig``'s).
        points_to_evaluate: complete configs to run first.
        seed: seeds the space's sampling and the model's draws.
        max_concurrent: accepted as in Ray; ``0`` (no limit) or use a ConcurrencyLimiter.
    """

    NAME = "TuneBOHB"

    def __init__(
        self,
        space: Any = None,
        bohb_config: dict[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        seed: int | None = None,
        max_concurrent: int = 0,
    ) -> None:
        cs = _cs()
        unknown = sorted(set(bohb_config or {}) - set(_DEFAULTS))
        if unknown:
            raise ValueError(
                f"bohb_config has unknown keys {unknown}; known: {sorted(_DEFAULTS)}"
            )
        if max_concurrent:
            raise ValueError(
                "TuneBOHB(max_concurrent=...) is not supported here: wrap it in "
                "ConcurrencyLimiter(TuneBOHB(...), max_concurrent) or set "
                "TuneConfig(max_concurrent_trials=...)"
            )
        if space is not None and not isinstance(space, cs.ConfigurationSpace | dict):
            raise ValueError(
                f"space must be a ConfigSpace.ConfigurationSpace or a dict, got {space!r}"
            )
        global _told
        if not _told:
            _told = True
            logger.warning(
                "TuneBOHB: BOHB's model is implemented in actorrt (hpbandster, which Ray "
                "uses, is not): the same algorithm and bohb_config, but proposals differ from "
                "Ray's for the same seed"
            )
        super().__init__(space, metric, mode, points_to_evaluate)
        self.bohb_config = {**_DEFAULTS, **(bohb_config or {})}
        self.seed = seed
        self._observed: dict[float, dict[str, tuple[list[float], float]]] = {}
        self._vectors: dict[str, list[float]] = {}
        self._warned_budget = False

    @staticmethod
    def convert_search_space(spec: dict[str, Any]) -> Any:
        """ConfigSpace's form of a Tune param space (names ``a/b``)."""
        cs = _cs()
        params = []
        for name, domain in domains_of(spec, "TuneBOHB"):
            if is_normal(domain):
                raise ValueError(
                    f"TuneBOHB cannot search {name}={domain!r}: give a bounded range"
                )
            q = getattr(domain, "q", None)
            if q is not None:  # as Ray's with ConfigSpace 1.x: the bounds kept, the step not
                logger.warning(
                    "TuneBOHB does not support quantization (ConfigSpace 1.x has none). "
                    "Dropped quantization: %s=%r is searched between multiples of its step, "
                    "without it.", name, domain,
                )
            if isinstance(domain, Float):
                lower, upper = domain.lower, domain.upper
                if q is not None:
                    lower, upper = math.ceil(lower / q) * q, math.floor(upper / q) * q
                params.append(cs.UniformFloatHyperparameter(
                    name, lower, upper, log=domain.log_base is not None
                ))
            elif isinstance(domain, Integer):
                lower, upper = domain.lower, domain.upper - 1
                if q is not None:  # a quantised int's upper bound is a value it can take
                    lower = math.ceil(domain.lower / q) * q
                    upper = math.floor(domain.upper / q) * q
                params.append(cs.UniformIntegerHyperparameter(
                    name, lower, upper, log=domain.log
                ))
            elif isinstance(domain, Categorical):
                params.append(cs.CategoricalHyperparameter(name, list(domain.categories)))
            else:
                raise ValueError(f"TuneBOHB cannot search {name}={domain!r}")
        space = cs.ConfigurationSpace()
        space.add(params)
        return space

    def _setup(self) -> None:
        import numpy as np

        self._hps = list(self._space.values())
        if self.seed is not None:
            self._space.seed(self.seed)
        self._rng = np.random.default_rng(self.seed)
        self._categorical = [
            type(h).__name__ == "CategoricalHyperparameter" for h in self._hps
        ]
        names = {h.name for h in self._hps}
        for point in self._points:
            if set(flatten(point)) != names:
                raise ValueError(
                    f"TuneBOHB: each of points_to_evaluate must give exactly the searched "
                    f"parameters {sorted(names)}, got {sorted(flatten(point))}"
                )

    # ------------------------------------------------------------------ vectors

    def _to_vector(self, values: dict[str, Any]) -> list[float]:
        return [float(h.to_vector(values[h.name])) for h in self._hps]

    def _to_values(self, vector: list[float]) -> dict[str, Any]:
        import numpy as np

        out = {}
        for h, v, cat in zip(self._hps, vector, self._categorical, strict=True):
            out[h.name] = h.to_value(np.int64(round(v)) if cat else np.float64(v))
        return _plain(out)  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ the model

    def _ask(self, trial_id: str) -> tuple[Any, dict[str, Any]] | str | None:
        if self._points:
            values = flatten(self._points.pop(0))
        else:
            vector = self._model_sample()
            if vector is None:
                values = dict(self._space.sample_configuration())
            else:
                values = self._to_values(vector)
        self._vectors[trial_id] = self._to_vector(values)
        return trial_id, unflatten(_plain(values))

    def _model_sample(self) -> list[float] | None:
        import numpy as np

        cfg = self.bohb_config
        if self._rng.random() < cfg["random_fraction"]:
            return None
        dims = len(self._hps)
        min_points = cfg["min_points_in_model"] or dims + 1
        ready = [
            b for b, obs in self._observed.items() if len(obs) >= min_points + 2
        ]
        if not ready:
            return None
        points = sorted(self._observed[max(ready)].values(), key=lambda p: p[1])
        data = np.array([p[0] for p in points], dtype=float)
        n_good = max(min_points, cfg["top_n_percent"] * len(points) // 100)
        n_bad = max(min_points, (100 - cfg["top_n_percent"]) * len(points) // 100)
        good, bad = data[:n_good], data[n_good:n_good + n_bad]
        if len(good) <= dims or len(bad) <= dims:
            return None
        cat = np.array(self._categorical)
        sizes = np.array([
            len(h.choices) if c else 0 for h, c in zip(self._hps, cat, strict=True)
        ])
        bw_good, bw_bad = self._bandwidths(good, cat, sizes), self._bandwidths(bad, cat, sizes)
        best, best_score = None, -math.inf
        for _ in range(int(cfg["num_samples"])):
            centre = good[self._rng.integers(len(good))]
            candidate = self._perturb(centre, bw_good * cfg["bandwidth_factor"], cat, sizes)
            score = _log_density(candidate, good, bw_good, cat, sizes) - _log_density(
                candidate, bad, bw_bad, cat, sizes
            )
            if score > best_score:
                best, best_score = candidate, score
        return None if best is None else [float(v) for v in best]

    def _bandwidths(self, data: Any, cat: Any, sizes: Any) -> Any:
        import numpy as np

        n, dims = data.shape
        scott = 1.06 * data.std(axis=0) * n ** (-1 / (dims + 4))
        # Categories: the probability of leaving a point's category, shrinking with n.
        bw = np.where(cat, np.minimum(0.5, 1.0 / (n ** 0.5 + 1)), scott)
        return np.maximum(bw, self.bohb_config["min_bandwidth"])

    def _perturb(self, centre: Any, bw: Any, cat: Any, sizes: Any) -> Any:
        import numpy as np

        out = np.array(centre, dtype=float)
        for i in range(len(out)):
            if cat[i]:
                if self._rng.random() < min(bw[i], 1.0):
                    out[i] = float(self._rng.integers(sizes[i]))
            else:
                for _ in range(32):  # a truncated normal within [0, 1]
                    value = self._rng.normal(out[i], bw[i])
                    if 0.0 <= value <= 1.0:
                        break
                out[i] = min(max(value, 0.0), 1.0)
        return out

    # ------------------------------------------------------------------ results

    def _observe(self, trial_id: str, result: dict[str, Any]) -> None:
        vector = self._vectors.get(trial_id)
        value = result.get(self._metric) if self._metric else None
        if vector is None or not isinstance(value, int | float) or not math.isfinite(value):
            return
        info = result.get("hyperband_info")
        if isinstance(info, dict) and "budget" in info:
            budget = float(info["budget"])
        else:
            budget = float(result.get("training_iteration", 0))
        self._observed.setdefault(budget, {})[trial_id] = (vector, -self._sign * float(value))

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        info = result.get("hyperband_info")
        if isinstance(info, dict):
            if "budget" in info:
                self._observe(trial_id, result)  # a milestone's result: the model's data
        elif not self._warned_budget:
            self._warned_budget = True
            logger.warning(
                "TuneBOHB: results carry no hyperband_info: use the HyperBandForBOHB "
                "scheduler; until then only each trial's last result is recorded (with its "
                "training_iteration as the budget)"
            )

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        self._live.pop(trial_id, None)
        if result and not error:
            self._observe(trial_id, result)

    def _tell(self, token: Any, value: float | None) -> None:  # results come per budget
        pass


def _log_density(x: Any, data: Any, bw: Any, cat: Any, sizes: Any) -> float:
    """The log of a product-kernel density at ``x``: Gaussian kernels on numbers,
    Aitchison-Aitken on categories."""
    import numpy as np

    diff = (data - x) / bw
    gauss = -0.5 * diff**2 - np.log(bw * math.sqrt(2 * math.pi))
    same = np.isclose(data, x)
    other = np.log(np.maximum(bw, 1e-12) / np.maximum(sizes - 1, 1))
    aitchison = np.where(same, np.log(np.maximum(1 - bw, 1e-12)), other)
    per_point = np.where(cat, aitchison, gauss).sum(axis=1)
    top = per_point.max()
    return float(top + np.log(np.exp(per_point - top).sum()) - math.log(len(data)))
