"""The trial side of Tune: ``tune.report``, ``tune.get_checkpoint``, ``tune.get_context``.

These run in a trial's worker process, on the trial's own thread. One trial runs per worker
process at a time, so the current session is a module global set by the trial driver for
the length of one run. ``report`` is an ask to the controller's report bus: the answer
says whether to go on (read at once where a scheduler or a stop criterion decides on each
result, else up to ``spec.reports_ahead`` reports later: :meth:`Session.send`). When the
answer is "stop" (a scheduler decision, a stop criterion, the time budget), ``report``
raises :class:`StopTrial`, a ``BaseException`` so that ``except Exception`` in user code
lets it through. Do not catch it: the trial ends cleanly
with it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import actorrt

from .._shared._checkpoint import Checkpoint
from .._shared._deprecation import RayDeprecationWarning
from .._shared._trial_hook import set_trial_provider
from ._worker._checkpoint_dirs import copy_checkpoint, write_checkpoint
from ._worker._spec import TrialSpec
from .trainable._resources import PlacementGroupFactory

__all__ = ["StopTrial", "TuneContext", "get_checkpoint", "get_context", "report"]

CONTINUE = "CONTINUE"
STOP = "STOP"
# To a class trainable only: save a checkpoint now (none came with this result), then stop
# (its resources change: it restarts from that checkpoint).
SAVE_AND_STOP = "SAVE_AND_STOP"


class StopTrial(BaseException):
    """Raised by ``tune.report`` when the trial was told to stop; do not catch it."""


class TuneContext:
    """What a trial can learn about itself (``tune.get_context()``)."""

    def __init__(self, spec: TrialSpec) -> None:
        self._spec = spec

    def get_trial_id(self) -> str:
        """The trial's id (``"a1b2c_00003"``)."""
        return self._spec.trial_id

    def get_trial_name(self) -> str:
        """The trial's name (trainable name and id)."""
        return self._spec.trial_name

    def get_trial_dir(self) -> str:
        """The trial's folder in the experiment folder."""
        return self._spec.trial_dir

    def get_experiment_name(self) -> str:
        """The experiment's name (``RunConfig(name)``)."""
        return self._spec.experiment_name

    def get_trial_resources(self) -> PlacementGroupFactory:
        """What the trial reserved: its placement group factory."""
        return PlacementGroupFactory(self._spec.bundles, self._spec.strategy)

    def get_world_rank(self) -> int:
        """Always 0: a Tune trial is a single driver (Train's contexts have real ranks)."""
        return 0

    def get_local_rank(self) -> int:
        """Always 0 (see ``get_world_rank``)."""
        return 0

    def get_world_size(self) -> int:
        """Always 1: a Tune trial is a single driver."""
        return 1

    def get_local_world_size(self) -> int:
        """Always 1 (see ``get_world_size``)."""
        return 1

    def get_node_rank(self) -> int:
        """Always 0: a Tune trial is a single driver, on one node (a Train run inside it
        has ranks by node: ``train.get_context().get_node_rank()``)."""
        return 0

    def __repr__(self) -> str:
        return f"TuneContext(trial_id={self.get_trial_id()!r})"


_PLAIN = (int, float, str, bool, type(None))


