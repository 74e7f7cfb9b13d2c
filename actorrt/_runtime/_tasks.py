"""Remote functions (tasks): ``@actorrt.task`` functions whose calls run in worker processes.

A call sends at once and returns an ``AskHandle`` (a generator function's: a ``TaskStream``,
``_task_streams``). Calls are carried by hidden worker-process actors (runners) spawned with
the call's resources, so a task is placed, granted, pooled and watched exactly as a
worker-process actor is: a call made inside an actor is that actor's child and, with the
default ``placement="auto"``, goes into the actor's placement group (a Tune trial's gang);
its resource request is the calling actor's wait for the deadlock check; its worker process
comes from the pool. Runners are shared by the calls of one caller and options, and kept warm
for a moment between calls (``_task_lanes``). A call whose worker process dies is run again
on a fresh runner, up to ``max_retries`` times."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import importlib
import inspect
import itertools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Generic, ParamSpec, TypeVar, cast, overload

from .._core._actor import ActorClass, actor
from .._core._context import current_cell, running_actor
from .._core._handle import AskHandle
from .._core._options import ActorOptions
from .._errors import ActorDiedError
from ._root import current_runtime
from ._task_lanes import RETRIED, hand_on, lane_for, own, runner_for
from ._task_streams import TaskStream, open_stream

try:
    from asyncio import _get_running_loop as _running_loop
except ImportError:  # pragma: no cover - CPython always has it
    from asyncio.events import _get_running_loop as _running_loop

__all__ = ["TaskFunction", "task"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

# Ray's defaults for a task: one CPU, three retries after its worker dies.
DEFAULT_NUM_CPUS = 1
DEFAULT_MAX_RETRIES = 3

# The options a task call takes, besides max_retries: what its worker process needs.
RESOURCE_OPTIONS = ("num_cpus", "num_gpus", "memory", "resources", "placement", "worker_env")


_ids = itertools.count(1)


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

    def stream(self, function: Sent, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Iterator[Any]:
        yield from _resolved(function)(*args, **kwargs)  # closing this closes the function's

    async def stream_async(self, function: Sent, args: tuple[Any, ...],
                           kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        items = _resolved(function)(*args, **kwargs)
        try:
            async for item in items:
                yield item
        finally:
            await items.aclose()


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
    ``cancel()`` it (of a generator function: a ``TaskStream`` of its items).
    ``f.options(num_cpus=2)(*args)`` changes options for one call. The function itself is
    ``f.function``.
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
        self._streams = inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(
            function
        )
        self.__name__ = function.__name__
        self.__qualname__ = function.__qualname__
        self.__module__ = function.__module__
        self.__doc__ = function.__doc__
        self.__wrapped__ = function

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> AskHandle[R]:
        """Send the call now; return the handle of its result (of a generator function: the
        ``TaskStream`` of its items)."""
        runtime = current_runtime()
        caller_now = current_cell.get() or running_actor()
        caller = None if caller_now is None else caller_now.actor_id
        if self._streams:
            opening = self._submit(runtime.loop, self._open(caller, args, kwargs))
            return cast(AskHandle[R], TaskStream(opening, runtime.loop, self.__name__))
        target = _TaskTarget(self.__qualname__, next(_ids))
        future = self._submit(runtime.loop, self._attempts(target, caller, args, kwargs))
        if caller is not None:
            target.caller = target.actor_id = caller
        return AskHandle(future, target, self.__name__, None)

    @staticmethod
    def _submit(loop: asyncio.AbstractEventLoop, work: Coroutine[Any, Any, T]) -> Any:
        """Run ``work`` on the runtime's loop, as the caller's (the calling actor's child)."""
        future: asyncio.Future[T] | concurrent.futures.Future[T]
        if _running_loop() is loop:
            future = loop.create_task(work)
        else:
            context = contextvars.copy_context()
            if current_cell.get() is None and (actor_now := running_actor()) is not None:
                # A thread of a worker-process actor: the call is that actor's child.
                context.run(current_cell.set, actor_now)
            future = context.run(asyncio.run_coroutine_threadsafe, work, loop)
        own(future)
        return future

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
        runner_class = self._runner()
        lane = lane_for(self.task_options, caller)
        for attempt in itertools.count():
            runner = await runner_for(lane, runner_class)
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
                handed_on = hand_on(lane, runner) or lane.park(runner)
                return result
            finally:
                target.actor_id = target.caller or target.placeholder
                if not handed_on:
                    await runner.stop()
        raise AssertionError("unreachable")  # pragma: no cover

    async def _open(
        self, caller: str | None, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        method = "stream_async" if inspect.isasyncgenfunction(self.function) else "stream"
        lane = lane_for(self.task_options, caller)
        call = (self._sent, args, kwargs)
        return await open_stream(lane, self._runner(), method, call, self.max_retries)

    def _runner(self) -> ActorClass[Any]:
        """The runner class with this task's options (made once)."""
        runner_class = self._runner_class
        if runner_class is None:
            runner_class = self._runner_class = cast(ActorClass[Any], TaskRunner).options(
                **_as_actor_options(self.task_options)
            )
        return runner_class

    def __reduce__(self) -> tuple[Any, ...]:
        # By name when the other process can import it; else the function by value.
        if self.origin is not None and self.origin[0] != "__main__":
            return (_load_task, (*self.origin, self.task_options, self.max_retries))
        return (TaskFunction, (self.function, self.task_options, self.max_retries, self.origin))

    def __repr__(self) -> str:
        return f"<actorrt.TaskFunction {self.__module__}.{self.__qualname__}>"


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

    A generator function (or async generator function) streams: a call returns the
    ``TaskStream`` of its items at once (``async for``, or ``for`` in synchronous code), which
    come as they are produced, pulled in batches (the generator runs at most one batch ahead
    of the caller), each once and in order; an exception it raises ends the stream with that
    exception; closing the stream closes the generator in its worker.

    Raises:
        TypeError: not a function (a class is an actor: ``@actorrt.actor``), or an unknown
            option.
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
        origin = None if "<" in target.__qualname__ else (  # <locals>, <lambda>
            target.__module__, target.__qualname__
        )
        return TaskFunction(target, defaults, max_retries, origin)

    if function is None:
        return wrap
    return wrap(function)
