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
from .._wire._messages import Call, CancelCall, Kill, Ping, Stop, Tell, WaitStopped, tag_of
from .._wire._refs import RefAddress
from ._direct import RETRY_AFTER, SWITCH_TRIES

if TYPE_CHECKING:
    from ._direct import DirectRoutes
    from ._services import RuntimeForProcesses

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


class RoutedMethod(MethodRef):
    """A method of an actor a worker may call directly (:class:`RelayTarget` with routes):
    every call goes through the target's ``ask``, which picks the relay or the direct
    connection and starts the switch between them."""

    __slots__ = ()


class RemoteActor:
    """Sends calls to an actor in another process over a connection."""

    inline = False
    accepting = False  # refs' inline fast path never applies; see ``inline``
    method_ref: type[MethodRef] = RemoteMethod  # what a ref's methods are
    running = True  # calls go out on ``conn`` (a process actor clears it while restarting)

    def __init__(
        self,
        runtime: RuntimeForProcesses,
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
        return AskHandle(self._send_now(conn, method, args, kwargs), self, method, None)

    def _send_now(
        self, conn: Connection, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> asyncio.Future[Any]:
        try:
            sent = conn.request_tagged(
                [_CALL, self.actor_id, method, list(args), kwargs], self.arguments_context(method)
            )
        except ConnectionLostError as exc:
            sent = self.lost_now(exc)
        return sent

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

    In a worker, with ``routes``, the first call also starts the switch to a direct
    connection to the worker that runs the actor (``_direct``): from then on ``conn`` is
    that connection, until it closes and ``conn`` is the owner's again.

    Args:
        address: where the actor lives (as its ref said).
        via: what ``conn`` leads to, for the error when it goes away (``"the runtime that
            owns"``, ``"the worker process that hosts"``).
        routes: a worker's direct routes (``None``: always through ``conn``).
    """

    def __init__(
        self,
        runtime: RuntimeForProcesses,
        conn: Connection,
        address: RefAddress,
        actor_id: str,
        cls_name: str,
        methods: frozenset[str],
        name: str | None,
        via: str = "the runtime that owns",
        routes: DirectRoutes | None = None,
    ) -> None:
        super().__init__(runtime, actor_id, cls_name, methods, name)
        self.conn = conn
        self.address = address
        self._via = via
        self._relay = conn
        self._routes = routes if routes is not None and routes.enabled else None
        if self._routes is not None:
            self.method_ref = RoutedMethod  # calls must pass _ask_now, which switches
        self._direct: Connection | None = None
        self._direct_loss: str | None = None  # why the last direct connection closed
        # A switch under way: since its Locate left, asks through the relay not answered yet
        # and tells through the relay; the direct connection once it waits only for those.
        self._epoch_open = False
        self._round = 0
        self._relay_out = 0
        self._tells_since = 0
        self._ready: Connection | None = None
        self._ready_waiter: asyncio.Future[bool] | None = None
        self._switching: asyncio.Task[None] | None = None
        self._retry_at = 0.0

    # ---------------------------------------------------------- direct calls

    def _through_relay(self) -> None:
        """A message goes out through the relay: start the switch if due."""
        routes = self._routes
        if (
            routes is not None
            and self._switching is None
            and self.loop.time() >= self._retry_at
            and not self.runtime.closed
        ):
            self._switching = self.loop.create_task(self._go_direct(routes))

    def _relay_ask(self, answer: asyncio.Future[Any]) -> None:
        """An ask went out through the relay while a switch is under way: the switch waits
        for its answer (this callback runs before its caller's, so the caller's next message
        already takes the direct connection)."""
        if self._epoch_open:
            self._relay_out += 1
            answer.add_done_callback(functools.partial(self._relay_answered, self._round))

    def _relay_answered(self, round_: int, _answer: asyncio.Future[Any]) -> None:
        if round_ != self._round:
            return  # an answer of an earlier round, which counted it
        self._relay_out -= 1
        ready = self._ready
        if ready is not None and self._relay_out == 0 and not ready.is_closing():
            self._switch_now(ready, True)

    def _relay_tell(self) -> None:
        """A tell went out through the relay while a switch is under way: it has no answer
        to wait for, so this round of the switch fails and the next waits for a pause."""
        if self._epoch_open:
            self._tells_since += 1
            if self._ready is not None:
                self._switch_now(None, False)

    def _switch_now(self, direct: Connection | None, ok: bool) -> None:
        waiter, self._ready = self._ready_waiter, None
        if direct is not None:
            self._use_direct(direct)
        if waiter is not None and not waiter.done():
            waiter.set_result(ok)

    async def _go_direct(self, routes: DirectRoutes) -> None:
        why = "the owner's connection closed"
        try:
            for _ in range(SWITCH_TRIES):
                # From this Locate on, what goes through the relay may overtake nothing that
                # then goes directly: asks are waited for, a tell restarts the round.
                self._round += 1
                self._epoch_open, self._relay_out, self._tells_since = True, 0, 0
                located = await routes.locate(self.actor_id)
                if located is None:
                    why = "the owner says it cannot be reached directly now"
                    break
                worker_id, endpoint = located
                direct = await routes.connect(str(worker_id), endpoint)
                if self._tells_since == 0 and not direct.is_closing():
                    if self._relay_out == 0:
                        self._use_direct(direct)
                    else:  # the last answer through the relay switches
                        self._ready = direct
                        self._ready_waiter = self.loop.create_future()
                        try:
                            await asyncio.wait_for(asyncio.shield(self._ready_waiter),
                                                   RETRY_AFTER)
                        except TimeoutError:
                            pass
                    if self._direct is direct:
                        logger.debug("calls to %s go directly to worker %s",
                                     self.describe(), worker_id)
                        return
                why = "tells through the owner left no pause to switch in"
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # refused, unreachable, the handshake failed
            why = f"{type(exc).__name__}: {exc}"
        finally:
            self._switching = None
            self._epoch_open = False
            self._ready = self._ready_waiter = None
        self._retry_at = self.loop.time() + RETRY_AFTER
        logger.debug(
            "calls to %s go through the owning runtime (no direct connection: %s); trying "
            "again in %g s", self.describe(), why, RETRY_AFTER,
        )

    def _use_direct(self, direct: Connection) -> None:
        assert self._routes is not None
        self._direct = self.conn = direct
        self._direct_loss = None
        self._routes.watch(direct, self._direct_lost)

    def _direct_lost(self, error: ConnectionLostError) -> None:
        """The direct connection closed: asks pending on it fail as the actor's death (see
        ``lost``); later calls go through the owner again, and the next one reconnects."""
        if self._direct is None:
            return
        self._direct = None
        self.conn = self._relay
        self._direct_loss = error.reason
        self._retry_at = 0.0
        logger.debug("the direct connection to %s closed (%s): calls go through the owner",
                     self.describe(), error.reason)

    def _leave_direct(self) -> None:
        direct, self._direct = self._direct, None
        if direct is not None and self._routes is not None:
            self._routes.unwatch(direct, self._direct_lost)
        self.conn = self._relay
        self._retry_at = self.loop.time() + RETRY_AFTER

    def _closed_direct(self) -> Connection:
        """The direct connection is closing though its close was not handled yet: nothing
        more goes out on it (a message sent now would not be), so back to the relay."""
        self._direct_lost(ConnectionLostError("the peer worker closed the connection"))
        return self._relay

    def _ask_now(
        self, conn: Connection, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> AskHandle[Any]:
        if conn is not self._relay:
            if not conn.is_closing():
                return super()._ask_now(conn, method, args, kwargs)
            conn = self._closed_direct()
        self._through_relay()
        sent = self._send_now(conn, method, args, kwargs)
        self._relay_ask(sent)
        return AskHandle(sent, self, method, None)

    def _submit(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> asyncio.Future[Any]:
        if self.conn is not self._relay and self.conn is not None:
            if not self.conn.is_closing():
                return super()._submit(method, args, kwargs)
            self._closed_direct()
        self._through_relay()
        sent = super()._submit(method, args, kwargs)
        self._relay_ask(sent)
        return sent

    def _usable_conn(self) -> Connection | None:
        conn = self.conn
        if conn is not None and conn is not self._relay and conn.is_closing():
            conn = self._closed_direct()
        if conn is self._relay:
            self._through_relay()
            self._relay_tell()
        return conn

    def direct(self) -> bool:
        """Whether calls go straight to the actor's worker now."""
        return self._direct is not None

    async def lost(self) -> ActorDiedError:
        if self._direct_loss is not None and not self._relay.is_closing():
            return ActorDiedError(
                f"the worker process that hosted {self.describe()} went away (its direct "
                f"connection closed: {self._direct_loss})",
                actor=self.describe(), reason=DeathReason.PROCESS_DIED,
            )  # fmt: skip
        reason = (
            DeathReason.RUNTIME_SHUT_DOWN
            if self.address.worker is None or self._via.startswith("the runtime")
            else DeathReason.PROCESS_DIED
        )
        return ActorDiedError(
            f"{self._via} {self.describe()} went away", actor=self.describe(), reason=reason
        )

    async def stop(self, grace: float | None = None) -> ActorDiedError:
        direct = self._direct
        if direct is not None:
            # What went out directly reaches the mailbox before the stop, which the owner
            # (the actor's supervisor) sends: its worker answers a Ping after those.
            self._leave_direct()
            try:
                await direct.request(Ping())
            except ConnectionLostError:
                pass
        return await self._lifecycle(Stop(self.actor_id, grace))

    async def kill(self) -> ActorDiedError:
        return await self._lifecycle(Kill(self.actor_id, None))

    async def wait_stopped(self) -> ActorDiedError:
        return await self._lifecycle(WaitStopped(self.actor_id))

    async def _lifecycle(self, message: Stop | Kill | WaitStopped) -> ActorDiedError:
        try:
            # A stop keeps its place behind calls waiting for room in flight; a kill or a
            # wait overtakes them (a kill fails what is queued anyway).
            urgent = not isinstance(message, Stop)
            result: ActorDiedError = await self._relay.request(message, urgent=urgent)
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
        runtime: RuntimeForProcesses,
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
