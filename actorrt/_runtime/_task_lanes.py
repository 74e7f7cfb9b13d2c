"""Task runners shared by calls: handed on to the next waiting call, kept warm, stopped.

Calls of one caller with the same options share their runners (a lane): a runner that has
finished a call is handed on to the next waiting call instead of being stopped and another
started, and a lane has one spawn waiting for its grant at a time (the others wait their turn,
or a runner), so a fan-out of a hundred calls into two bundles does not file a hundred
requests. A runner that finds no call waiting is kept warm, idle, for ``IDLE_SECONDS``, then
stopped; the driver stops its idle runners at once when one of its requests has to wait.
"""

from __future__ import annotations

import asyncio
import collections
import weakref
from typing import Any, Final

from .._core._actor import ActorClass
from .._core._options import ActorOptions
from .._errors import DeathReason
from ._root import current_runtime

# Ends of a worker that are worth a second run: the process went, not the function failed.
RETRIED = frozenset({DeathReason.PROCESS_DIED, DeathReason.NODE_LOST})

# How long a runner that finished a call and found no call waiting stays warm for the next.
IDLE_SECONDS = 0.1

# The calls running now: an asyncio task is only weakly held by its loop.
_running: set[Any] = set()

__all__ = [
    "IDLE_SECONDS", "RETRIED", "Lane", "hand_on", "lane_for", "own", "runner_for", "stop_quietly",
]

_SPAWN: Final = object()  # "file your own spawn now", given to a waiting call


class Lane:
    """The calls of one (options, caller) waiting for a runner, and the runners kept warm
    for them; held by its calls and by the timers of its idle runners."""

    __slots__ = ("__weakref__", "idle", "parked", "spawners", "spawning", "warm")

    def __init__(self, warm: _Warm) -> None:
        self.idle: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.spawners: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.spawning = 0  # spawns waiting for their grant or start
        self.parked: dict[Any, asyncio.TimerHandle] = {}  # idle runner -> its stop timer
        self.warm = warm

    def park(self, runner: Any) -> bool:
        """Keep ``runner`` warm for the next call; whether it was kept (not while a request
        waits for a grant that it may be holding)."""
        if self.warm.pressed():
            return False
        loop = asyncio.get_running_loop()
        self.parked[runner] = loop.call_later(IDLE_SECONDS, self.expire, runner)
        self.warm.parked.add(self)
        return True

    def unpark(self) -> Any:
        """A warm runner for a call (the one parked last), or ``None``."""
        if not self.parked:
            return None
        runner, timer = self.parked.popitem()
        timer.cancel()
        if not self.parked:
            self.warm.parked.discard(self)
        return runner

    def expire(self, runner: Any) -> None:
        """Stop ``runner``, idle since its timer was set (or a request needs its grant)."""
        timer = self.parked.pop(runner, None)
        if timer is None:
            return
        timer.cancel()
        if not self.parked:
            self.warm.parked.discard(self)
        own(asyncio.ensure_future(stop_quietly(runner)))


class _Warm:
    """The lanes of one runtime, and those with runners kept warm."""

    def __init__(self, runtime: Any) -> None:
        self.lanes: weakref.WeakValueDictionary[tuple[Any, str | None], Lane] = (
            weakref.WeakValueDictionary()
        )
        self.parked: set[Lane] = set()
        try:
            scheduler = runtime.grants  # the driver's: its broker is here to read
        except (RuntimeError, AttributeError):
            scheduler = None  # a worker process: its idle runners only time out
        self.scheduler = scheduler
        if scheduler is not None:
            scheduler.on_waiting(self.release)

    def pressed(self) -> bool:
        """Whether a request waits for a grant (seen where the broker is this process's)."""
        return self.scheduler is not None and self.scheduler.waiting

    def release(self) -> None:
        """A request has to wait: every idle runner gives its grant back now."""
        for lane in list(self.parked):
            for runner in list(lane.parked):
                lane.expire(runner)


_warm: weakref.WeakKeyDictionary[Any, _Warm] = weakref.WeakKeyDictionary()


