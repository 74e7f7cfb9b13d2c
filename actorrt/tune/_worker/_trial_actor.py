"""The trial-driver actor: one per trial, in a worker process, holding the trial's group.

The controller spawns it with ``placement_group=`` the trial's factory bundles, so the actor
runs in bundle 0 and its workers (spawned from the trainable) are captured into bundles 1..n.
``run(spec)`` is one attempt at the trial: it installs the session, runs the function (or the
class's step loop) on the actor's thread, and returns an ``Outcome`` rather than raising,
so that any exception, even one whose class the driver cannot import, reaches the
controller with its traceback.
"""

from __future__ import annotations

import inspect
import numbers
import os
import pickle
from collections.abc import Mapping
from typing import Any

import actorrt

from ..._wire._pickling import dumps
from ..context import CONTINUE, SAVE_AND_STOP, STOP, Session, StopTrial, set_session
from ..trainable.trainable import Trainable, load_state, store_state
from ._spec import Ended, Outcome, TrialSpec, error_outcome
from ._trial_log import LOG_FILE, trial_output
from ._workdir import trial_working_dir

__all__ = ["TrialDriver", "ship_trainable"]

DEFAULT_METRIC = "_metric"  # Ray's name for a number a function trainable returns


class _PickledOnce:
    """A trainable pickled once per experiment: every trial's spawn message carries these
    bytes instead of pickling the trainable again. A worker unpickles them anew for each
    trial, so each trial gets its own trainable object, as before."""

    __slots__ = ("blob",)

    def __init__(self, blob: bytes) -> None:
        self.blob = blob

    def __reduce__(self) -> tuple[Any, ...]:
        return (pickle.loads, (self.blob,))


def ship_trainable(trainable: Any) -> Any:
    """What the trial actors are spawned with: ``trainable`` pickled once, or the trainable
    itself when plain pickling cannot take it (the actor messages' own pickling, which
    carries actor refs, then sends it with each trial)."""
    try:
        return _PickledOnce(dumps(trainable))
    except Exception:
        return trainable


@actorrt.actor
class TrialDriver:
    """Runs attempts of one trial; see the module docstring."""

    # The fix a deadlock message gives when a trial holds its resources and waits for
    # workers it did not declare (the actor layer puts it in place of the generic one).
    _actorrt_fix_hint = (
        "declare the workers as bundles of the trial's PlacementGroupFactory (e.g. "
        "PlacementGroupFactory([{'CPU': 1}] + [{'CPU': 1}] * num_workers)), or use "
        "tune.with_resources(driver, scaling_config), so the driver and its workers are "
        "reserved together as one atomic gang"
    )

    def __init__(self, trainable: Any, bus: Any) -> None:
        self.trainable = trainable
        self.bus = bus

    def pid(self) -> int:
        """The worker process's id."""
        return os.getpid()

    def run(self, spec: TrialSpec) -> Outcome:
        """One attempt at the trial, from ``spec.checkpoint`` if given. The process's
        output meanwhile also goes to the trial folder's ``output.log``."""
        with (
            trial_output(os.path.join(spec.trial_dir, LOG_FILE)),
            trial_working_dir(spec.trial_dir, spec.chdir),
        ):
            return self._attempt(spec)

    def _attempt(self, spec: TrialSpec) -> Outcome:
        session = Session(spec, self.bus)
        set_session(session)
        try:
            if isinstance(self.trainable, type) and issubclass(self.trainable, Trainable):
                _run_class(self.trainable, session)
            else:
                _run_function(self.trainable, session)
            # Every result is taken before the attempt ends; a stop decided on a result
            # sent ahead ends it as stopped, as the report would have in lockstep.
            if session.drain() != CONTINUE:
                return Outcome(Ended.STOPPED)
            return Outcome(Ended.DONE)
        except StopTrial:
            _drain_quietly(session)
            return Outcome(Ended.STOPPED)
        except BaseException as exc:  # SystemExit, a test framework's failure: as in Ray
            _drain_quietly(session)
            return error_outcome(exc)
        finally:
            set_session(None)


