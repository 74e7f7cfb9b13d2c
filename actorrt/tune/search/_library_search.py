"""What every searcher wrapped around an optimisation library shares.

A :class:`LibrarySearcher` takes its space in the library's own format (``space=``) or, as
Ray Tune's do, converts the Tuner's ``param_space`` with ``convert_search_space``; the
param space's constants are added to every config, and ``sample_from`` values are computed
from the config the library's values make. Metric and mode come from the constructor or,
when not given there, from ``TuneConfig``. Each live trial keeps the library's token for its
suggestion, so the trial's end tells the library the right point; the whole searcher
(library object included) is its ``get_state``, so ``Tuner.restore`` continues the search.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping
from typing import Any

from .sample import Domain, Function
from .searcher import Searcher, overlay
from .variant_generator import _is_grid, _walk, resolve_one

__all__ = ["LibrarySearcher", "domains_of", "import_library", "unflatten"]


def import_library(module: str, searcher: str, extra: str) -> Any:
    """Import ``module``, or raise an ImportError naming the extra that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{searcher} needs the {module.split('.')[0]} package, which is not installed: "
            f"pip install 'actorrt[{extra}]'"
        ) from exc


def param_name(path: tuple[Any, ...]) -> str:
    return "/".join(str(p) for p in path)


def domains_of(spec: Mapping[str, Any], searcher: str) -> Iterator[tuple[str, Domain]]:
    """The searched domains of a Tune param space as ``("a/b", domain)``; grid_search is
    refused (these libraries draw every value themselves)."""
    for path, value in _walk(dict(spec)):
        if _is_grid(value):
            raise ValueError(
                f"{searcher} cannot take grid_search (at {param_name(path)!r}): the library "
                "draws each trial's values itself; use tune.choice([...]) there, or the "
                "default search for a grid"
            )
        if isinstance(value, Domain) and not isinstance(value, Function):
            yield param_name(path), value


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a/b": 1}`` as ``{"a": {"b": 1}}``."""
    out: dict[str, Any] = {}
    for name, value in flat.items():
        node = out
        *parents, leaf = name.split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def join_plain(spec: Mapping[str, Any], converted: dict[str, Any]) -> dict[str, Any]:
    """``converted`` with the values of ``spec`` that are not Tune search values, by
    ``a/b`` name (a library's own entries in a space mixing them with Tune domains)."""
    plain = {
        param_name(path): value for path, value in _walk(dict(spec))
        if not _is_grid(value) and not isinstance(value, Domain)
    }
    return {**plain, **converted}


def _has_search_values(space: Mapping[str, Any]) -> list[str]:
    return [
        param_name(path) for path, value in _walk(dict(space))
        if _is_grid(value) or isinstance(value, Domain)
    ]


