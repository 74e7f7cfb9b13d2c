"""Remote functions (tasks): ``@actorrt.task`` functions whose calls run in worker processes.

A call sends at once and returns an ``AskHandle``. Calls are carried by hidden worker-process
actors (runners) spawned with the call's resources, so a task is placed, granted, pooled and
watched exactly as a worker-process actor is: a call made inside an actor is that actor's
child and, with the default ``placement="auto"``, goes into the actor's placement group (a
Tune trial's gang); its resource request is the calling actor's wait for the deadlock check;
its worker process comes from the pool. A runner that has finished a call is handed on to
the next call of the same caller and options that waits; else it is kept warm, idle, for
``IDLE_SECONDS``, so that the next such call reuses it, and then stopped (its grant back, its
process back in the pool). An idle runner never keeps a grant that a request waits for: the
driver stops every idle runner of its process the moment one of its requests has to wait, and
an idle runner is not blocked, so the deadlock check counts what it holds as coming back.
Such calls keep one spawn waiting for a grant at a time. A call whose worker process dies is
run again on a fresh runner, up to ``max_retries`` times.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import importlib
import inspect
import itertools
import weakref
from collections.abc import Callable
from typing import Any, Final, Generic, ParamSpec, TypeVar, cast, overload

from ._core._actor import ActorClass, actor
from ._core._context import current_cell, running_actor
from ._core._handle import AskHandle
from ._core._options import ActorOptions
from ._errors import ActorDiedError, DeathReason
from ._runtime import current_runtime

try:
    from asyncio import _get_running_loop as _running_loop
except ImportError:  # pragma: no cover - CPython always has it
    from asyncio.events import _get_running_loop as _running_loop

__all__ = ["TaskFunction", "task"]

P = ParamSpec("P")
R = TypeVar("R")

# Ray's defaults for a task: one CPU, three retries after its worker dies.
DEFAULT_NUM_CPUS = 1
DEFAULT_MAX_RETRIES = 3

# The options a task call takes, besides max_retries: what its worker process needs.
RESOURCE_OPTIONS = ("num_cpus", "num_gpus", "memory", "resources", "placement", "worker_env")

# Ends of a worker that are worth a second run: the process went, not the function failed.
RETRIED = frozenset({DeathReason.PROCESS_DIED, DeathReason.NODE_LOST})

# How long a runner that finished a call and found no call waiting stays warm for the next.
IDLE_SECONDS = 0.1

_ids = itertools.count(1)
# The calls running now: an asyncio task is only weakly held by its loop.
_running: set[Any] = set()


@actor(process=True)
class TaskRunner:
    """The hidden actor that carries task calls (public methods are its messages).

    ``function`` is the task function, or, where it can be imported by name, its module and
    qualified name (cheaper to send than the function with its options, on every call)."""

    def run(self, function: Sent, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return _resolved(function)(*args, **kwargs)

    async def run_async(self, function: Sent, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> Any:
        return await _resolved(function)(*args, **kwargs)


# What a call sends of its function: the TaskFunction, or its (module, qualname).
Sent = Any
_by_name: dict[tuple[str, str], Callable[..., Any]] = {}


def _resolved(function: Sent) -> Callable[..., Any]:
    """The plain function a runner runs for ``function`` (looked up once per name)."""
    if isinstance(function, TaskFunction):
        return function.function
    found = _by_name.get(function)
    if found is None:
        found = _by_name[function] = _imported(*function).function
    return found


class TaskFunction(Generic[P, R]):
    """A function made a task by ``@actorrt.task``: calling it runs it in a worker process.

    ``f(*args)`` (or Ray's ``f.remote(*args)``) sends the call at once and returns an
    ``AskHandle``: ``await`` it, pass it to ``actorrt.get`` or ``actorrt.wait``, or
    ``cancel()`` it. ``f.options(num_cpus=2)(*args)`` changes options for one call. The
    function itself is ``f.function``.
    """

    def __init__(
        self,
        function: Callable[P, R],
        options: ActorOptions,
        max_retries: int,
        origin: tuple[str, str] | None,
    ) -> None:
        self.function = function
        self.task_options = options
        self.max_retries = max_retries
        self.origin = origin
        self._runner_class: ActorClass[Any] | None = None  # made at the first call
        by_name = origin is not None and origin[0] != "__main__"
        self._sent: Sent = origin if by_name else self
        self.__name__ = function.__name__
        self.__qualname__ = function.__qualname__
        self.__module__ = function.__module__
        self.__doc__ = function.__doc__
        self.__wrapped__ = function

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> AskHandle[R]:
        """Send the call now; return the handle of its result."""
        runtime = current_runtime()
        loop = runtime.loop
        call_id = next(_ids)
        target = _TaskTarget(self.__qualname__, call_id)
        caller_now = current_cell.get() or running_actor()
        caller = None if caller_now is None else caller_now.actor_id
        work = self._attempts(target, caller, args, kwargs)
        future: asyncio.Future[Any] | Any
        if _running_loop() is loop:
            future = loop.create_task(work)
        else:
            context = contextvars.copy_context()
            if current_cell.get() is None and (actor_now := running_actor()) is not None:
                # A thread of a worker-process actor: the call is that actor's child.
                context.run(current_cell.set, actor_now)
            future = context.run(asyncio.run_coroutine_threadsafe, work, loop)
        _own(future)
        if caller is not None:
            target.caller = target.actor_id = caller
        return AskHandle(future, target, self.__name__, None)

    def remote(self, *args: P.args, **kwargs: P.kwargs) -> AskHandle[R]:
        """Ray's spelling of a call: ``f.remote(x)`` is ``f(x)``."""
        return self(*args, **kwargs)

    def options(self, **options: Any) -> TaskFunction[P, R]:
        """This task with some options changed, validated now (see ``actorrt.task``)."""
        max_retries = options.pop("max_retries", self.max_retries)
        _check_max_retries(max_retries)
        clone: TaskFunction[P, R] = TaskFunction.__new__(TaskFunction)
        clone.__dict__.update(self.__dict__)
        clone.task_options = _merged(self.task_options, options)
        clone.max_retries = max_retries
        clone._runner_class = None
        return clone

    async def _attempts(
        self,
        target: _TaskTarget,
        caller: str | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        method = "run_async" if inspect.iscoroutinefunction(self.function) else "run"
        runner_class = self._runner_class
        if runner_class is None:
            runner_class = self._runner_class = cast(ActorClass[Any], TaskRunner).options(
                **_as_actor_options(self.task_options)
            )
        lane = _lane(self.task_options, caller)
        for attempt in itertools.count():
            runner = await _runner_for(lane, runner_class)
            target.actor_id = runner.actor_id
            handed_on = False
            try:
                result = await getattr(runner, method)(self._sent, args, kwargs)
            except ActorDiedError as died:
                if died.reason not in RETRIED or 0 <= self.max_retries <= attempt:
                    raise
            except asyncio.CancelledError:
                await runner.kill()  # the caller gave up: the function is cut short
                raise
            else:
                handed_on = _hand_on(lane, runner) or lane.park(runner)
                return result
            finally:
                target.actor_id = target.caller or target.placeholder
                if not handed_on:
                    await runner.stop()
        raise AssertionError("unreachable")  # pragma: no cover

    def __reduce__(self) -> tuple[Any, ...]:
        # By name when the other process can import it; else the function by value.
        if self.origin is not None and self.origin[0] != "__main__":
            return (_load_task, (*self.origin, self.task_options, self.max_retries))
        return (TaskFunction, (self.function, self.task_options, self.max_retries, self.origin))

    def __repr__(self) -> str:
        return f"<actorrt.TaskFunction {self.__module__}.{self.__qualname__}>"


# Calls of one caller with the same options share their runners: a runner that has finished
# a call is handed on to the next waiting call instead of being stopped and another started,
# and a lane has one spawn waiting for its grant at a time (the others wait their turn, or a
# runner), so a fan-out of a hundred calls into two bundles does not file a hundred requests.
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
        _own(asyncio.ensure_future(_stop_quietly(runner)))


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


def _lane(options: ActorOptions, caller: str | None) -> Lane:
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


async def _stop_quietly(runner: Any) -> None:
    try:
        await runner.stop()
    except Exception:  # ended meanwhile (with its caller, or its runtime): nothing to stop
        pass


async def _runner_for(lane: Lane, runner_class: ActorClass[Any]) -> Any:
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
        _own(asyncio.ensure_future(got.stop()))


def _drop(spawning: asyncio.Future[Any]) -> None:
    """A spawn no longer needed: withdrawn, and a runner it started meanwhile stopped."""
    spawning.add_done_callback(_stop_spare)
    spawning.cancel()


def _stop_spare(spawning: asyncio.Future[Any]) -> None:
    if spawning.cancelled() or spawning.exception() is not None:
        return
    _own(asyncio.ensure_future(spawning.result().stop()))


def _hand_on(lane: Lane, runner: Any) -> bool:
    """Give ``runner`` to the next call of ``lane`` that waits; whether one took it. Calls
    that filed no spawn come first, so no request is filed and withdrawn in vain."""
    for queue in (lane.idle, lane.spawners):
        while queue:
            waiting = queue.popleft()
            if not waiting.done():
                waiting.set_result(runner)
                return True
    return False


def _own(future: Any) -> None:
    """Hold ``future`` (a call) until it is done: a loop holds its tasks only weakly."""
    _running.add(future)
    future.add_done_callback(_running.discard)


class _TaskTarget:
    """What a task call's handle waits on, as the handle sees it (``_core._handle.Target``):
    the call's runner once it runs, else the actor that made the call."""

    inline = True  # the handle's future is the call itself: nothing to translate

    def __init__(self, name: str, call_id: int) -> None:
        self.name = name
        self.call_id = call_id
        self.caller: str | None = None
        self.placeholder = f"task-{call_id}"
        # A wait on the call is a wait on its runner while it runs; before that, on the
        # caller (whose wait for the grant is what blocks); else on no actor at all.
        self.actor_id = self.placeholder

    def describe(self) -> str:
        return f"task {self.name}#{self.call_id}"

    async def lost(self) -> BaseException:  # pragma: no cover - inline: never asked
        raise AssertionError("a task call's handle has no connection to lose")

    def withdraw(self, answer: Any) -> None:
        pass  # cancelling the call's future cancels the call itself


def _imported(module: str, qualname: str) -> TaskFunction[..., Any]:
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    if not isinstance(found, TaskFunction):
        raise TypeError(f"{module}.{qualname} is not a task function here")
    return found


def _load_task(
    module: str, qualname: str, options: ActorOptions, max_retries: int
) -> TaskFunction[..., Any]:
    found = _imported(module, qualname)
    clone: TaskFunction[..., Any] = TaskFunction.__new__(TaskFunction)
    clone.__dict__.update(found.__dict__)
    clone.task_options, clone.max_retries = options, max_retries
    clone._runner_class = None
    return clone


def _merged(options: ActorOptions, changes: dict[str, Any]) -> ActorOptions:
    unknown = sorted(set(changes) - set(RESOURCE_OPTIONS))
    if unknown:
        allowed = ", ".join((*RESOURCE_OPTIONS, "max_retries"))
        raise TypeError(f"unknown task option(s) {', '.join(unknown)}; allowed: {allowed}")
    return options.merged(**changes)


def _as_actor_options(options: ActorOptions) -> dict[str, Any]:
    return {name: getattr(options, name) for name in RESOURCE_OPTIONS} | {
        "resources": dict(options.resources),
        "worker_env": dict(options.worker_env),
    }


def _check_max_retries(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_retries must be an int, got {value!r}")
    if value < -1:
        raise ValueError(f"max_retries must be -1 (unlimited) or more, got {value}")


@overload
def task(function: Callable[P, R], /) -> TaskFunction[P, R]: ...


@overload
def task(
    function: None = None, /, **options: Any
) -> Callable[[Callable[P, R]], TaskFunction[P, R]]: ...


def task(
    function: Callable[P, R] | None = None, /, **options: Any
) -> TaskFunction[P, R] | Callable[[Callable[P, R]], TaskFunction[P, R]]:
    """Make a function a task, as ``@actorrt.task`` or ``@actorrt.task(num_cpus=2)``.

    Each call runs the function once in a worker process (from the pool) granted the call's
    resources, and returns an ``AskHandle`` of its result at once. Inside an actor, the call
    is the actor's child: it goes into the actor's placement group (``placement="auto"``),
    ends with the actor, and while its grant waits the actor counts as waiting for it in the
    deadlock check. Options, validated here (``.options(...)`` for one call):

    Args:
        num_cpus: CPUs per call (default 1, as in Ray).
        num_gpus, memory, resources: more of what a call needs.
        placement: ``"auto"``, ``"cluster"``, a ``PlacementGroup`` or ``pg.bundle(i)``.
        worker_env: extra environment variables for the worker process.
        max_retries: runs again after the worker process died (default 3, as in Ray;
            ``-1``: without limit); an exception the function raises is never retried.

    Raises:
        TypeError: not a function (a class is an actor: ``@actorrt.actor``), a generator
            function, or an unknown option.
    """
    max_retries = options.pop("max_retries", DEFAULT_MAX_RETRIES)
    _check_max_retries(max_retries)
    options.setdefault("num_cpus", DEFAULT_NUM_CPUS)
    defaults = _merged(ActorOptions(process=True), options)

    def wrap(target: Callable[P, R]) -> TaskFunction[P, R]:
        if inspect.isclass(target):
            raise TypeError(
                f"{target.__name__} is a class: classes are actors, made with @actorrt.actor"
            )
        if not inspect.isfunction(target):
            raise TypeError(f"@actorrt.task takes a function, got {target!r}")
        if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
            raise TypeError(
                f"{target.__name__} is a generator function, which a task cannot be: return "
                "a list of the items instead"
            )
        origin = None if "<locals>" in target.__qualname__ else (
            target.__module__, target.__qualname__
        )
        return TaskFunction(target, defaults, max_retries, origin)

    if function is None:
        return wrap
    return wrap(function)