def _travels_plainly(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is numbers, strings, ``None`` and lists and dicts of them (a few
    levels deep): a result the wire takes as it is. Any other sends its report in lockstep,
    so that a value that cannot be sent fails the report that sent it."""
    if isinstance(value, _PLAIN):
        return True
    if depth > 4:
        return False
    if type(value) is dict:
        return all(
            type(k) is str and _travels_plainly(v, depth + 1) for k, v in value.items()
        )
    if type(value) is list or type(value) is tuple:
        return all(_travels_plainly(v, depth + 1) for v in value)
    return False


def _plain(value: Any) -> Any:
    """Numpy and torch scalars as Python numbers, so results travel and serialise."""
    item = getattr(value, "item", None)
    if item is not None and getattr(value, "ndim", None) == 0:
        return item()
    return value


class Session:
    """One run of one trial in this process."""

    def __init__(self, spec: TrialSpec, bus: Any) -> None:
        self.spec = spec
        self.bus = bus
        self.trial_id = spec.trial_id
        self.trial_dir = spec.trial_dir
        self.iteration = spec.iteration
        self.time_total = spec.time_total_s
        self.checkpoint_count = spec.checkpoint_count
        restore = spec.checkpoint
        self.checkpoint: Checkpoint | None = Checkpoint(restore) if restore else None
        self.context = TuneContext(spec)
        self.started = self.last = time.monotonic()
        self.restored_iteration = self.iteration
        self.pid = os.getpid()
        self.thread = threading.get_ident()
        # Reports sent whose decisions have not been read yet (see `send`).
        self._ahead: deque[Any] = deque()

    def write_checkpoint(self, fill: Callable[[str], object]) -> str:
        """Write the next checkpoint into the trial folder: ``fill`` writes its files into
        a temporary folder of this attempt's own, then it takes the next free index (see
        :mod:`._checkpoint_dirs`)."""
        path, index = write_checkpoint(self.trial_dir, self.checkpoint_count, fill)
        self.checkpoint_count = index + 1
        return path

    def persist(self, checkpoint: Checkpoint) -> str:
        """Copy a user's checkpoint directory into the trial folder, atomically."""
        src = os.path.abspath(checkpoint.path)
        if os.path.dirname(src) == os.path.abspath(self.trial_dir):
            return src  # already ours (a class trainable's, or one written in place)
        return self.write_checkpoint(
            lambda tmp: shutil.copytree(src, tmp, dirs_exist_ok=True)
        )

    def send(self, metrics: Mapping[str, Any], checkpoint_path: str | None) -> str:
        """Report one result to the controller; return its decision.

        With ``spec.reports_ahead`` 0 (a scheduler or a stop criterion decides on each
        result), each report waits for its decision, as in Ray. Otherwise nothing but the
        experiment's end can stop the trial at a result, so up to that many reports go
        ahead of their decisions: a report returns once sent, and the decisions that have
        arrived meanwhile are read at each report (a stop among them stops the trial
        there, before the new result is sent). A report with a checkpoint or ``done``, and
        the attempt's end (:meth:`drain`), wait for every decision.
        """
        decision = self._decided()
        if decision != CONTINUE:
            return decision
        result = self._result(metrics, checkpoint_path)
        ask = self.bus.report(self.trial_id, result, checkpoint_path)
        if (
            checkpoint_path is not None
            or result.get("done")
            or not self.spec.reports_ahead
            or not _travels_plainly(result)  # whatever fails to encode fails here
        ):
            decision = self.drain()
            answer: str = actorrt.get(ask)
            return decision if decision != CONTINUE else answer
        self._ahead.append(ask)
        if len(self._ahead) > self.spec.reports_ahead:
            actorrt.get(self._ahead[0])  # the window is full: wait for the oldest
        return self._decided()

    def _decided(self) -> str:
        """Read the decisions that have arrived, oldest first: the first that is not
        ``CONTINUE``, or ``CONTINUE``. Raises what a report's ask raised."""
        ahead = self._ahead
        while ahead and ahead[0].done():
            decision: str = actorrt.get(ahead.popleft())
            if decision != CONTINUE:
                # The controller drops the results sent after it; the attempt's end still
                # waits for their answers (drain), so none reaches a later attempt.
                return decision
        return CONTINUE

    def drain(self) -> str:
        """Wait for the decisions of every report sent ahead (:meth:`send`); the first
        that is not ``CONTINUE``, or ``CONTINUE``."""
        decision = CONTINUE
        while self._ahead:
            answer: str = actorrt.get(self._ahead.popleft())
            if answer != CONTINUE and decision == CONTINUE:
                decision = answer
        return decision

    async def send_async(self, metrics: Mapping[str, Any], checkpoint_path: str | None) -> str:
        """``send`` for code on this process's event loop: awaits the controller's answer."""
        result = self._result(metrics, checkpoint_path)
        decision: str = await self.bus.report(self.trial_id, result, checkpoint_path)
        return decision

    async def report_async(self, metrics: Mapping[str, Any], checkpoint_dir: str | None) -> bool:
        """Report a result from this process's event loop; return whether the trial goes on.

        For a library that runs inside the trial's process (``actorrt.train``'s trainers,
        which find the session through the trial provider registered below): the
        checkpoint directory's files are hard-linked (else copied) into the trial folder
        on a helper thread, so the loop never waits on disk, then the result is sent.
        Unlike ``tune.report`` it does not raise when told to stop: the caller ends its own
        work first, then raises ``stop_signal()`` on the trial's thread.
        """
        path = None
        if checkpoint_dir is not None:
            path = await asyncio.to_thread(self._persist_linked, checkpoint_dir)
        return await self.send_async(metrics, path) != STOP

    def _persist_linked(self, checkpoint_dir: str) -> str:
        # Files of a checkpoint are never modified in place, so sharing them is safe.
        path, index = copy_checkpoint(
            checkpoint_dir, self.trial_dir, self.checkpoint_count, link=True
        )
        self.checkpoint_count = index + 1
        return path

    def stop_signal(self) -> StopTrial:
        """What to raise on the trial's thread once the trial was told to stop."""
        return StopTrial(f"trial {self.trial_id} was told to stop")

    @property
    def restore_checkpoint(self) -> str | None:
        """The checkpoint this attempt started from (a retry's, or PBT's), or ``None``."""
        return self.spec.checkpoint or None

    def _result(self, metrics: Mapping[str, Any], checkpoint_path: str | None) -> dict[str, Any]:
        """One result with Tune's automatic fields; counts the iteration."""
        if not isinstance(metrics, Mapping):
            raise TypeError(f"tune.report() takes a dict of metrics, got {metrics!r}")
        now = time.monotonic()
        this_iter = now - self.last
        self.last = now
        self.iteration += 1
        self.time_total += this_iter
        result = {str(k): _plain(v) for k, v in metrics.items()}
        result.update(
            training_iteration=self.iteration,
            time_this_iter_s=this_iter,
            time_total_s=self.time_total,
            time_since_restore=now - self.started,
            iterations_since_restore=self.iteration - self.restored_iteration,
            timestamp=int(time.time()),
            pid=self.pid,
        )
        if checkpoint_path is not None:
            self.checkpoint = Checkpoint(checkpoint_path)
        return result

    def report(self, metrics: Mapping[str, Any], checkpoint: Checkpoint | None) -> None:
        path = self.persist(checkpoint) if checkpoint is not None else None
        if self.send(metrics, path) == STOP:
            raise StopTrial(f"trial {self.trial_id} was told to stop")