class LibrarySearcher(Searcher):
    """The base of the searchers around a library (see the module docstring).

    Subclasses set ``NAME`` and implement ``convert_search_space`` (static, as in Ray),
    ``_setup`` (build the library object from ``self._space``, metric and mode), ``_ask``
    (a token and the config values, nested, or ``None`` for not now, or ``FINISHED``) and
    ``_tell`` (the trial's value of the metric, or ``None`` when it failed or never
    reported it).
    """

    NAME = "LibrarySearcher"
    JOINS = False  # convert_search_space takes join= (a flat space of "a/b" names)

    def __init__(
        self,
        space: Any = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(metric=metric, mode=mode)
        if mode not in (None, "min", "max"):
            raise ValueError(f"{self.NAME}: mode must be 'min', 'max' or None, got {mode!r}")
        if points_to_evaluate is not None and not (
            isinstance(points_to_evaluate, list | tuple)
            and all(isinstance(p, Mapping) for p in points_to_evaluate)
        ):
            raise ValueError(
                f"{self.NAME}: points_to_evaluate must be a list of dicts, got "
                f"{points_to_evaluate!r}"
            )
        if isinstance(space, Mapping) and space and _has_search_values(space):
            # Tune domains in the space given: converted; a flat library space keeps the
            # library's own entries beside them (Ray's join=True).
            convert: Any = self.convert_search_space
            space = convert(dict(space), join=True) if self.JOINS else convert(dict(space))
        self._space = space
        self._points = [dict(p) for p in points_to_evaluate or []]
        self._constants: dict[str, Any] = {}
        self._live: dict[str, Any] = {}  # trial id -> the library's token for its point
        self._asked = 0
        self._ready = False

    @staticmethod
    def convert_search_space(spec: dict[str, Any]) -> Any:
        """The library's form of a Tune param space."""
        raise NotImplementedError

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        if self._ready:
            return False  # already set up (Ray: a searcher takes its properties once)
        super().set_search_properties(metric, mode, config)
        if self._space is None:
            self._space = self.convert_search_space(config)
        else:
            searched = _has_search_values(config)
            if searched:
                raise ValueError(
                    f"{self.NAME} was given a space, and param_space also has search values "
                    f"at {searched}; give the search space in one place"
                )
        self._constants = dict(config)
        self._spec = spec
        self._setup_once()
        return True

    def _setup_once(self) -> None:
        if self._ready:
            return
        if self._metric is None or self._mode is None:
            raise ValueError(
                f"{self.NAME} needs a metric and a mode (got metric={self._metric!r}, "
                f"mode={self._mode!r}): pass them to {self.NAME}(metric=..., mode=...) or "
                "TuneConfig(metric=..., mode=...)"
            )
        if self._space is None or (isinstance(self._space, Mapping) and not self._space):
            raise ValueError(
                f"{self.NAME} has nothing to search: give it a space, or put tune domains "
                "(tune.uniform, tune.choice, ...) in the Tuner's param_space"
            )
        self._setup()
        self._ready = True

    def _setup(self) -> None:
        raise NotImplementedError

    def _ask(self, trial_id: str) -> tuple[Any, dict[str, Any]] | str | None:
        raise NotImplementedError

    def _tell(self, token: Any, value: float | None) -> None:
        raise NotImplementedError

    @property
    def _sign(self) -> float:
        """+1 when the metric is maximised: libraries that minimise get ``-sign * value``."""
        return 1.0 if self._mode == "max" else -1.0

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        given = self._space is not None and not (
            isinstance(self._space, Mapping) and not self._space
        )  # not bool(space): a library's space object may refuse it (Nevergrad's does)
        if not self._ready and given and self._metric and self._mode:
            self._setup_once()  # built with all it needs (as Ray's: ready without a Tuner)
        if not self._ready:
            raise RuntimeError(
                f"{self.NAME}.suggest before set_search_properties: give it to a Tuner "
                "(or call set_search_properties(metric, mode, param_space) first)"
            )
        asked = self._ask(trial_id)
        if asked is None or isinstance(asked, str):
            return asked
        token, values = asked
        self._live[trial_id] = token
        self._asked += 1
        config = overlay(self._constants, values)
        # sample_from values, computed from the config (seeded: a restore draws the same).
        resolved = resolve_one(config, {}, random.Random(self._asked))
        assert isinstance(resolved, dict)
        return resolved

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        if trial_id not in self._live:
            return
        token = self._live.pop(trial_id)
        value = (result or {}).get(self._metric) if self._metric else None
        ok = isinstance(value, int | float) and math.isfinite(value) and not error
        self._tell(token, float(value) if ok else None)  # type: ignore[arg-type]

    def save_to_dir(self, checkpoint_dir: str, session_str: str = "default") -> None:
        """Ray's ``save_to_dir``: :meth:`save` into ``searcher-state-<session_str>.pkl``."""
        import os

        self.save(os.path.join(checkpoint_dir, f"searcher-state-{session_str}.pkl"))

    def restore_from_dir(self, checkpoint_dir: str) -> None:
        """Ray's ``restore_from_dir``: :meth:`restore` the state :meth:`save_to_dir` wrote."""
        import glob
        import os

        found = sorted(glob.glob(os.path.join(checkpoint_dir, "searcher-state-*.pkl")))
        if not found:
            raise FileNotFoundError(f"no searcher-state-*.pkl in {checkpoint_dir!r}")
        self.restore(found[-1])

    def __repr__(self) -> str:
        return f"{self.NAME}(metric={self._metric!r}, mode={self._mode!r})"
