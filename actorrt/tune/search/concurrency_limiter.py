"""``ConcurrencyLimiter``: at most so many live trials from the searcher it wraps."""

from __future__ import annotations

import logging
from typing import Any

from .searcher import Searcher, WrappingSearcher

__all__ = ["ConcurrencyLimiter"]

logger = logging.getLogger("actorrt.tune")


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
