"""Proxies for actors in other processes: what a ref points to when its actor is elsewhere.

``RemoteActor`` sends calls over a connection and keeps its own future per pending ask, so
that when the far side goes away the ask fails with ``ActorDiedError`` (saying how the
process ended), not with a bare connection error. Two kinds:

- ``ProcessActor`` lives in the runtime that owns a worker process and supervises the
  actor in it: a crash in the actor, or the death of its process, fails what is pending and
  restarts it (a new instance; a new process if the old one died) while ``max_restarts``
  allows.
- ``RelayTarget`` lives in a worker process, for an actor hosted anywhere else; its calls go
  through the owning runtime, which routes them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ._errors import ActorDiedError, MailboxFullError, RuntimeClosedError
from ._handle import AskHandle
from ._wire_connection import DEFAULT_WRITE_LIMITS, Connection, ConnectionLostError

if TYPE_CHECKING:
    from ._runtime import Runtime

logger = logging.getLogger("actorrt")

try:
    from asyncio import _get_running_loop as _running_loop
except ImportError:  # pragma: no cover - CPython always has it
    from asyncio.events import _get_running_loop as _running_loop


class WireReply:
    """Where an actor's answer goes when the ask came over a connection.

    Has the part of the future interface that mailboxes and ``settle`` use, so an envelope
    can carry it in place of a future and the answer is written straight to the wire.
    """

    # __slots__ for speed: one per remote ask.
    __slots__ = ("_conn", "_context", "_done", "_request_id")

    def __init__(self, conn: Connection, request_id: int, context: str) -> None:
        self._conn = conn
        self._request_id = request_id
        self._context = context
        self._done = False

    def done(self) -> bool:
        return self._done

    def cancelled(self) -> bool:
        return False

    def set_result(self, value: Any) -> None:
        self._done = True
        self._conn.reply(self._request_id, value, context=self._context)

    def set_exception(self, exc: BaseException) -> None:
        self._done = True
        self._conn.reply_error(self._request_id, exc)


def _copy_to_thread(source: asyncio.Future[Any], target: concurrent.futures.Future[Any]) -> None:
    if source.cancelled():
        target.cancel()
    elif (exc := source.exception()) is not None:
        target.set_exception(exc)
    else:
        target.set_result(source.result())


class RemoteActor:
    """Sends calls to an actor in another process over a connection."""

    inline = False
    accepting = False  # refs' inline fast path never applies; see ``inline``

    def __init__(
        self,
        runtime: Runtime,
        actor_id: str,
        cls_name: str,
        methods: frozenset[str] | dict[str, Any],
        name: str | None,
    ) -> None:
        self.runtime = runtime
        self.loop = runtime.loop
        self.actor_id = actor_id
        self.cls_name = cls_name
        self.methods = methods
        self.name = name
        self.conn: Connection | None = None
        self._pending: set[asyncio.Future[Any]] = set()

    def describe(self) -> str:
        name = f" name={self.name!r}" if self.name else ""
        return f"{self.cls_name}(id={self.actor_id}{name})"

    # ---------------------------------------------------------------- sending

    def ask(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float | None
    ) -> AskHandle[Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        if _running_loop() is not self.loop:
            return self._ask_from_thread(method, args, kwargs, deadline)
        own: asyncio.Future[Any] = self.loop.create_future()
        self._send_ask(own, method, args, kwargs)
        return AskHandle(own, self, method, deadline)

    def _ask_from_thread(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], deadline: float | None
    ) -> AskHandle[Any]:
        if self.runtime.closed:
            raise RuntimeClosedError(f"{self.describe()} belonged to a runtime that has shut down")
        cf: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def on_loop() -> None:
            own: asyncio.Future[Any] = self.loop.create_future()
            own.add_done_callback(lambda f: _copy_to_thread(f, cf))
            try:
                self._send_ask(own, method, args, kwargs)
            except Exception as exc:  # unsendable: from another thread it fails at the await
                if not own.done():
                    own.set_exception(exc)

        self.loop.call_soon_threadsafe(on_loop)
        return AskHandle(cf, self, method, deadline)

    def _send_ask(
        self,
        own: asyncio.Future[Any],
        method: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        conn = self._usable_conn()
        if conn is None:
            own.set_exception(self.death_error())
            return
        try:
            sent = conn.request(
                ("call", self.actor_id, method, args, kwargs),
                context=f"the arguments of {self.cls_name}.{method}()",
            )
        except ConnectionLostError:
            self._pending.add(own)
            self._connection_lost(own)  # the far end is going: its end answers this ask
            return
        self._pending.add(own)
        sent.add_done_callback(lambda fut: self._copy(own, fut))

    def _copy(self, own: asyncio.Future[Any], sent: asyncio.Future[Any]) -> None:
        if own.done():
            self._pending.discard(own)
            return
        if sent.cancelled():
            return
        exc = sent.exception()
        if isinstance(exc, ConnectionLostError):
            self._connection_lost(own)  # the death handler answers it, with the real cause
            return
        self._pending.discard(own)
        if exc is not None:
            own.set_exception(exc)
        else:
            own.set_result(sent.result())

    def _connection_lost(self, own: asyncio.Future[Any]) -> None:
        """An ask's connection ended; the subclass knows how the actor ended."""

    def tell(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if _running_loop() is not self.loop and not self.runtime.closed:

            async def on_loop() -> None:
                self.tell(method, args, kwargs)

            # From another thread: wait for the loop to send it, so errors raise here.
            asyncio.run_coroutine_threadsafe(on_loop(), self.loop).result()
            return
        self._check_loop()
        conn = self._usable_conn()
        if conn is None:
            raise self.death_error()
        if conn.write_buffer_size > TELL_HIGH_WATER:
            raise MailboxFullError(
                f"{self.describe()} is not keeping up (its connection is paused by flow "
                f"control); use `await ref.{method}.tell_wait(...)` to wait for room"
            )
        try:
            conn.notify(
                ("tell", self.actor_id, method, args, kwargs),
                context=f"the arguments of {self.cls_name}.{method}()",
            )
        except ConnectionLostError as exc:
            raise ActorDiedError(
                f"{self.describe()} cannot be reached: {exc}", actor=self.describe()
            ) from exc

    def tell_wait(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Awaitable[None]:
        if _running_loop() is not self.loop and not self.runtime.closed:

            async def on_loop() -> None:
                await self.tell_wait(method, args, kwargs)

            return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(on_loop(), self.loop))
        self._check_loop()
        conn = self._usable_conn()
        if conn is None:
            raise self.death_error()
        conn.notify(
            ("tell", self.actor_id, method, args, kwargs),
            context=f"the arguments of {self.cls_name}.{method}()",
        )
        return conn.drain()

    def _check_loop(self) -> None:
        if self.runtime.closed:
            raise RuntimeClosedError(f"{self.describe()} belonged to a runtime that has shut down")

    def _usable_conn(self) -> Connection | None:
        return self.conn

    def fail_pending(self, error: BaseException) -> None:
        pending, self._pending = self._pending, set()
        for fut in pending:
            if not fut.done():
                fut.set_exception(error)

    def death_error(self) -> ActorDiedError:
        return ActorDiedError(f"actor {self.describe()} has ended", actor=self.describe())


# A plain tell raises MailboxFullError once this many bytes wait to be written to the actor's
# process: its connection is then paused by flow control, the cross-process full mailbox.
TELL_HIGH_WATER = DEFAULT_WRITE_LIMITS[0]


class RelayTarget(RemoteActor):
    """In a worker: an actor hosted elsewhere, reached through the owning runtime."""

    def __init__(
        self,
        runtime: Runtime,
        conn: Connection,
        actor_id: str,
        cls_name: str,
        methods: frozenset[str],
        name: str | None,
    ) -> None:
        super().__init__(runtime, actor_id, cls_name, methods, name)
        self.conn = conn

    def _connection_lost(self, own: asyncio.Future[Any]) -> None:
        self._pending.discard(own)
        own.set_exception(
            ActorDiedError(
                f"the runtime that owns {self.describe()} went away",
                actor=self.describe(),
                reason="runtime shut down",
            )
        )

    async def stop(self) -> ActorDiedError:
        return await self._lifecycle("stop")

    async def kill(self) -> ActorDiedError:
        return await self._lifecycle("kill")

    async def wait_stopped(self) -> ActorDiedError:
        return await self._lifecycle("wait_stopped")

    async def _lifecycle(self, op: str) -> ActorDiedError:
        assert self.conn is not None
        result: ActorDiedError = await self.conn.request((op, self.actor_id))
        return result


class DeadTarget(RemoteActor):
    """A ref to an actor this process knows nothing of (it ended): every call fails."""

    def __init__(
        self, runtime: Runtime, actor_id: str, cls_name: str, methods: frozenset[str]
    ) -> None:
        super().__init__(runtime, actor_id, cls_name, methods, None)

    def death_error(self) -> ActorDiedError:
        return ActorDiedError(
            f"actor {self.describe()} no longer exists", actor=self.describe(), reason="stopped"
        )

    async def stop(self) -> ActorDiedError:
        return self.death_error()

    async def kill(self) -> ActorDiedError:
        return self.death_error()

    async def wait_stopped(self) -> ActorDiedError:
        return self.death_error()