_current: Session | None = None


def set_session(session: Session | None) -> None:
    """Install (or clear) the session of the trial this process runs."""
    global _current
    _current = session


def active_session() -> Session | None:
    """The session of the trial this process runs now, or ``None``.

    Tune's trial provider (registered below): a trainer whose ``fit()`` runs in a trial
    finds the session through it and forwards its results to the trial.
    """
    return _current


# Neither library imports the other: a trainer finds the running trial through the
# shared hook, as any other sweep library's trainer-aware trials would be found.
set_trial_provider("actorrt.tune", active_session)


def _session(call: str) -> Session:
    if _current is None:
        raise RuntimeError(
            f"tune.{call}() was called outside a Tune trial; call it from a trainable that "
            "Tuner.fit() runs"
        )
    return _current


def report(
    metrics: Mapping[str, Any] | None = None,
    *,
    checkpoint: Checkpoint | None = None,
    **legacy_metrics: Any,
) -> None:
    """Report one iteration's metrics (and optionally a checkpoint) from a trial.

    With a scheduler or a stop criterion, returns once the controller has taken the
    result (and written it), as in Ray; with neither, once the result is sent, and the
    trial's end waits until every result is taken (docs/tune.md, "How a sweep runs").
    ``training_iteration`` counts reports.

    Args:
        metrics: a dict of numbers and short values.
        checkpoint: ``Checkpoint.from_directory(d)``; its files are copied into the trial's
            folder before this returns.
        **legacy_metrics: Ray 1.x-2.6's ``tune.report(mean_loss=...)``: still taken as
            the metrics, with a ``DeprecationWarning``, as those versions of Ray warned.

    Raises:
        TypeError: both a metrics dict and keyword metrics, or neither.
        StopTrial: the trial was told to stop (scheduler, stop criterion, time budget);
            let it propagate.
        RuntimeError: called outside a trial.
    """
    if legacy_metrics:
        if metrics is not None:
            raise TypeError(
                f"tune.report() got a metrics dict and keyword metrics "
                f"{sorted(legacy_metrics)}: pass one dict, tune.report({{...}})"
            )
        warnings.warn(
            "tune.report(**kwargs) is deprecated: pass the metrics as one dict, "
            f"tune.report({{{', '.join(repr(k) + ': ...' for k in legacy_metrics)}}})",
            RayDeprecationWarning,
            stacklevel=2,
        )
        metrics = legacy_metrics
    if metrics is None:
        raise TypeError("tune.report() needs the metrics: tune.report({'loss': ...})")
    _session("report").report(metrics, checkpoint)


