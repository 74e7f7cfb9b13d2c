"""Serving what arrives over connections: calls to this process's actors, and control.

Both ends use this: the owning runtime (messages from its workers) and each worker (messages
from its owner). Every message is a typed class of :mod:`actorrt._wire._messages`; the table
in :class:`Host` routes each class to its handler (``docs/wire.md`` has the message table:
direction, fields, reply). A handler finds its actor through the router
(:meth:`~actorrt._processes._router.Workers.resolve`): one of this process's actors, or a proxy
on the connection that reaches it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Final, cast

from .._core._actor import ActorClass
from .._core._context import PlacementInfo
from .._errors import ActorDiedError, DeathReason
from .._wire._codec import FLAG_MESSAGE, FLAG_TOP_TUPLE
from .._wire._connection import REQUEST, Connection
from .._wire._dispatcher import Dispatcher, notification, request, request_run
from .._wire._messages import (
    AskDeadlock,
    Call,
    CancelCall,
    Died,
    GetActor,
    GroupReady,
    GroupRemove,
    Hello,
    Kill,
    Locate,
    MalformedMessage,
    PeerEndpoint,
    Ping,
    ReserveGroup,
    Restarted,
    Retire,
    Spawn,
    SpawnCancel,
    SpawnProcess,
    Stop,
    Tell,
    WaitEdge,
    WaitStopped,
    from_wire,
    tag_of,
)
from ._proxies import WireReply
from ._services import GrantInfo, RouterServices, RuntimeForProcesses

logger = logging.getLogger("actorrt")


class Host:
    """Dispatches the incoming messages of one runtime's connections."""

    def __init__(self, runtime: RuntimeForProcesses, router: RouterServices) -> None:
        self.runtime = runtime
        self.router = router
        self._lookup = runtime.lookup  # bound once: the hot handlers try this process first
        self._resolve = router.resolve
        self._tasks: set[asyncio.Task[Any]] = set()
        self._spawns: dict[str, asyncio.Task[Any]] = {}  # a worker's spawns, by its token
        # Calls and tells that arrived here for an actor elsewhere and were passed on (the
        # owner's relay between two workers): what ``actorrt status`` shows as "relayed".
        self.relayed = {"calls": 0, "tells": 0}
        self.dispatcher = Dispatcher(
            "an actorrt runtime's worker connection",
            requests=[
                request(Call, self._call),
                request(Stop, self._stop),
                request(Kill, self._kill),
                request(WaitStopped, self._wait_stopped),
                request(Spawn, self._spawn),
                request(SpawnProcess, self._spawn_process),
                request(GetActor, self._get_actor),
                request(Hello, self._hello),
                request(Ping, self._ping),
                request(ReserveGroup, self._reserve_group),
                request(GroupReady, self._group_ready),
                request(GroupRemove, self._group_remove),
                request(Locate, self._locate),
                request(PeerEndpoint, self._peer_endpoint),
            ],
            notifications=[
                notification(Tell, self._tell),
                notification(CancelCall, self._cancel_call),
                notification(SpawnCancel, self._spawn_cancel),
                notification(Died, self._died),
                notification(Restarted, self._restarted),
                notification(Retire, self._retire),
                notification(WaitEdge, self._wait_edge),
                notification(AskDeadlock, self._ask_deadlock),
                notification(GroupRemove, self._group_remove_notified),
            ],
            runs=[request_run(Call, self._call_run)],
        )
        # What a worker takes from the other workers of its runtime that connect to it
        # directly: calls to its actors, and nothing that changes what it hosts.
        self.peer_dispatcher = Dispatcher(
            "an actorrt worker's direct connection",
            requests=[request(Call, self._call), request(Ping, self._ping)],
            notifications=[
                notification(Tell, self._tell),
                notification(CancelCall, self._cancel_call),
            ],
            runs=[request_run(Call, self._call_run)],
        )

    # ------------------------------------------------------------------ calls

    def _call(self, conn: Connection, request_id: int, msg: Call) -> None:
        actor_id, method, args, kwargs = msg
        target = self._lookup(actor_id) or self._resolve(actor_id)
        if target is None:
            conn.reply_error(request_id, _gone(actor_id))
            return
        if method not in target.methods:
            conn.reply_error(
                request_id,
                AttributeError(f"actor class {target.cls_name} has no public method {method!r}"),
            )
            return
        if target.inline:
            reply = WireReply(conn, request_id, target.cls_name, method)
            if not target.accepting:
                reply.set_exception(target.death_error())
                return
            mailbox = target.mailbox
            queue = mailbox.queue
            if len(queue) < mailbox.size and not mailbox.overflow:  # has_room(), inline
                queue.append((method, args, kwargs, reply))  # put(), inline: the hot path
                waiter = mailbox.waiter
                if waiter is not None:
                    mailbox.wake(waiter)
                elif mailbox.idle is not None:
                    mailbox.resume()
            else:
                mailbox.put_waiting((method, args, kwargs, reply), None)
            return
        self.relayed["calls"] += 1
        handle = target.ask(method, args, kwargs, None)
        self._answer(conn, request_id, _await(handle))

    def _call_run(self, conn: Connection, items: list[Any], start: int, stop: int) -> int:
        """The ``Call`` requests of a batch frame, from ``items[start]`` on, in their wire
        form (request id, kind_flags, ``[tag, actor_id, method, args, kwargs]`` each): what
        :meth:`_call` does for each, with the target looked up once per run of calls to one
        actor. Returns where the calls end (``stop`` at most)."""
        last_id: object = None
        target: Any = None
        for at in range(start, stop, 3):
            fields = items[at + 2]
            if (
                items[at + 1] & _CALL_MASK != _CALL_KIND
                or type(fields) is not list
                or not fields
                or fields[0] != _CALL_TAG
            ):
                return at
            request_id = items[at]
            try:
                try:
                    _tag, actor_id, method, args, kwargs = fields
                except ValueError:  # not five: the thorough check below says why
                    actor_id = None
                if not (
                    type(actor_id) is str
                    and type(method) is str
                    and type(args) is list
                    and type(kwargs) is dict
                ):  # the thorough check: a malformed call raises, naming why
                    actor_id, method, args, kwargs = cast(Call, from_wire(fields))
                if actor_id != last_id:
                    target = self._lookup(actor_id) or self._resolve(actor_id)
                    last_id = actor_id
                if (
                    target is not None
                    and target.inline
                    and target.accepting
                    and method in target.methods
                ):
                    mailbox = target.mailbox
                    queue = mailbox.queue
                    envelope = (
                        method, args, kwargs, WireReply(conn, request_id, target.cls_name, method)
                    )
                    if len(queue) < mailbox.size and not mailbox.overflow:
                        queue.append(envelope)  # put(), inline: the hot path
                        waiter = mailbox.waiter
                        if waiter is not None:
                            mailbox.wake(waiter)
                        elif mailbox.idle is not None:
                            mailbox.resume()
                    else:
                        mailbox.put_waiting(envelope, None)
                else:
                    self._call(conn, request_id, Call(actor_id, method, args, kwargs))
            except Exception as exc:
                conn.reply_error(request_id, exc)
        return stop

    def _cancel_call(self, conn: Connection, msg: CancelCall) -> None:
        """The caller of a ``Call`` gave up: drop it if it is still queued here. One that has
        begun runs on (its answer is dropped by the caller's side); one relayed onwards to
        another process is not followed."""
        actor_id, request_id = msg
        target = self._lookup(actor_id)
        if target is None or not target.inline:
            return
        for envelope in target.mailbox.waiting():
            reply = envelope[3]
            if type(reply) is WireReply and reply.matches(conn, request_id):
                reply.cancel()
                return

    def _tell(self, conn: Connection, msg: Tell) -> None:
        actor_id, method, args, kwargs = msg
        target = self._lookup(actor_id) or self._resolve(actor_id)
        if target is None or method not in target.methods:
            logger.warning("a tell to %s.%s() was dropped: no such actor or method",
                           actor_id, method)
            return
        if not target.inline:
            self.relayed["tells"] += 1
            # Passed on to another process: stop reading here until it has gone out there,
            # so flow control reaches from the sender to the far actor.
            try:
                sent = target.tell_wait(method, args, kwargs)
            except Exception as exc:
                logger.warning("a tell to %s was dropped: %s", target.describe(), exc)
                return
            conn.pause_reading()
            task = asyncio.ensure_future(sent)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(lambda t: _relayed(t, conn, target))
            return
        if not target.accepting:
            logger.warning("a tell to %s was dropped: it has ended", target.describe())
            return
        mailbox = target.mailbox
        if mailbox.has_room():
            mailbox.put((method, args, kwargs, None))
            return
        # Flow control across processes: stop reading this connection until there is room.
        admitted: asyncio.Future[None] = self.runtime.loop.create_future()
        mailbox.put_waiting((method, args, kwargs, None), admitted)
        conn.pause_reading()
        admitted.add_done_callback(lambda _f: conn.resume_reading())

    # -------------------------------------------------------------- lifecycle

    def _stop(self, conn: Connection, request_id: int, msg: Stop) -> None:
        self._ended_on_request(msg.actor_id)
        self._answer(conn, request_id, self._lifecycle(msg.actor_id, "stop", msg.grace))

    def _kill(self, conn: Connection, request_id: int, msg: Kill) -> None:
        self._ended_on_request(msg.actor_id)
        self._answer(conn, request_id, self._kill_for(msg.actor_id, msg.reason))

    async def _kill_for(self, actor_id: str, reason: str | None) -> ActorDiedError:
        """Kill an actor; with ``reason`` (a :class:`DeathReason` value), what it had in
        flight and its end say that reason rather than that it was killed."""
        if reason is not None:
            why = DeathReason(reason)  # an unknown value fails the request, naming it
            target = self.runtime.lookup(actor_id)  # an actor of this process
            if target is not None:
                target.ending_because(why)
        return await self._lifecycle(actor_id, "kill")

    def _wait_stopped(self, conn: Connection, request_id: int, msg: WaitStopped) -> None:
        self._answer(conn, request_id, self._lifecycle(msg.actor_id, "wait_stopped"))

    def _ended_on_request(self, actor_id: str) -> None:
        target = self.runtime.lookup(actor_id)
        if target is not None and target.inline:
            target.requested_end = True  # ended on request: nobody needs a Died notice

    async def _lifecycle(self, actor_id: str, op: str, *args: Any) -> ActorDiedError:
        target = self._resolve(actor_id)
        if target is None:
            return _gone(actor_id)
        result: ActorDiedError = await getattr(target, op)(*args)
        return result

    # ------------------------------------------------------------------ spawn

    def _spawn(self, conn: Connection, request_id: int, msg: Spawn) -> None:
        actor_class = _actor_class(msg.actor_class, msg)
        grant_info: GrantInfo = None
        if msg.resources is not None:
            info = PlacementInfo(*msg.group) if msg.group is not None else None
            grant_info = (msg.resources, info)
        coro = self.runtime.host_actor(
            msg.actor_id, actor_class, tuple(msg.args), msg.kwargs, msg.restart_count, grant_info
        )
        self._answer(conn, request_id, coro)

    def _spawn_process(self, conn: Connection, request_id: int, msg: SpawnProcess) -> None:
        actor_class = _actor_class(msg.actor_class, msg)
        chain = [(str(actor_id), str(described)) for actor_id, described in msg.chain]
        coro = self.runtime.owner.spawn_for_worker(
            actor_class, tuple(msg.args), msg.kwargs, chain, msg.bounded
        )
        task = self._answer(conn, request_id, coro)
        token = msg.token
        self._spawns[token] = task
        task.add_done_callback(lambda _t: self._spawns.pop(token, None))

    def _spawn_cancel(self, conn: Connection, msg: SpawnCancel) -> None:
        task = self._spawns.pop(msg.token, None)
        if task is not None:
            task.cancel()

    def _get_actor(self, conn: Connection, request_id: int, msg: GetActor) -> None:
        try:
            conn.reply(request_id, self.runtime.get_actor(msg.name))
        except Exception as exc:
            conn.reply_error(request_id, exc)

    def _hello(self, conn: Connection, request_id: int, msg: Hello) -> None:
        if self.router.worker_connected(msg.worker_id, conn):
            conn.reply(request_id, None)
        else:
            conn.reply_error(request_id, PermissionError(f"unknown worker {msg.worker_id!r}"))

    def _locate(self, conn: Connection, request_id: int, msg: Locate) -> None:
        found = self.router.locate(msg.actor_id, msg.transport)
        if found is None:
            conn.reply(request_id, None)
            return
        worker_id, endpoint = found
        self._answer(conn, request_id, _located(worker_id, endpoint))

    def _peer_endpoint(self, conn: Connection, request_id: int, msg: PeerEndpoint) -> None:
        self._answer(conn, request_id, self.router.peer_endpoint())

    def _ping(self, conn: Connection, request_id: int, msg: Ping) -> None:
        conn.reply(request_id, None)  # the owner's liveness check: this loop runs

    def _died(self, conn: Connection, msg: Died) -> None:
        target = self.runtime.lookup(msg.actor_id)
        if target is None or not hasattr(target, "remote_died"):
            return
        error = msg.error
        if not isinstance(error, ActorDiedError):  # its type was lost on the way
            error = ActorDiedError(
                f"actor {target.describe()} ended: {error}",
                actor=target.describe(),
                reason=DeathReason.CRASHED,
                cause=error,
            )
        target.remote_died(error)

    def _restarted(self, conn: Connection, msg: Restarted) -> None:
        target = self.runtime.lookup(msg.actor_id)
        if target is not None and hasattr(target, "remote_restarted"):
            target.remote_restarted()

    # ----------------------------------------------------------------- groups

    def _retire(self, conn: Connection, msg: Retire) -> None:
        target = self.runtime.lookup(msg.actor_id)
        if target is not None and hasattr(target, "left_behind"):
            target.left_behind(msg.left)

    def _reserve_group(self, conn: Connection, request_id: int, msg: ReserveGroup) -> None:
        reserve = self.runtime.owner.reserve_for_worker(
            msg.group_id, msg.bundles, msg.strategy, msg.holder
        )
        self._answer(conn, request_id, reserve)

    def _group_ready(self, conn: Connection, request_id: int, msg: GroupReady) -> None:
        ready = self.runtime.owner.ready_for_worker(msg.group_id, msg.requester)
        self._answer(conn, request_id, ready)

    def _group_remove(self, conn: Connection, request_id: int, msg: GroupRemove) -> None:
        self._answer(conn, request_id, self.runtime.owner.remove_for_worker(msg.group_id))

    def _group_remove_notified(self, conn: Connection, msg: GroupRemove) -> None:
        self._answer(conn, None, self.runtime.owner.remove_for_worker(msg.group_id))

    # ------------------------------------------------------------------ waits

    def _wait_edge(self, conn: Connection, msg: WaitEdge) -> None:
        if msg.waiter == msg.target:
            return  # an actor's wait on its own ask is no wait edge (``_core._waits``)
        self.runtime.owner.edge_reported(msg.waiter, msg.target, conn, msg.added)
        self.runtime.grants.blocked_on_holder(msg.waiter, msg.target, msg.added, msg.serial)

    def _ask_deadlock(self, conn: Connection, msg: AskDeadlock) -> None:
        self.runtime.waits.fail(msg.waiter, msg.target, msg.error)

    # ---------------------------------------------------------------- helpers

    def _answer(
        self, conn: Connection, request_id: int | None, coro: Coroutine[Any, Any, Any]
    ) -> asyncio.Task[Any]:
        task = self.runtime.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if request_id is not None:
            task.add_done_callback(_reply_from(conn, request_id))
        return task

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks))


