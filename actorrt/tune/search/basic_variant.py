"""``BasicVariantGenerator``: random and grid search over the param space, Tune's default."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from typing import Any

from ..experiment.trial import Trial
from ._by_hand import TrialMaker, convert_to_experiment_list
from ._samplers import as_rng
from .sample import Domain
from .searcher import Searcher, overlay
from .variant_generator import (
    count_grid_points,
    is_search_value,
    resolve_variants_with_vars,
)
from .variant_generator import logger as variant_logger

__all__ = ["BasicVariantGenerator"]

logger = logging.getLogger("actorrt.tune")


class BasicVariantGenerator(Searcher):
    """Random and grid search over the param space (Ray Tune's default).

    Makes ``num_samples`` samples of the space; each expands every ``grid_search`` into one
    trial per grid point and draws every other domain at random. ``points_to_evaluate``
    (partial configs) replace the first samples: their keys win, the rest is drawn (a grid
    a point sets is not expanded for that sample). A point's key the space lacks is an
    error; a value outside its domain, or other than the space's constant, is logged.

    Besides ``suggest`` (what Tune's controller calls), it has Ray's hand-driven interface:
    ``add_configurations(experiments)``, then ``next_trial()`` until ``is_finished()``.

    Args:
        points_to_evaluate: configs to try first.
        max_concurrent: at most this many live trials (``0``: no limit).
        random_state: a seed (int), a ``random.Random`` or a numpy generator, for a
            reproducible sweep. Without it (nor ``TuneConfig(seed=)``), the draws are
            seeded from numpy's global generator, as Ray's: ``np.random.seed(n)`` before a
            sweep repeats it.
        constant_grid_search: draw a sample's random domains once and keep them for each
            of its grid points (default: drawn afresh for every grid point), as Ray's.
    """

    def __init__(
        self,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        max_concurrent: int = 0,
        random_state: int | random.Random | None = None,
        constant_grid_search: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(constant_grid_search, bool):
            raise TypeError(
                f"constant_grid_search must be True or False, got {constant_grid_search!r}"
            )
        self.constant_grid_search = constant_grid_search
        if max_concurrent < 0:
            raise ValueError(f"max_concurrent must be >= 0, got {max_concurrent!r}")
        self.points_to_evaluate = list(points_to_evaluate or [])
        self.max_concurrent = max_concurrent
        if not isinstance(points_to_evaluate or [], list) or not all(
            isinstance(p, dict) for p in points_to_evaluate or []
        ):
            raise TypeError(
                f"points_to_evaluate must be a list of dicts, got {points_to_evaluate!r}"
            )
        self._rng = (
            random_state if isinstance(random_state, random.Random)
            else random.Random() if random_state is None else as_rng(random_state)
        )
        self._seeded = random_state is not None
        self._space: dict[str, Any] = {}
        self._num_samples = 1
        self._variants: Iterator[tuple[dict[Any, Any], dict[str, Any]]] | None = None
        self._rng_start: Any = None  # the random state the variants were drawn from
        self._live: set[str] = set()
        self.total_trials = 0
        # Ray's hand-driven interface (add_configurations / next_trial):
        self._makers: list[tuple[TrialMaker, Iterator[Any]]] = []
        self._finished = False

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        super().set_search_properties(metric, mode, config)
        self._space = config
        self._num_samples = int(spec.get("num_samples", 1))
        seed = spec.get("seed")
        if seed is not None and not self._seeded:
            self._rng = random.Random(seed)
            self._seeded = True
        for point in self.points_to_evaluate:
            check_point(config, point)
        self.total_trials = count_variants(config, self._num_samples, self.points_to_evaluate)
        return True

    @property
    def total_samples(self) -> int:
        """How many trials the sweep makes (Ray's name): samples times grid points."""
        return self.total_trials

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        self.max_concurrent = max_concurrent
        return True

    @property
    def counts_samples(self) -> bool:
        return True

    def _generate(
        self, space: dict[str, Any] | None = None, num_samples: int | None = None
    ) -> Iterator[tuple[dict[Any, Any], dict[str, Any]]]:
        space = self._space if space is None else space
        num_samples = self._num_samples if num_samples is None else num_samples
        for i in range(max(num_samples, len(self.points_to_evaluate))):
            if i < len(self.points_to_evaluate):
                point = self.points_to_evaluate[i]
                warn_about_point(space, point)
                sample = overlay(space, point)
            else:
                sample = space
            yield from resolve_variants_with_vars(sample, self._rng, self.constant_grid_search)

    def _start_variants(self) -> Iterator[tuple[dict[Any, Any], dict[str, Any]]]:
        if self._variants is None:
            if self._rng_start is None:
                self._fix_start()
            else:
                self._rng.setstate(self._rng_start)
            self._variants = self._generate()
        return self._variants

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if self.max_concurrent and len(self._live) >= self.max_concurrent:
            return None
        variant = next(self._start_variants(), None)
        if variant is None:
            return Searcher.FINISHED
        self._live.add(trial_id)
        return variant[1]

    # ------------------------------------------- Ray's hand-driven interface

    def add_configurations(self, experiments: Any) -> None:
        """Queue the trials of ``experiments`` (an ``Experiment``, a list of them, or a
        dict of specs by name), as Ray's ``SearchAlgorithm.add_configurations``:
        ``next_trial`` then returns them one by one; ``total_samples`` grows by their
        number."""
        for experiment in convert_to_experiment_list(experiments):
            space = experiment.spec["config"]
            num_samples = experiment.spec.get("num_samples", 1)
            for point in self.points_to_evaluate:
                check_point(space, point)
            maker = TrialMaker(experiment, start=self.total_trials)
            self.total_trials += count_variants(space, num_samples, self.points_to_evaluate)
            self._makers.append((maker, self._generate(space, num_samples)))

    def next_trial(self) -> Trial | None:
        """The next trial of the experiments added, or None: none left (the search is
        then finished) or ``max_concurrent`` trials are live."""
        if self.is_finished():
            return None
        if self.max_concurrent and len(self._live) >= self.max_concurrent:
            return None
        while self._makers:
            maker, variants = self._makers[0]
            variant = next(variants, None)
            if variant is not None:
                trial = maker.make(variant[1], variant[0])
                self._live.add(trial.trial_id)
                return trial
            self._makers.pop(0)
        self.set_finished()
        return None

    def is_finished(self) -> bool:
        """Whether no trial is left to hand out (Ray's ``SearchAlgorithm.is_finished``)."""
        return self._finished

    def set_finished(self) -> None:
        """Mark the search finished."""
        self._finished = True

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        self._live.discard(trial_id)

    def get_state(self) -> Any:
        """The random state the variants are drawn from. How many were drawn is not part
        of it: the experiment's record of its trials says that (see ``resume_search``)."""
        if self._rng_start is None:
            self._fix_start()
        return {"rng_start": self._rng_start}

    def _fix_start(self) -> None:
        """Fix the random state the variants are drawn from."""
        if not self._seeded:  # as Ray: numpy's global generator decides
            self._rng = random.Random(_numpy_global_seed())
        self._rng_start = self._rng.getstate()

    def set_state(self, state: Any) -> None:
        self._rng_start = state["rng_start"]
        self._variants = None

    def _resume_search(self, created: int, live: set[str]) -> None:
        variants = self._start_variants()
        for _ in range(created):
            if next(variants, None) is None:
                break
        self._live = set(live)


def _leaves(point: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(point, dict) and point:
        for key, value in point.items():
            yield from _leaves(value, (*path, key))
    else:
        yield path, point


def _at(space: Any, path: tuple[Any, ...]) -> Any:
    """The space's value at ``path`` (a grid counts as a value); KeyError if absent."""
    for key in path:
        if is_search_value(space) or not isinstance(space, dict | list):
            raise KeyError(key)
        try:
            space = space[key]
        except (IndexError, TypeError) as exc:
            raise KeyError(key) from exc
    return space


def check_point(space: dict[str, Any], point: dict[str, Any]) -> None:
    """Raise Ray's ``ValueError`` for a key of ``point`` that ``space`` lacks."""
    for path, _ in _leaves(point):
        try:
            _at(space, path)
        except KeyError:
            raise ValueError(
                f"Pre-set config key `{'/'.join(map(str, path))}` does not correspond to a "
                "valid key in the search space definition. Please add this path to the "
                "`param_space` variable passed to `tune.Tuner()`."
            ) from None


def warn_about_point(space: dict[str, Any], point: dict[str, Any]) -> None:
    """Log, as Ray does, each value of ``point`` outside its domain or other than the
    space's constant there (the point's value is used all the same)."""
    for path, value in _leaves(point):
        try:
            domain = _at(space, path)
        except KeyError:
            continue
        name = "/".join(map(str, path))
        if isinstance(domain, dict) and list(domain) == ["grid_search"]:
            if value not in domain["grid_search"]:
                variant_logger.warning(
                    f"Pre-set value `{value}` is not within valid values of parameter "
                    f"`{name}`: {domain['grid_search']}"
                )
        elif isinstance(domain, Domain):
            if not domain.is_valid(value):
                variant_logger.warning(
                    f"Pre-set value `{value}` is not within valid values of parameter "
                    f"`{name}`: {domain.domain_str}"
                )
        elif not isinstance(domain, dict) and domain != value:
            variant_logger.warning(
                f"Pre-set value `{value}` is not equal to the value of parameter "
                f"`{name}`: {domain}"
            )


def count_variants(
    space: dict[str, Any], num_samples: int, points: list[dict[str, Any]]
) -> int:
    """How many trials ``num_samples`` samples of ``space`` make when ``points`` replace
    the first ones (a grid a point sets is not expanded for it), as Ray counts them."""
    total = sum(count_grid_points(overlay(space, point)) for point in points)
    return total + max(0, num_samples - len(points)) * count_grid_points(space)


def _numpy_global_seed() -> int | None:
    """A seed drawn from numpy's global generator (None without numpy)."""
    try:
        import numpy as np
    except ImportError:
        return None
    return int(np.random.randint(0, 2**31 - 1))