def get_checkpoint() -> Checkpoint | None:
    """The trial's latest checkpoint: the one it restarts from after a failure, then the
    last one it reported. ``None`` when it has none (or outside a trial)."""
    return _current.checkpoint if _current is not None else None


class _ContextOutsideTrial(TuneContext):
    """``tune.get_context()`` outside a trial, as in Ray: every getter warns (a
    ``UserWarning``, once each) and returns ``None``."""

    def __init__(self) -> None:
        super().__init__(TrialSpec("", "", "", "", {}, [], "PACK"))
        self._warned: set[str] = set()

    def _outside(self, call: str) -> None:
        if call not in self._warned:  # a UserWarning once per getter, as Ray warns
            self._warned.add(call)
            warnings.warn(
                f"tune.get_context().{call}() was called outside a Tune trial: it returns "
                "None (call it from a trainable that Tuner.fit() runs)",
                stacklevel=3,
            )

    # Ray's getters say they return str or int, and return None outside a trial.
    def get_trial_id(self) -> Any:
        return self._outside("get_trial_id")

    def get_trial_name(self) -> Any:
        return self._outside("get_trial_name")

    def get_trial_dir(self) -> Any:
        return self._outside("get_trial_dir")

    def get_experiment_name(self) -> Any:
        return self._outside("get_experiment_name")

    def get_trial_resources(self) -> Any:
        return self._outside("get_trial_resources")

    def get_world_rank(self) -> Any:
        return self._outside("get_world_rank")

    def get_local_rank(self) -> Any:
        return self._outside("get_local_rank")

    def get_world_size(self) -> Any:
        return self._outside("get_world_size")

    def get_local_world_size(self) -> Any:
        return self._outside("get_local_world_size")

    def get_node_rank(self) -> Any:
        return self._outside("get_node_rank")

    def __repr__(self) -> str:
        return "TuneContext(outside a trial)"


_outside_trial = _ContextOutsideTrial()


def get_context() -> TuneContext:
    """The running trial's context: id, name, folder, resources. Outside a trial, as in
    Ray, a context whose getters warn and return ``None``."""
    return _outside_trial if _current is None else _current.context
