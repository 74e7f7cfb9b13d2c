"""``HyperOptSearch``: HyperOpt's Tree-structured Parzen Estimator, one trial at a time.

Each Tune trial is one document in a ``hyperopt.Trials``: ``suggest`` asks TPE for a new
document (its ``tid`` is the trial's token), the trial's end writes its loss (the metric,
negated for ``mode="max"``: HyperOpt minimises) and marks it done, or marks it failed.
``points_to_evaluate`` become the first documents, run before TPE is asked.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from .._library_search import LibrarySearcher, domains_of, import_library, param_name
from ..sample import Categorical, Domain, Float, Function, Integer, is_normal
from ..variant_generator import _copy_structure, _get, _set, _walk

__all__ = ["HyperOptSearch"]

EXTRA = "hyperopt"


def _hyperopt() -> Any:
    module = import_library("hyperopt", "HyperOptSearch", EXTRA)
    logging.getLogger("hyperopt").setLevel(logging.WARNING)
    return module


class HyperOptSearch(LibrarySearcher):
    """Search with HyperOpt's TPE (Ray Tune's ``HyperOptSearch``).

    Args:
        space: a HyperOpt space (a dict of ``hp.*`` expressions, nested dicts allowed) or a
            dict of Tune domains; ``None`` (usual): the Tuner's ``param_space``, converted
            with :meth:`convert_search_space`.
        metric, mode: what is optimised (default: ``TuneConfig``'s).
        points_to_evaluate: complete configs to run first. For an ``hp.choice`` of a space
            given here in HyperOpt's form, give the choice's index, as HyperOpt does; for
            Tune domains, give the value.
        n_initial_points: random draws before TPE models the results.
        random_state_seed: seeds TPE's draws.
        gamma: TPE's share of "good" observations.

    Raises:
        ImportError: hyperopt is not installed (``pip install 'actorrt[hyperopt]'``).
        ValueError: a bad argument; at the Tuner's start, no metric or mode, a
            ``grid_search``, or a space given both here and in ``param_space``.
    """

    NAME = "HyperOptSearch"

    def __init__(
        self,
        space: dict[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        n_initial_points: int = 20,
        random_state_seed: int | None = None,
        gamma: float = 0.25,
    ) -> None:
        _hyperopt()
        self._choices: dict[str, list[Any]] = (
            _choices_of(space) if isinstance(space, Mapping) else {}
        )
        super().__init__(space, metric, mode, points_to_evaluate)
        if isinstance(n_initial_points, bool) or not isinstance(n_initial_points, int) or (
            n_initial_points < 1
        ):
            raise ValueError(f"n_initial_points must be a positive int, got {n_initial_points!r}")
        if not 0 < gamma < 1:
            raise ValueError(f"gamma must be within (0, 1), got {gamma!r}")
        self.n_initial_points = n_initial_points
        self.random_state_seed = random_state_seed
        self.gamma = gamma

    @staticmethod
    def convert_search_space(spec: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        """HyperOpt's form of a Tune param space, as Ray's: the space with each domain
        replaced by an ``hp.*`` expression labelled by its path (``a/b``); constants stay
        (``space_eval`` gives them back), ``sample_from`` is left out (computed from the
        config). A choice's categories may hold domains (in dicts or lists): they are
        searched too, labelled ``<choice>/<index>/...``."""
        list(domains_of(spec, "HyperOptSearch"))  # refuses grid_search
        out: dict[str, Any] = _copy_structure(spec)
        for path, value in list(_walk(out)):
            if isinstance(value, Function):
                parent = _get(out, path[:-1])
                if isinstance(parent, dict):
                    del parent[path[-1]]
            elif isinstance(value, Domain):
                _set(out, path, _expression(prefix + param_name(path), value))
        return out

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        if self._space is None:
            self._choices = _choices_of(config)
        return super().set_search_properties(metric, mode, config, **spec)

    def _setup(self) -> None:
        import numpy as np

        hpo = _hyperopt()
        from functools import partial

        self._domain = hpo.Domain(lambda spc: spc, self._space)
        self._algo = partial(
            hpo.tpe.suggest, n_startup_jobs=self.n_initial_points, gamma=self.gamma
        )
        self._rstate = np.random.default_rng(self.random_state_seed)
        labels = set(self._domain.params)
        if not labels:
            raise RuntimeError(
                "Trying to sample a configuration from HyperOptSearch, but no search space "
                "has been defined. Either pass the `space` argument when instantiating the "
                "search algorithm, or pass a `param_space` to `tune.Tuner()`. This issue can "
                "also come up with HyperOpt if your search space only contains constant "
                "variables, which is not supported by HyperOpt. In that case, don't pass any "
                "searcher or add sample variables to the search space."
            )
        points = []
        for point in self._points:
            flat = _point_values(point, labels, self._space)
            missing, unknown = sorted(labels - set(flat)), sorted(set(flat) - labels)
            if missing or unknown:
                raise ValueError(
                    f"HyperOptSearch: each of points_to_evaluate must give every searched "
                    f"parameter {sorted(labels)}; {point!r} misses {missing} and has "
                    f"unknown {unknown}"
                )
            points.append({k: self._index(k, v) for k, v in flat.items()})
        if points:
            from hyperopt.fmin import generate_trials_to_calculate

            self._trials = generate_trials_to_calculate(points)
        else:
            self._trials = hpo.Trials()
        self._trials.refresh()
        self._queued = [t["tid"] for t in self._trials.trials]  # the points, to run first

    def _index(self, name: str, value: Any) -> Any:
        choices = self._choices.get(name)
        if choices is None:
            return value
        for i, choice in enumerate(choices):
            if choice == value:
                return i
        raise ValueError(
            f"points_to_evaluate gives {name}={value!r}, which is not one of its choices "
            f"{choices!r}"
        )

    def _ask(self, trial_id: str) -> tuple[Any, dict[str, Any]] | str | None:
        hpo = _hyperopt()
        if self._queued:
            tid = self._queued.pop(0)
            doc = next(t for t in self._trials.trials if t["tid"] == tid)
        else:
            ids = self._trials.new_trial_ids(1)
            self._trials.refresh()
            docs = self._algo(ids, self._domain, self._trials, self._rstate.integers(2**31 - 1))
            self._trials.insert_trial_docs(docs)
            self._trials.refresh()
            doc = docs[0]
            tid = doc["tid"]
        vals = {k: v[0] for k, v in doc["misc"]["vals"].items() if v}
        config = hpo.space_eval(self._space, vals)
        return tid, _plain(config)

    def _tell(self, token: Any, value: float | None) -> None:
        hpo = _hyperopt()
        for doc in self._trials._dynamic_trials:
            if doc["tid"] != token:
                continue
            if value is None:
                doc["result"] = {"status": hpo.STATUS_FAIL}
                doc["state"] = hpo.JOB_STATE_ERROR
            else:
                doc["result"] = {"loss": -self._sign * value, "status": hpo.STATUS_OK}
                doc["state"] = hpo.JOB_STATE_DONE
            break
        self._trials.refresh()

    @property
    def trials(self) -> Any:
        """The ``hyperopt.Trials`` of the search (one document per Tune trial)."""
        return self._trials


def _expression(label: str, domain: Any) -> Any:
    """The ``hp.*`` expression of one Tune domain."""
    hpo = _hyperopt()
    hp, scope = hpo.hp, hpo.pyll.scope
    if is_normal(domain):
        return (
            hp.qnormal(label, domain.mean, domain.sd, domain.q) if domain.q
            else hp.normal(label, domain.mean, domain.sd)
        )
    if isinstance(domain, Float):
        if domain.log_base is not None:
            low, high = math.log(domain.lower), math.log(domain.upper)
            return (
                hp.qloguniform(label, low, high, domain.q) if domain.q
                else hp.loguniform(label, low, high)
            )
        if domain.q is not None:
            return hp.quniform(label, domain.lower, domain.upper, domain.q)
        return hp.uniform(label, domain.lower, domain.upper)
    if isinstance(domain, Integer):
        if domain.log and domain.q is not None:  # qlograndint: upper included
            expr = hp.qloguniform(label, math.log(domain.lower), math.log(domain.upper), domain.q)
        elif domain.log:
            expr = hp.qloguniform(label, math.log(domain.lower), math.log(domain.upper - 1), 1)
        elif domain.q is not None:  # qrandint: the upper bound is included
            expr = hp.quniform(label, domain.lower, domain.upper, domain.q)
        else:
            expr = hp.quniform(label, domain.lower, domain.upper - 1, 1)
        return scope.int(expr)
    if isinstance(domain, Categorical):
        return hp.choice(label, [
            _category(f"{label}/{i}", c) for i, c in enumerate(domain.categories)
        ])
    raise ValueError(f"HyperOptSearch cannot search {label}={domain!r}")


def _category(label: str, category: Any) -> Any:
    """One category of a choice, with the domains inside it made expressions."""
    if isinstance(category, Domain) and not isinstance(category, Function):
        return _expression(label, category)
    if isinstance(category, dict):
        return HyperOptSearch.convert_search_space(category, prefix=f"{label}/")
    if isinstance(category, list):
        return [_category(f"{label}/{i}", c) for i, c in enumerate(category)]
    return category


def _point_values(point: Any, labels: set[str], space: Any, name: str = "") -> dict[str, Any]:
    """The values a point gives for ``labels`` (dicts and lists entered down to them); a
    value where the space holds a constant is left out (HyperOpt gives the constant)."""
    if name in labels:
        return {name: point}
    inner = [label for label in labels if label.startswith(f"{name}/")] if name else labels
    if isinstance(point, Mapping) and (inner or not name):
        items: Any = point.items()
    elif isinstance(point, list | tuple) and inner:
        items = enumerate(point)
    else:
        return {} if _has_constant(space, name) else {name: point}
    out: dict[str, Any] = {}
    for key, value in items:
        out.update(_point_values(value, labels, space, f"{name}/{key}" if name else str(key)))
    return out


def _has_constant(space: Any, name: str) -> bool:
    node = space
    for part in name.split("/"):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list | tuple) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def _choices_of(space: Mapping[str, Any]) -> dict[str, list[Any]]:
    return {
        name: list(d.categories) for name, d in domains_of(space, HyperOptSearch.NAME)
        if isinstance(d, Categorical)
    }


def _plain(value: Any) -> Any:
    """numpy scalars as Python ones (configs are written as JSON and sent to workers)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        return item()
    return value
