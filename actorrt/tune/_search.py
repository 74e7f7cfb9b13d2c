"""Search algorithms: who decides the next trial's config.

The controller asks ``suggest(trial_id)`` whenever it could start a trial. A searcher answers
a config, ``None`` ("not now": e.g. a :class:`ConcurrencyLimiter` at its limit), or
``Searcher.FINISHED``. It hears every result and every trial's end.

For ``Tuner.restore`` the controller saves ``get_state()`` (pickled) whenever a trial is
created or ends, and a restored searcher gets it back through ``set_state()``; then
:func:`resume_search` tells it which trials already exist.
"""

from __future__ import annotations

import abc
import logging
import os
import random
from collections.abc import Iterable, Iterator
from typing import Any

import cloudpickle

from ._variants import count_grid_points, resolve_one, resolve_variants

__all__ = ["BasicVariantGenerator", "ConcurrencyLimiter", "Searcher", "resume_search"]

logger = logging.getLogger("actorrt.tune")


class Searcher(abc.ABC):
    """The base of every search algorithm (Ray Tune's ``Searcher`` interface).

    Subclasses override :meth:`suggest` and, to learn, :meth:`on_trial_complete`. A searcher
    that does not know how many trials to make is stopped by ``TuneConfig(num_samples)``.
    """

    FINISHED = "FINISHED"


    def __init__(self, metric: str | None = None, mode: str | None = None) -> None:
        self._metric = metric
        self._mode = mode

    def _resume_search(self, created: int, live: set[str]) -> None:
        """Continue a restored search (see :func:`resume_search`). A searcher's restored
        state says all it needs, by default; the default search and the wrappers
        override this."""
        return

    @property
    def counts_samples(self) -> bool:
        """Whether the searcher itself honours ``num_samples`` (and answers FINISHED)."""
        return False

    @property
    def metric(self) -> str | None:
        """The metric optimised, or ``None``."""
        return self._metric

    @property
    def mode(self) -> str | None:
        """``"min"`` or ``"max"``, or ``None``."""
        return self._mode

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Receive the experiment's metric, mode and param space; return whether accepted.

        ``spec`` carries ``num_samples`` and ``seed``. Values the searcher was built with win.
        """
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        return True

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Take the limit of a wrapping :class:`ConcurrencyLimiter`. Return ``True`` when this
        searcher keeps to it itself (the limiter then leaves it alone), ``False`` (the
        default) to have the limiter hold back suggestions."""
        return False

    @abc.abstractmethod
    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        """The config of trial ``trial_id``, ``None`` for not now, or ``FINISHED``."""

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:  # noqa: B027 (an optional hook: no-op by default)
        """A trial reported ``result``. Called on the controller's event loop; keep it quick."""

    def on_trial_complete(  # noqa: B027 (an optional hook)
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """A trial ended, with its last result (``error``: it failed)."""

    def get_state(self) -> Any:
        """What ``Tuner.restore`` needs to continue this searcher: any picklable value.

        The controller saves it (with cloudpickle) each time a trial is created or ends,
        and only when it changed. The default is a copy of the instance's attributes;
        override it (with :meth:`set_state`) when some attribute cannot be pickled or
        should not come back.
        """
        return dict(vars(self))

    def set_state(self, state: Any) -> None:
        """Take back what :meth:`get_state` returned (on a searcher built from the
        experiment's original ``TuneConfig``)."""
        vars(self).update(state)

    def save(self, checkpoint_path: str) -> None:
        """Write :meth:`get_state` to the file ``checkpoint_path`` (atomically)."""
        tmp = f"{checkpoint_path}.tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            cloudpickle.dump(self.get_state(), f)
        os.replace(tmp, checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        """Read what :meth:`save` wrote and :meth:`set_state` it."""
        with open(checkpoint_path, "rb") as f:
            self.set_state(cloudpickle.load(f))


class BasicVariantGenerator(Searcher):
    """Random and grid search over the param space (Ray Tune's default).

    Makes ``num_samples`` samples of the space; each expands every ``grid_search`` into one
    trial per grid point and draws every other domain at random. ``points_to_evaluate``
    (partial configs) replace the first samples: their keys win, the rest is drawn.

    Args:
        points_to_evaluate: configs to try first.
        max_concurrent: at most this many live trials (``0``: no limit).
        random_state: a seed (int) or a ``random.Random``, for a reproducible sweep.
    """

    def __init__(
        self,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        max_concurrent: int = 0,
        random_state: int | random.Random | None = None,
    ) -> None:
        super().__init__()
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

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        self.max_concurrent = max_concurrent
        return True

    @property
    def counts_samples(self) -> bool:
        return True

    def _generate(self) -> Iterator[dict[str, Any]]:
        for i in range(max(self._num_samples, len(self.points_to_evaluate))):
            if i < len(self.points_to_evaluate):
                space = _overlay(self._space, self.points_to_evaluate[i])
            else:
                space = self._space
            yield from resolve_variants(space, self._rng)

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


def _overlay(space: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    out = dict(space)
    for key, value in point.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _overlay(out[key], value)
        else:
            out[key] = value
    return out


class WrappingSearcher(Searcher):
    """A searcher that wraps another: its metric, mode, sample counting and search properties
    are the wrapped searcher's."""

    def __init__(self, searcher: Searcher) -> None:
        if not isinstance(searcher, Searcher):
            raise ValueError(f"{type(self).__name__} wraps a Searcher, got {searcher!r}")
        super().__init__()
        self.searcher = searcher

    @property
    def counts_samples(self) -> bool:
        return self.searcher.counts_samples

    @property
    def metric(self) -> str | None:
        return self.searcher.metric

    @property
    def mode(self) -> str | None:
        return self.searcher.mode

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        return self.searcher.set_search_properties(metric, mode, config, **spec)


class ConcurrencyLimiter(WrappingSearcher):
    """Let a searcher have at most ``max_concurrent`` live (suggested, unfinished) trials.

    ``TuneConfig(max_concurrent_trials=N)`` wraps the search algorithm in one of these. The
    limit is on trials started; resources may allow fewer to run at once. As in Ray, the
    wrapped searcher is told the limit first (:meth:`Searcher.set_max_concurrency`): one that
    answers ``True`` limits itself, and this wrapper then only passes calls on.

    Args:
        searcher: the searcher to limit.
        max_concurrent: a positive int.
        batch: wait until the whole batch of ``max_concurrent`` trials has ended before
            suggesting more; the wrapped searcher hears of the batch's trials
            (``on_trial_complete``) only then, all together.
    """

    def __init__(self, searcher: Searcher, max_concurrent: int, batch: bool = False) -> None:
        _check_max_concurrent(max_concurrent)
        super().__init__(searcher)
        self.max_concurrent = max_concurrent
        self.batch = batch
        self.live_trials: set[str] = set()
        self.num_unfinished_live_trials = 0
        self.cached_results: dict[str, tuple[dict[str, Any] | None, bool]] = {}
        self._limit_concurrency = True
        self._set_searcher_max_concurrency()

    def _set_searcher_max_concurrency(self) -> None:
        # A searcher with a limit of its own takes ours and keeps it.
        self._limit_concurrency = not self.searcher.set_max_concurrency(self.max_concurrent)

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        _check_max_concurrent(max_concurrent)
        self.max_concurrent = max_concurrent
        return True

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        self._set_searcher_max_concurrency()
        return super().set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if not self._limit_concurrency:
            return self.searcher.suggest(trial_id)
        if len(self.live_trials) >= self.max_concurrent:
            return None
        config = self.searcher.suggest(trial_id)
        if config is not None and config != Searcher.FINISHED:
            self.live_trials.add(trial_id)
            self.num_unfinished_live_trials += 1
        return config

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        if not self._limit_concurrency:
            self.searcher.on_trial_complete(trial_id, result=result, error=error)
            return
        if trial_id not in self.live_trials:
            return
        self.num_unfinished_live_trials -= 1
        if not self.batch:
            self.live_trials.discard(trial_id)
            self.searcher.on_trial_complete(trial_id, result=result, error=error)
            return
        self.cached_results[trial_id] = (result, error)
        if self.num_unfinished_live_trials > 0:
            return
        # The batch has ended: the searcher learns of all of it, and the next batch starts.
        cached, self.cached_results = self.cached_results, {}
        for done_id, (done_result, done_error) in cached.items():
            self.live_trials.discard(done_id)
            self.searcher.on_trial_complete(done_id, result=done_result, error=done_error)
        self.num_unfinished_live_trials = 0

    def _resume_search(self, created: int, live: set[str]) -> None:
        if self._limit_concurrency:
            self.live_trials = set(live)
            self.num_unfinished_live_trials = len(live)
            self.cached_results = {}
        self.searcher._resume_search(created, live)

    def get_state(self) -> Any:
        """The limiter's own state (limit, live trials, a batch's held results) and, under
        ``"searcher"``, the wrapped searcher's."""
        return {
            "max_concurrent": self.max_concurrent,
            "batch": self.batch,
            "live_trials": set(self.live_trials),
            "num_unfinished_live_trials": self.num_unfinished_live_trials,
            "cached_results": dict(self.cached_results),
            "_limit_concurrency": self._limit_concurrency,
            "searcher": self.searcher.get_state(),
        }

    def set_state(self, state: Any) -> None:
        state = dict(state)
        if "searcher" in state:
            self.searcher.set_state(state.pop("searcher"))
        if "max_concurrent" in state:
            _check_max_concurrent(state["max_concurrent"])
        vars(self).update(state)
        self.live_trials = set(self.live_trials)

    def __repr__(self) -> str:
        return f"ConcurrencyLimiter({self.searcher!r}, max_concurrent={self.max_concurrent})"


def _check_max_concurrent(max_concurrent: object) -> None:
    if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int):
        raise ValueError(f"max_concurrent must be a positive int, got {max_concurrent!r}")
    if max_concurrent < 1:
        raise ValueError(f"max_concurrent must be at least 1, got {max_concurrent!r}")


def resume_search(searcher: Searcher, created: int, live: Iterable[str]) -> None:
    """Continue a restored search: ``created`` trials exist already (the default search
    skips that many configs, drawn again from its saved random state, so the remaining
    trials are the ones the original run would have made), and ``live`` are the trials
    that will run again (they count against concurrency limits). A wrapping searcher
    passes this on to the searcher it wraps (``Searcher._resume_search``)."""
    searcher._resume_search(created, set(live))


def resolve_point(space: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """One config of ``space`` with no grid (for searchers that sample a single point)."""
    config = resolve_one(space, {}, rng)
    assert isinstance(config, dict)
    return config