def _drain_quietly(session: Session) -> None:
    """Wait for the results sent ahead of an attempt that ends with an exception already;
    an error here (the controller gone) must not hide that one."""
    try:
        session.drain()
    except Exception:
        pass


INVALID_OUTPUT = (
    "a function trainable must return (or yield) a dict of metrics, a single number "
    "(recorded as `_metric`) or nothing"
)


def _record_output(output: Any, session: Session) -> None:
    """What a function trainable returned or yielded, recorded as Ray records it: nothing
    for a falsy value, a dict as one more result, a number as ``{"_metric": number}``."""
    if inspect.iscoroutine(output) or inspect.isasyncgen(output):
        if inspect.iscoroutine(output):
            output.close()  # never awaited: closed, so Python does not warn on top
        raise ValueError(
            f"the trainable returned {type(output).__name__} {output!r}: async trainables "
            "are not supported (nor by Ray Tune); write `def train(config)` and run async "
            "code inside it with asyncio.run(...)"
        )
    if not output:
        return
    if isinstance(output, Mapping):
        if session.send(output, None) == STOP:
            raise StopTrial(f"trial {session.trial_id} was told to stop")
        return
    if isinstance(output, numbers.Number):
        if session.send({DEFAULT_METRIC: output}, None) == STOP:
            raise StopTrial(f"trial {session.trial_id} was told to stop")
        return
    raise ValueError(f"{INVALID_OUTPUT}; got {type(output).__name__}: {output!r}")


def _run_function(trainable: Any, session: Session) -> None:
    """Run a function trainable and record its return value; for a generator function,
    each value it yields (its return value is ignored, as in Ray)."""
    output = trainable(dict(session.spec.config))
    if inspect.isgenerator(output):
        generator = output
        try:
            for item in generator:
                _record_output(item, session)
        finally:
            generator.close()
        return
    _record_output(output, session)


def _save(obj: Trainable, session: Session) -> str:
    """Take a class trainable's checkpoint into the trial folder, atomically."""

    def fill(tmp: str) -> None:
        store_state(tmp, obj.save_checkpoint(tmp))

    return session.write_checkpoint(fill)


def _run_class(cls: type[Trainable], session: Session) -> None:
    spec = session.spec
    frequency = spec.checkpoint_frequency
    at_end = spec.checkpoint_at_end
    obj = cls(
        dict(spec.config),
        iteration=session.iteration,
        trial_id=session.trial_id,
        trial_name=spec.trial_name,
        trial_dir=session.trial_dir,
        trial_resources=session.context.get_trial_resources(),
    )
    try:
        if spec.resized:  # Ray calls it before load_checkpoint
            obj.update_resources(session.context.get_trial_resources())
        if session.checkpoint is not None:
            obj.load_checkpoint(load_state(session.checkpoint.path))
        while True:
            metrics = obj.step()
            if not isinstance(metrics, Mapping):
                raise TypeError(f"{cls.__name__}.step() must return a dict, got {metrics!r}")
            obj.iteration = session.iteration + 1
            done = bool(metrics.get("done"))
            # As in Ray, a result with should_checkpoint=True asks for a checkpoint now.
            save = (
                (frequency and obj.iteration % frequency == 0)
                or (done and at_end)
                or bool(metrics.get("should_checkpoint"))
            )
            path = _save(obj, session) if save else None
            decision = session.send(metrics, path)
            if decision == SAVE_AND_STOP:
                if path is None:
                    actorrt.get(session.bus.checkpoint(session.trial_id, _save(obj, session)))
                return
            if decision == STOP or done:
                if at_end and path is None:
                    actorrt.get(
                        session.bus.checkpoint(session.trial_id, _save(obj, session))
                    )
                return
    finally:
        obj.cleanup()


