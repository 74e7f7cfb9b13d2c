"""References to actors, and the method handles that send messages through them."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable
from typing import Any, Generic, Protocol, TypeVar

from .._errors import ActorDiedError

try:
    from asyncio import _get_running_loop as _running_loop
except ImportError:  # pragma: no cover - CPython always has it
    from asyncio.events import _get_running_loop as _running_loop

from ._handle import AskHandle, Target
from ._streams import DEFAULT_BATCH, Stream, check_batch, is_stream


class RefTarget(Target, Protocol):
    """What a ref sends through: an inline actor's cell, or a proxy for an actor elsewhere
    (``actorrt._processes._proxies``). Refs read the mailbox of an inline one directly, for
    speed (``inline`` is ``True`` only for cells)."""

    cls_name: str
    name: str | None
    accepting: bool
    loop: asyncio.AbstractEventLoop
    mailbox: Any  # a cell's Mailbox; never read on a proxy (``inline`` is False)
    methods: Any  # the method names (a mapping or a set): ``name in methods``
    # A target may also name the MethodRef subclass its refs' methods are (``method_ref``):
    # one that sends its asks itself, a call less per ask.

    def ask(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float | None
    ) -> AskHandle[Any]: ...

    def tell(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None: ...

    def tell_wait(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Awaitable[None]: ...

    async def stop(self, grace: float | None = None) -> ActorDiedError: ...

    async def kill(self) -> ActorDiedError: ...

    async def wait_stopped(self) -> ActorDiedError: ...

A = TypeVar("A")

# Names an ActorRef keeps for itself; an actor class may not define methods with these names.
RESERVED_NAMES = frozenset({"stop", "kill", "wait_stopped", "actor_id"})


class MethodRef:
    """One method of one actor. Calling it sends an ask; ``.tell`` sends without a reply."""

    # __slots__ for speed: a call goes through this object.
    __slots__ = ("_cell", "_name", "_timeout")

    def __init__(self, cell: RefTarget, name: str, timeout: float | None) -> None:
        self._cell = cell
        self._name = name
        self._timeout = timeout

    def __call__(self, *args: Any, **kwargs: Any) -> AskHandle[Any]:
        """Send an ask now and return the handle to await for its answer."""
        cell = self._cell
        loop = cell.loop
        # The common case inline, for speed: on the actor's loop, room in its mailbox.
        if cell.inline and self._timeout is None and _running_loop() is loop and cell.accepting:
            mailbox = cell.mailbox
            queue = mailbox.queue
            if len(queue) < mailbox.size and not mailbox.overflow:
                fut = loop.create_future()
                queue.append((self._name, args, kwargs, fut))
                waiter = mailbox.waiter
                if waiter is not None:
                    mailbox.wake(waiter)
                elif mailbox.idle is not None:
                    mailbox.resume()
                return AskHandle(fut, cell, self._name, None)
        return cell.ask(self._name, args, kwargs, self._timeout)

    def remote(self, *args: Any, **kwargs: Any) -> AskHandle[Any]:
        """Ray's spelling of a call: ``ref.method.remote(x)`` is ``ref.method(x)`` (it sends
        at once and returns the handle to await, or to pass to ``actorrt.get``)."""
        return self(*args, **kwargs)

    def tell(self, *args: Any, **kwargs: Any) -> None:
        """Send without a reply. Raises ``MailboxFullError`` if the mailbox is full.

        If the method raises, the actor crashes: the error is logged and goes to its
        supervisor (a restart if ``max_restarts`` allows).
        """
        cell = self._cell
        # The common case inline, for speed: on the actor's loop, room in its mailbox.
        if cell.inline and _running_loop() is cell.loop and cell.accepting:
            mailbox = cell.mailbox
            queue = mailbox.queue
            if len(queue) < mailbox.size and not mailbox.overflow:
                queue.append((self._name, args, kwargs, None))
                waiter = mailbox.waiter
                if waiter is not None:
                    mailbox.wake(waiter)
                elif mailbox.idle is not None:
                    mailbox.resume()
                return
        cell.tell(self._name, args, kwargs)

    def tell_wait(self, *args: Any, **kwargs: Any) -> Awaitable[None]:
        """Send without a reply, waiting for room when the mailbox is full (backpressure).

        Like every call, it takes its place in line at call time; the awaitable it returns
        completes once the message is in the mailbox (not once it has run). Cancelling
        that wait withdraws the message if it is still waiting for room.
        """
        return self._cell.tell_wait(self._name, args, kwargs)

    def options(self, *, timeout: float | None = None, **unknown: Any) -> MethodRef:
        """This method with per-call options.

        Args:
            timeout: seconds the caller waits for the answer before ``AskTimeoutError``
                (counted from the call). The ask is then withdrawn: a message the actor
                has not begun never runs; one already running runs to its end.

        Raises:
            TypeError: an option other than these (Ray's ``num_returns`` among them).
        """
        if unknown:
            raise _unknown_options(self, unknown, ("timeout",))
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, int | float):
                raise TypeError(f"timeout must be a number of seconds, got {timeout!r}")
            if not math.isfinite(timeout) or timeout <= 0:
                raise ValueError(f"timeout must be a positive finite number, got {timeout!r}")
            timeout = float(timeout)
        return type(self)(self._cell, self._name, timeout)

    def __repr__(self) -> str:
        return f"<actorrt.MethodRef {self._cell.describe()}.{self._name}>"


# What a Ray option of an actor method call becomes here.
_RAY_METHOD_OPTIONS = {
    "num_returns": "return a tuple and unpack the answer (a generator method streams "
                   "its items by itself)",
}


def _unknown_options(
    method: MethodRef | StreamMethod, unknown: dict[str, Any], allowed: tuple[str, ...]
) -> TypeError:
    names = ", ".join(sorted(unknown))
    hints = "".join(f"; for Ray's {n}, {_RAY_METHOD_OPTIONS[n]}"
                    for n in sorted(unknown) if n in _RAY_METHOD_OPTIONS)
    return TypeError(
        f"unknown option(s) {names} for {method._cell.describe()}.{method._name}(); "
        f"allowed: {', '.join(allowed)}{hints}"
    )


class StreamMethod:
    """A generator method of one actor: calling it starts the generator and returns the
    :class:`~actorrt._core._streams.Stream` of its items (``async for``, or ``for`` in
    synchronous code)."""

    __slots__ = ("_batch", "_cell", "_name", "_timeout")

    def __init__(
        self, cell: RefTarget, name: str, timeout: float | None, batch: int = DEFAULT_BATCH
    ) -> None:
        self._cell = cell
        self._name = name
        self._timeout = timeout
        self._batch = batch

    def _sender(self, name: str) -> MethodRef:
        cell = self._cell
        method: MethodRef = getattr(cell, "method_ref", MethodRef)(cell, name, self._timeout)
        return method

    def __call__(self, *args: Any, **kwargs: Any) -> Stream:
        """Start the generator now (the call is sent at once); return its stream."""
        opened = self._sender(self._name)(*args, **kwargs)
        return Stream(self._sender, self._name, opened, self._batch, self._cell.loop)

    def remote(self, *args: Any, **kwargs: Any) -> Stream:
        """Ray's spelling of a call: the same as calling the method."""
        return self(*args, **kwargs)

    def tell(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            f"{self._cell.describe()}.{self._name} is a generator method: its items go to "
            f"the caller, so it cannot be told; iterate over ref.{self._name}(...) instead"
        )

    tell_wait = tell

    def options(
        self, *, timeout: float | None = None, batch_size: int = DEFAULT_BATCH, **unknown: Any
    ) -> StreamMethod:
        """This method with per-call options.

        Args:
            timeout: seconds each step of the stream (its start, each batch) may take
                before ``AskTimeoutError``.
            batch_size: items the actor produces per step (default 16): the consumer
                holds at most two batches, and the generator runs at most one ahead.

        Raises:
            TypeError: an option other than these (Ray's ``num_returns`` among them).
        """
        if unknown:
            raise _unknown_options(self, unknown, ("timeout", "batch_size"))
        checked = MethodRef(self._cell, self._name, None).options(timeout=timeout)
        return StreamMethod(self._cell, self._name, checked._timeout, check_batch(batch_size))

    def __repr__(self) -> str:
        return f"<actorrt.StreamMethod {self._cell.describe()}.{self._name}>"


class ActorRef(Generic[A]):
    """A reference to an actor: call its methods, stop it, watch it.

    ``ref.method(*args)`` sends an ask at once and returns an awaitable handle;
    ``ref.method.tell(*args)`` sends without a reply. Refs compare equal when they point to
    the same actor, hash, and stay valid across the actor's restarts.
    """

    def __init__(self, cell: RefTarget) -> None:
        object.__setattr__(self, "_cell", cell)

    _cell: RefTarget

    def __getattr__(self, name: str) -> Any:
        cell = self._cell
        if name.startswith("_") or name not in cell.methods or "." in name:
            if name.startswith("__"):
                raise AttributeError(name)
            methods = ", ".join(sorted(m for m in cell.methods if "." not in m)) or "(none)"
            raise AttributeError(
                f"actor class {cell.cls_name} has no public method {name!r}; "
                f"its methods are: {methods}"
            )
        method: Any
        if is_stream(cell.methods, name):
            method = StreamMethod(cell, name, None)
        else:
            method = getattr(cell, "method_ref", MethodRef)(cell, name, None)
        # Cache on the instance so later lookups skip __getattr__ entirely.
        object.__setattr__(self, name, method)
        return method

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ActorRef is immutable; cannot set {name!r}")

    @property
    def actor_id(self) -> str:
        """The actor's id, unique within the runtime's lifetime."""
        return self._cell.actor_id

    async def stop(self, grace: float | None = None) -> ActorDiedError:
        """Stop after the messages sent before this call; wait until the actor has ended.

        Messages sent after it fail with ``ActorDiedError``. Children are stopped first, then
        ``on_stop`` runs. Returns what ``wait_stopped()`` returns.

        Args:
            grace: seconds to wait for the graceful stop; if the actor has not ended by then
                it is killed (a warning says so) and the result says ``"killed"``. ``None``
                (the default) waits as long as the actor works through its queue, but a
                worker-process actor whose process is stopped by a signal (SIGSTOP) is
                killed as soon as that is seen, since it could never finish.

        Raises:
            TypeError: ``grace`` is not a number.
            ValueError: ``grace`` is negative or not finite.
        """
        if grace is not None:
            if isinstance(grace, bool) or not isinstance(grace, int | float):
                raise TypeError(f"stop(grace=...) must be a number of seconds, got {grace!r}")
            if not math.isfinite(grace) or grace < 0:
                raise ValueError(
                    f"stop(grace=...) must be >= 0 and finite (seconds), got {grace!r}"
                )
            grace = float(grace)
        return await self._cell.stop(grace)

    async def kill(self) -> ActorDiedError:
        """End the actor now: cancel its current message and fail every queued one.

        ``on_stop`` does not run. Children are killed too.
        """
        return await self._cell.kill()

    async def wait_stopped(self) -> ActorDiedError:
        """Wait until the actor has ended for good (not a restart), and say why.

        Returns the ``ActorDiedError`` that calls to it now get: its ``reason``
        (``"stopped"``, ``"killed"``, ``"crashed"``, ...) and ``cause``.
        """
        return await self._cell.wait_stopped()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorRef) and other._cell.actor_id == self._cell.actor_id

    def __hash__(self) -> int:
        return hash(self._cell.actor_id)

    def __repr__(self) -> str:
        return f"<actorrt.ActorRef {self._cell.describe()}>"

    def __reduce__(self) -> tuple[Any, ...]:
        raise TypeError(
            f"{self!r} points to an inline actor and cannot be pickled; refs travel between "
            "processes through actorrt's own messages"
        )
