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
from collections.abc import Iterable
from typing import Any

import cloudpickle

from .util import set_search_properties_compatibly

__all__ = ["Searcher", "WrappingSearcher", "resume_search"]

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


def overlay(space: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    out = dict(space)
    for key, value in point.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = overlay(out[key], value)
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
        return set_search_properties_compatibly(
            self.searcher.set_search_properties, metric, mode, config, **spec
        )


def resume_search(searcher: Searcher, created: int, live: Iterable[str]) -> None:
    """Continue a restored search: ``created`` trials exist already (the default search
    skips that many configs, drawn again from its saved random state, so the remaining
    trials are the ones the original run would have made), and ``live`` are the trials
    that will run again (they count against concurrency limits). A wrapping searcher
    passes this on to the searcher it wraps (``Searcher._resume_search``)."""
    searcher._resume_search(created, set(live))
