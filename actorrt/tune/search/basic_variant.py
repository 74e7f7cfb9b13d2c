"""``BasicVariantGenerator``: random and grid search over the param space, Tune's default."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from typing import Any

from .searcher import Searcher, overlay
from .variant_generator import count_grid_points, resolve_variants

__all__ = ["BasicVariantGenerator"]

logger = logging.getLogger("actorrt.tune")


class BasicVariantGenerator(Searcher):
    """Random and grid search over the param space (Ray Tune's default).

    Makes ``num_samples`` samples of the space; each expands every ``grid_search`` into one
    trial per grid point and draws every other domain at random. ``points_to_evaluate``
    (partial configs) replace the first samples: their keys win, the rest is drawn.

    Args:
        points_to_evaluate: configs to try first.
        max_concurrent: at most this many live trials (``0``: no limit).
        random_state: a seed (int) or a ``random.Random``, for a reproducible sweep.
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
        self._rng = (
            random_state if isinstance(random_state, random.Random)
            else random.Random(random_state)
        )
        self._seeded = random_state is not None
        self._space: dict[str, Any] = {}
        self._num_samples = 1
        self._variants: Iterator[dict[str, Any]] | None = None
        self._rng_start: Any = None  # the random state the variants were drawn from
        self._live: set[str] = set()
        self.total_trials = 0

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        super().set_search_properties(metric, mode, config)
        self._space = config
        self._num_samples = int(spec.get("num_samples", 1))
        seed = spec.get("seed")
        if seed is not None and not self._seeded:
            self._rng = random.Random(seed)
        points = len(self.points_to_evaluate)
        grid = count_grid_points(config)
        self.total_trials = max(self._num_samples, points) * grid
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

    def _generate(self) -> Iterator[dict[str, Any]]:
        for i in range(max(self._num_samples, len(self.points_to_evaluate))):
            if i < len(self.points_to_evaluate):
                space = overlay(self._space, self.points_to_evaluate[i])
            else:
                space = self._space
            yield from resolve_variants(space, self._rng, self.constant_grid_search)

    def _start_variants(self) -> Iterator[dict[str, Any]]:
        if self._variants is None:
            if self._rng_start is None:
                self._rng_start = self._rng.getstate()
            else:
                self._rng.setstate(self._rng_start)
            self._variants = self._generate()
        return self._variants

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if self.max_concurrent and len(self._live) >= self.max_concurrent:
            return None
        config = next(self._start_variants(), None)
        if config is None:
            return Searcher.FINISHED
        self._live.add(trial_id)
        return config

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        self._live.discard(trial_id)

    def get_state(self) -> Any:
        """The random state the variants are drawn from. How many were drawn is not part
        of it: the experiment's record of its trials says that (see ``resume_search``)."""
        if self._rng_start is None:
            self._rng_start = self._rng.getstate()
        return {"rng_start": self._rng_start}

    def set_state(self, state: Any) -> None:
        self._rng_start = state["rng_start"]
        self._variants = None

    def _resume_search(self, created: int, live: set[str]) -> None:
        variants = self._start_variants()
        for _ in range(created):
            if next(variants, None) is None:
                break
        self._live = set(live)
