"""Proxies for actors in other processes: what a ref points to when its actor is elsewhere.

``RemoteActor`` sends calls over a connection and keeps its own future per pending ask, so
that when the far side goes away the ask fails with ``ActorDiedError`` (saying how the
process ended), not with a bare connection error. Two kinds:

- ``ProcessActor`` lives in the runtime that owns a worker process and supervises the
  actor in it: a crash in the actor, or the death of its process, fails what is pending and
  restarts it (a new instance; a new process if the old one died) while ``max_restarts``
  allows.
- ``RelayTarget`` stands for an actor in another process, reached over the connection the
  router chose for its address: in a worker, the owner's (which routes it on); in the owner,
  the connection of the worker that hosts it (an inline actor of that worker).

``DeadTarget`` stands for a ref whose actor cannot be reached any more (it ended, its worker
process is gone, or its runtime is): every call fails, saying which.

Everything sent is a typed message of :mod:`actorrt._wire._messages` (``Call``, ``Tell``,
``Stop``, ``Kill``, ``WaitStopped``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Final

from .._core._handle import AskHandle, ThreadWait
from .._core._ref import MethodRef, RefTarget
from .._errors import ActorDiedError, DeathReason, MailboxFullError, RuntimeClosedError
from .._wire._codec import FLAG_TOP_TUPLE
from .._wire._connection import (
    DEFAULT_WRITE_LIMITS,
    ERROR,
    REPLY,
    Connection,
    ConnectionLostError,
)
from .._wire._messages import Call, CancelCall, Kill, Stop, Tell, WaitStopped, tag_of
from .._wire._refs import RefAddress

if TYPE_CHECKING:
    from ._services import PlacementServices

logger = logging.getLogger("actorrt")

try:
    from asyncio import _get_running_loop as _running_loop
except ImportError:  # pragma: no cover - CPython always has it
    from asyncio.events import _get_running_loop as _running_loop


class WireReply:
    """Where an actor's answer goes when the ask came over a connection.

    Has the part of the future interface that mailboxes and ``settle`` use, so an envelope
    can carry it in place of a future and the answer is written straight to the wire. It is
    also the reply's context: its ``str()`` names the result, formatted only when the result
    cannot be sent.
    """

    # __slots__ for speed: one per remote ask.
    __slots__ = ("_cancelled", "_cls_name", "_conn", "_done", "_method", "_request_id")

    def __init__(self, conn: Connection, request_id: int, cls_name: str, method: str) -> None:
        self._conn = conn
        self._request_id = request_id
        self._cls_name = cls_name
        self._method = method
        self._done = False
        self._cancelled = False

    def __str__(self) -> str:
        return f"the result of {self._cls_name}.{self._method}()"

    def done(self) -> bool:
        return self._done

    def cancelled(self) -> bool:
        return self._cancelled

    def matches(self, conn: Connection, request_id: int) -> bool:
        return self._conn is conn and self._request_id == request_id

    def cancel(self) -> None:
        """Its caller withdrew the ask (``CancelCall``): no reply goes out, and the serving
        loop drops the envelope unrun."""
        if not self._done:
            self._done = self._cancelled = True
            self._conn.drop_reply()

    def set_result(self, value: Any) -> None:
        self._done = True
        self._conn.reply(self._request_id, value, context=self)

    def set_exception(self, exc: BaseException) -> None:
        self._done = True
        self._conn.reply_error(self._request_id, exc)

    def settle_run(self, batch: list[Any], outcomes: list[tuple[bool, Any]]) -> bool:
        """Answer the run of envelopes ``batch`` ran as, when every one of them came over
        this connection: one frame for all of them (``_serving``'s ``settle_run``)."""
        conn = self._conn
        answers: list[Any] = []
        for envelope, (ok, value) in zip(batch, outcomes, strict=True):
            reply = envelope[3]
            if type(reply) is not WireReply or reply._conn is not conn or reply._done:
                return False
            if ok and type(value) is tuple:
                # As a tuple's own frame carries it: a plain array, flagged (no tuple hook
                # on either side, and the batch decodes natively when nothing else in it
                # is a tuple).
                answers += (reply._request_id, _TUPLE_REPLY, list(value))
            else:
                answers += (reply._request_id, REPLY if ok else ERROR, value)
        if not conn.reply_run(answers):
            return False
        for envelope in batch:
            envelope[3]._done = True
        return True


class RemoteMethod(MethodRef):
    """A method of an actor in another process: calling it sends the ``Call`` itself, as
    :meth:`RemoteActor.ask` does (one call less per ask on the hot path)."""

    # __slots__ for speed; the error context of its arguments is made once per method ref.
    __slots__ = ("_context",)

    def __init__(self, cell: RefTarget, name: str, timeout: float | None) -> None:
        super().__init__(cell, name, timeout)
        remote: RemoteActor = cell  # type: ignore[assignment]  # made by RemoteActor
        self._context = remote.arguments_context(name)

    def __call__(self, *args: Any, **kwargs: Any) -> AskHandle[Any]:
        cell: RemoteActor = self._cell  # type: ignore[assignment]  # made by RemoteActor
        conn = cell.conn
        if (
            self._timeout is None
            and conn is not None
            and cell.running
            and _running_loop() is cell.loop
        ):
            # RemoteActor._ask_now's work, in place: one Python call less per ask.
            try:
                sent = conn.request_tagged(
                    [_CALL, cell.actor_id, self._name, list(args), kwargs], self._context
                )
            except ConnectionLostError as exc:
                sent = cell.lost_now(exc)
            return AskHandle(sent, cell, self._name, None)
        return cell.ask(self._name, args, kwargs, self._timeout)


class RemoteActor:
    """Sends calls to an actor in another process over a connection."""

    inline = False
    accepting = False  # refs' inline fast path never applies; see ``inline``
    method_ref = RemoteMethod  # what a ref's methods are
    running = True  # calls go out on ``conn`` (a process actor clears it while restarting)

    def __init__(
        self,
        runtime: PlacementServices,
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
        self._contexts: dict[str, str] = {}

    def describe(self) -> str:
        name = f" name={self.name!r}" if self.name else ""
        return f"{self.cls_name}(id={self.actor_id}{name})"

    # ---------------------------------------------------------------- sending

    def ask(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float | None
    ) -> AskHandle[Any]:
        conn = self.conn
        if timeout is None and conn is not None and self.running and _running_loop() is self.loop:
            return self._ask_now(conn, method, args, kwargs)
        deadline = None if timeout is None else time.monotonic() + timeout
        if _running_loop() is not self.loop:
            return self._ask_from_thread(method, args, kwargs, deadline)
        return AskHandle(self._submit(method, args, kwargs), self, method, deadline)

    def arguments_context(self, method: str) -> str:
        """What the arguments of a call to ``method`` are, for the error of one that cannot
        be sent; made once per method."""
        context = self._contexts.get(method)
        if context is None:
            context = self._contexts[method] = f"the arguments of {self.cls_name}.{method}()"
        return context

    def lost_now(self, exc: ConnectionLostError) -> asyncio.Future[Any]:
        """The future of an ask whose connection was lost as it was sent."""
        lost: asyncio.Future[Any] = self.loop.create_future()
        lost.set_exception(exc)
        return lost

    def _ask_now(
        self, conn: Connection, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> AskHandle[Any]:
        """The hot path, as _submit does it: on the loop, connected, no timeout."""
        try:
            sent = conn.request_tagged(
                [_CALL, self.actor_id, method, list(args), kwargs], self.arguments_context(method)
            )
        except ConnectionLostError as exc:
            sent = self.lost_now(exc)
        return AskHandle(sent, self, method, None)

    def withdraw(self, answer: asyncio.Future[Any] | concurrent.futures.Future[Any]) -> None:
        """The caller gave up on an ask: forget its reply and tell the far side, which drops
        the message if it has not begun. From the caller's loop; an ask made from another
        thread withdraws itself when its future is cancelled (``_ask_from_thread``)."""
        conn = self.conn
        if conn is None or not isinstance(answer, asyncio.Future):
            return
        request_id = conn.withdraw(answer)
        if request_id is not None and not conn.is_closing():
            conn.notify([_CANCEL_CALL, self.actor_id, request_id], tagged=True, urgent=True)

    def _ask_from_thread(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], deadline: float | None
    ) -> AskHandle[Any]:
        if self.runtime.closed:
            raise RuntimeClosedError(f"{self.describe()} belonged to a runtime that has shut down")
        cf: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def on_loop() -> None:
            if cf.cancelled():
                return  # given up before it was sent
            try:
                sent = self._submit(method, args, kwargs)
            except Exception as exc:  # unsendable: from another thread it fails at the wait
                cf.set_exception(exc)
                return
            sent.add_done_callback(functools.partial(self._answered, cf))
            cf.add_done_callback(functools.partial(self._given_up, sent))

        self.loop.call_soon_threadsafe(on_loop)
        return AskHandle(cf, self, method, deadline)

    def _given_up(self, sent: asyncio.Future[Any], cf: concurrent.futures.Future[Any]) -> None:
        """The thread's ask was cancelled (its caller gave up): withdraw what was sent."""
        if cf.cancelled():
            try:
                self.loop.call_soon_threadsafe(self._withdraw_sent, sent)
            except RuntimeError:  # the loop has closed: nothing is left to withdraw
                pass

    def _withdraw_sent(self, sent: asyncio.Future[Any]) -> None:
        if sent.cancel():
            self.withdraw(sent)

    def _answered(self, cf: concurrent.futures.Future[Any], sent: asyncio.Future[Any]) -> None:
        # An answer goes to the waiting thread at once; an error is translated first, as an
        # awaited ask's is (a lost connection becomes the actor's death).
        if not sent.cancelled() and sent.exception() is None:
            if not cf.done():  # a wait ended as a proven deadlock is done already
                cf.set_result(sent.result())
            return
        self.loop.create_task(self._answer(sent, cf))

    async def _answer(
        self, sent: asyncio.Future[Any], cf: concurrent.futures.Future[Any]
    ) -> None:
        try:
            result = await AskHandle(sent, self, "", None)
        except BaseException as exc:
            if not cf.done():
                cf.set_exception(exc)
            return
        if not cf.done():  # a wait ended as a proven deadlock is done already
            cf.set_result(result)

    def _submit(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> asyncio.Future[Any]:
        """Send the ask; the future gets the answer, or a ``ConnectionLostError`` that the
        handle turns into the actor's death (see ``lost()``)."""
        conn = self.conn if self.running else None
        if conn is None:
            return self._unusable(method, args, kwargs)
        context = self.arguments_context(method)
        try:
            # Arguments travel as a list: msgpack packs lists natively, a tuple costs a hook.
            # The Call goes in its wire form, [tag, *fields]: no message object to build.
            return conn.request(
                [_CALL, self.actor_id, method, list(args), kwargs], context=context, tagged=True
            )
        except ConnectionLostError as exc:
            return self.lost_now(exc)

    def _unusable(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> asyncio.Future[Any]:
        """An ask made while there is no connection to send it on: it fails."""
        failed: asyncio.Future[Any] = self.loop.create_future()
        failed.set_exception(self.death_error())
        return failed

    async def lost(self) -> ActorDiedError:
        """Why the connection of a pending ask went away: the actor's death."""
        return self.death_error()

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
                [_TELL, self.actor_id, method, list(args), kwargs],
                context=f"the arguments of {self.cls_name}.{method}()",
                tagged=True,
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

            return ThreadWait(asyncio.run_coroutine_threadsafe(on_loop(), self.loop))
        self._check_loop()
        conn = self._usable_conn()
        if conn is None:
            raise self.death_error()
        conn.notify(
            [_TELL, self.actor_id, method, list(args), kwargs],
            context=f"the arguments of {self.cls_name}.{method}()",
            tagged=True,
        )
        return conn.drain()

    def _check_loop(self) -> None:
        if self.runtime.closed:
            raise RuntimeClosedError(f"{self.describe()} belonged to a runtime that has shut down")

    def _usable_conn(self) -> Connection | None:
        return self.conn

    def death_error(self) -> ActorDiedError:
        return ActorDiedError(f"actor {self.describe()} has ended", actor=self.describe())


# A plain tell raises MailboxFullError once this many bytes wait to be written to the actor's
# process: its connection is then paused by flow control, the cross-process full mailbox.
TELL_HIGH_WATER = DEFAULT_WRITE_LIMITS[0]


_CALL: Final = tag_of(Call)
_CANCEL_CALL: Final = tag_of(CancelCall)
_TUPLE_REPLY: Final = REPLY | FLAG_TOP_TUPLE
_TELL: Final = tag_of(Tell)


class RelayTarget(RemoteActor):
    """An actor in another process, reached over ``conn``: in a worker, the owner's
    connection (the owner routes it on); in the owner, the connection of the worker that
    hosts it.

    Args:
        address: where the actor lives (as its ref said).
        via: what ``conn`` leads to, for the error when it goes away (``"the runtime that
            owns"``, ``"the worker process that hosts"``).
    """

    def __init__(
        self,
        runtime: PlacementServices,
        conn: Connection,
        address: RefAddress,
        actor_id: str,
        cls_name: str,
        methods: frozenset[str],
        name: str | None,
        via: str = "the runtime that owns",
    ) -> None:
        super().__init__(runtime, actor_id, cls_name, methods, name)
        self.conn = conn
        self.address = address
        self._via = via

    async def lost(self) -> ActorDiedError:
        reason = (
            DeathReason.RUNTIME_SHUT_DOWN
            if self.address.worker is None or self._via.startswith("the runtime")
            else DeathReason.PROCESS_DIED
        )
        return ActorDiedError(
            f"{self._via} {self.describe()} went away", actor=self.describe(), reason=reason
        )

    async def stop(self, grace: float | None = None) -> ActorDiedError:
        return await self._lifecycle(Stop(self.actor_id, grace))

    async def kill(self) -> ActorDiedError:
        return await self._lifecycle(Kill(self.actor_id))

    async def wait_stopped(self) -> ActorDiedError:
        return await self._lifecycle(WaitStopped(self.actor_id))

    async def _lifecycle(self, message: Stop | Kill | WaitStopped) -> ActorDiedError:
        assert self.conn is not None
        try:
            # A stop keeps its place behind calls waiting for room in flight; a kill or a
            # wait overtakes them (a kill fails what is queued anyway).
            urgent = not isinstance(message, Stop)
            result: ActorDiedError = await self.conn.request(message, urgent=urgent)
        except ConnectionLostError:
            return await self.lost()
        return result


class DeadTarget(RemoteActor):
    """A ref whose actor cannot be reached any more: every call fails with ``why``.

    Args:
        address: where the actor lived (as its ref said).
        why: the end of the sentence "actor X ...": ``"no longer exists"``, ``"belonged to
            runtime R, which is gone ..."``.
        reason: the ``DeathReason`` of the errors.
    """

    def __init__(
        self,
        runtime: PlacementServices,
        address: RefAddress,
        actor_id: str,
        cls_name: str,
        methods: frozenset[str],
        name: str | None = None,
        why: str = "no longer exists",
        reason: DeathReason = DeathReason.STOPPED,
    ) -> None:
        super().__init__(runtime, actor_id, cls_name, methods, name)
        self.address = address
        self._why = why
        self._reason = reason

    def death_error(self) -> ActorDiedError:
        return ActorDiedError(
            f"actor {self.describe()} {self._why}", actor=self.describe(), reason=self._reason
        )

    async def stop(self, grace: float | None = None) -> ActorDiedError:
        return self.death_error()

    async def kill(self) -> ActorDiedError:
        return self.death_error()

    async def wait_stopped(self) -> ActorDiedError:
        return self.death_error()