# A batched value that a run of calls takes: a request that is a typed message.
_CALL_MASK: Final = 0x0F | FLAG_MESSAGE | FLAG_TOP_TUPLE
_CALL_KIND: Final = REQUEST | FLAG_MESSAGE
_CALL_TAG: Final = tag_of(Call)


def spawn_message(
    actor_id: str,
    actor_class: ActorClass[Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    restart_count: int,
    grant_info: GrantInfo,
) -> Spawn:
    """The ``Spawn`` that has a worker construct its actor: the grant as plain fields."""
    resources: dict[str, float] | None = None
    group: tuple[str, list[dict[str, float]], str, int | None] | None = None
    if grant_info is not None:
        resources, placement = grant_info
        if isinstance(placement, PlacementInfo):
            group = (
                placement.group_id,
                placement.bundle_specs,
                placement.strategy,
                placement.bundle_index,
            )
    return Spawn(actor_id, actor_class, list(args), kwargs, restart_count, resources, group)


def _gone(actor_id: str) -> ActorDiedError:
    return ActorDiedError(
        f"actor {actor_id} no longer exists", actor=actor_id, reason=DeathReason.STOPPED
    )


def _actor_class(value: object, msg: Spawn | SpawnProcess) -> ActorClass[Any]:
    if not isinstance(value, ActorClass):
        raise MalformedMessage(
            f"malformed {type(msg).__name__} message: field 'actor_class' is "
            f"{type(value).__name__}, expected an actor class"
        )
    return value


def _relayed(task: asyncio.Task[Any], conn: Connection, target: Any) -> None:
    conn.resume_reading()
    if not task.cancelled() and task.exception() is not None:
        logger.warning("a tell to %s was dropped: %s", target.describe(), task.exception())


async def _located(worker_id: str, endpoint: asyncio.Future[Any]) -> list[Any] | None:
    where = await endpoint
    return None if where is None else [worker_id, where]


async def _await(handle: Any) -> Any:
    return await handle


def _reply_from(
    conn: Connection, request_id: int
) -> Callable[[asyncio.Future[Any] | concurrent.futures.Future[Any]], None]:
    def reply(fut: Any) -> None:
        if fut.cancelled():
            conn.reply_error(request_id, ActorDiedError("the request was cancelled"))
        elif (exc := fut.exception()) is not None:
            conn.reply_error(request_id, exc)
        else:
            conn.reply(request_id, fut.result())

    return reply