def lane_for(options: ActorOptions, caller: str | None) -> Lane:
    runtime = current_runtime()
    warm = _warm.get(runtime)
    if warm is None:
        warm = _warm[runtime] = _Warm(runtime)
    try:
        key: tuple[Any, str | None] = (options, caller)
        hash(key)
    except TypeError:  # a placement that cannot be hashed: a lane of its own
        return Lane(warm)
    lane = warm.lanes.get(key)
    if lane is None:
        lane = warm.lanes[key] = Lane(warm)
    return lane


async def stop_quietly(runner: Any) -> None:
    try:
        await runner.stop()
    except Exception:  # ended meanwhile (with its caller, or its runtime): nothing to stop
        pass


async def runner_for(lane: Lane, runner_class: ActorClass[Any]) -> Any:
    """A runner for one call: handed on by a call of the lane that finished, or spawned
    for it when its turn to spawn comes first, or kept warm since a call of the lane."""
    warm = lane.unpark()
    if warm is not None:
        return warm
    if lane.spawning:
        turn: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        lane.idle.append(turn)
        try:
            got = await turn
        except asyncio.CancelledError:
            _abandon(lane.idle, turn, lane)
            raise
        if got is not _SPAWN:
            return got
    return await _spawn_for(lane, runner_class)


async def _spawn_for(lane: Lane, runner_class: ActorClass[Any]) -> Any:
    handed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    lane.spawners.append(handed)
    lane.spawning += 1
    spawning = asyncio.ensure_future(runner_class.spawn())
    spawning.add_done_callback(lambda _: _spawned(lane))
    try:
        await asyncio.wait([spawning, handed], return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        _abandon(lane.spawners, handed, lane)
        _drop(spawning)
        raise
    if handed.done():
        _forget(lane.spawners, handed)
        _drop(spawning)
        return handed.result()
    _forget(lane.spawners, handed)
    return spawning.result()


def _spawned(lane: Lane) -> None:
    """A spawn of the lane was granted, failed or withdrawn: the next call waiting without
    one files its own."""
    lane.spawning -= 1
    while lane.idle:
        turn = lane.idle.popleft()
        if not turn.done():
            turn.set_result(_SPAWN)
            return


def _forget(
    queue: collections.deque[asyncio.Future[Any]], waiting: asyncio.Future[Any]
) -> None:
    """``waiting`` waits no more: out of its queue, and nobody may hand it a runner now."""
    try:
        queue.remove(waiting)
    except ValueError:
        pass
    if not waiting.done():
        waiting.cancel()


def _abandon(
    queue: collections.deque[asyncio.Future[Any]], waiting: asyncio.Future[Any], lane: Lane
) -> None:
    """The call waiting on ``waiting`` was cancelled: a runner handed to it meanwhile stops,
    and a turn to spawn given to it goes to the next call."""
    _forget(queue, waiting)
    if waiting.cancelled():
        return
    got = waiting.result()
    if got is _SPAWN:
        lane.spawning += 1
        _spawned(lane)  # passed on, as if it had spawned
    else:
        own(asyncio.ensure_future(got.stop()))


def _drop(spawning: asyncio.Future[Any]) -> None:
    """A spawn no longer needed: withdrawn, and a runner it started meanwhile stopped."""
    spawning.add_done_callback(_stop_spare)
    spawning.cancel()


def _stop_spare(spawning: asyncio.Future[Any]) -> None:
    if spawning.cancelled() or spawning.exception() is not None:
        return
    own(asyncio.ensure_future(spawning.result().stop()))


def hand_on(lane: Lane, runner: Any) -> bool:
    """Give ``runner`` to the next call of ``lane`` that waits; whether one took it. Calls
    that filed no spawn come first, so no request is filed and withdrawn in vain."""
    for queue in (lane.idle, lane.spawners):
        while queue:
            waiting = queue.popleft()
            if not waiting.done():
                waiting.set_result(runner)
                return True
    return False


def own(future: Any) -> None:
    """Hold ``future`` (a call) until it is done: a loop holds its tasks only weakly."""
    _running.add(future)
    future.add_done_callback(_running.discard)
