"""Serving what arrives over connections: calls to this process's actors, and control.

Both ends use this: the owning runtime (messages from its workers) and each worker (messages
from its owner). Each message is a tuple whose first item names the operation:

================  ==========================  ===============================================
operation         sent by                     what it does
================  ==========================  ===============================================
``call``          either side (request)       ask an actor; the reply is its answer
``tell``          either side (notification)  tell an actor; a full mailbox pauses reading
``stop``          either side (request)       stop an actor; the reply is its death
``kill``          either side (request)       kill an actor; the reply is its death
``wait_stopped``  worker (request)            reply once the actor has ended
``spawn``         owner (request)             construct the actor this worker hosts
``spawn_process`` worker (request)            start a worker-process actor for a worker actor
``spawn_cancel``  worker (notification)       the worker gave that spawn up: withdraw it
``get_actor``     worker (request)            look a name up in the owner's registry
``hello``         worker (request)            a new worker introduces itself
``ping``          owner (request)             answered at once: the worker's loop runs
``died``          worker (notification)       the hosted actor ended without being asked
``restarted``     worker (notification)       the hosted actor crashed and restarts there
``wait_edge``     worker (notification)       an actor there began or ended awaiting another
``ask_deadlock``  owner (notification)        that wait can never end: fail it
``reserve_group`` worker (request)            ``placement_group()`` in a worker: reserve it
``group_ready``   worker (request)            reply once that group is reserved
``group_remove``  worker (request/notif.)     give that group back, stopping its actors
================  ==========================  ===============================================
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from .._core._cell import ActorCell
from .._errors import ActorDiedError
from .._wire._connection import Connection
from ._proxies import WireReply

if TYPE_CHECKING:
    from .._runtime import Runtime

logger = logging.getLogger("actorrt")


class Host:
    """Dispatches incoming messages of one runtime's connections."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._tasks: set[asyncio.Task[Any]] = set()
        self._spawns: dict[str, asyncio.Task[Any]] = {}  # a worker's spawns, by its token
        self._ops: dict[str, Callable[[Connection, int | None, tuple[Any, ...]], None]] = {
            "call": self._call,
            "tell": self._tell,
            "stop": self._stop,
            "kill": self._kill,
            "wait_stopped": self._wait_stopped,
            "spawn": self._spawn,
            "spawn_process": self._spawn_process,
            "spawn_cancel": self._spawn_cancel,
            "get_actor": self._get_actor,
            "hello": self._hello,
            "ping": self._ping,
            "died": self._died,
            "restarted": self._restarted,
            "wait_edge": self._wait_edge,
            "ask_deadlock": self._ask_deadlock,
            "reserve_group": self._reserve_group,
            "group_ready": self._group_ready,
            "group_remove": self._group_remove,
        }

    def handle(self, conn: Connection, request_id: int | None, payload: Any) -> None:
        op = self._ops.get(payload[0]) if type(payload) is tuple and payload else None
        if op is None:
            if request_id is not None:
                conn.reply_error(request_id, ValueError(f"unknown operation {payload!r:.80}"))
            return
        op(conn, request_id, payload)

    # ------------------------------------------------------------------ calls

    def _call(self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]) -> None:
        _, actor_id, method, args, kwargs = msg
        assert request_id is not None
        target = self.runtime.lookup(actor_id)
        if target is None:
            conn.reply_error(request_id, self._gone(actor_id))
            return
        if method not in target.methods:
            conn.reply_error(
                request_id,
                AttributeError(f"actor class {target.cls_name} has no public method {method!r}"),
            )
            return
        if target.inline:
            reply = WireReply(conn, request_id, f"the result of {target.cls_name}.{method}()")
            if target.accepting:
                target.mailbox.put_waiting((method, args, kwargs, reply), None)
            else:
                reply.set_exception(target.death_error())
            return
        handle = target.ask(method, args, kwargs, None)
        self._answer(conn, request_id, _await(handle))

    def _tell(self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]) -> None:
        _, actor_id, method, args, kwargs = msg
        target = self.runtime.lookup(actor_id)
        if target is None or method not in target.methods:
            logger.warning("a tell to %s.%s() was dropped: no such actor or method",
                           actor_id, method)
            return
        if not target.inline:
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

    def _stop(self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]) -> None:
        target = self.runtime.lookup(msg[1])
        if target is not None and target.inline:
            target.requested_end = True  # ended on request: nobody needs a "died" notice
        grace = msg[2] if len(msg) > 2 else None
        self._answer(conn, request_id, self._lifecycle(msg[1], "stop", grace))

    def _kill(self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]) -> None:
        target = self.runtime.lookup(msg[1])
        if target is not None and target.inline:
            target.requested_end = True
        self._answer(conn, request_id, self._lifecycle(msg[1], "kill"))

    def _wait_stopped(
        self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]
    ) -> None:
        self._answer(conn, request_id, self._lifecycle(msg[1], "wait_stopped"))

    async def _lifecycle(self, actor_id: str, op: str, *args: Any) -> ActorDiedError:
        target = self.runtime.lookup(actor_id)
        if target is None:
            return self._gone(actor_id)
        result: ActorDiedError = await getattr(target, op)(*args)
        return result

    # ------------------------------------------------------------------ spawn

    def _spawn(self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]) -> None:
        _, actor_id, actor_class, args, kwargs, restart_count, grant_info = msg
        coro = self.runtime.host_actor(
            actor_id, actor_class, args, kwargs, restart_count, grant_info
        )
        self._answer(conn, request_id, coro)

    def _spawn_process(
        self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]
    ) -> None:
        _, actor_class, args, kwargs, chain, bounded, token = msg
        coro = self.runtime.spawn_for_worker(actor_class, args, kwargs, chain, bool(bounded))
        task = self._answer(conn, request_id, coro)
        self._spawns[token] = task
        task.add_done_callback(lambda _t: self._spawns.pop(token, None))

    def _spawn_cancel(self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]) -> None:
        task = self._spawns.pop(msg[1], None)
        if task is not None:
            task.cancel()

    def _get_actor(self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]) -> None:
        assert request_id is not None
        try:
            conn.reply(request_id, self.runtime.get_actor(msg[1]))
        except Exception as exc:
            conn.reply_error(request_id, exc)

    def _hello(self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]) -> None:
        _, worker_id, _pid = msg
        assert request_id is not None
        known = self.runtime.worker_connected(worker_id, conn)
        if known:
            conn.reply(request_id, None)
        else:
            conn.reply_error(request_id, PermissionError(f"unknown worker {worker_id!r}"))

    def _ping(self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]) -> None:
        if request_id is not None:
            conn.reply(request_id, None)  # the owner's liveness check: this loop runs

    def _died(self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]) -> None:
        _, actor_id, error = msg
        target = self.runtime.lookup(actor_id)
        if target is not None and hasattr(target, "remote_died"):
            target.remote_died(error)

    def _restarted(self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]) -> None:
        target = self.runtime.lookup(msg[1])
        if target is not None and hasattr(target, "remote_restarted"):
            target.remote_restarted()

    def _reserve_group(
        self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]
    ) -> None:
        _, group_id, specs, strategy, holder = msg
        reserve = self.runtime.reserve_for_worker(group_id, specs, strategy, holder)
        self._answer(conn, request_id, reserve)

    def _group_ready(self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]) -> None:
        self._answer(conn, request_id, self.runtime.ready_for_worker(msg[1], msg[2]))

    def _group_remove(self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]) -> None:
        self._answer(conn, request_id, self.runtime.remove_for_worker(msg[1]))

    def _wait_edge(self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]) -> None:
        _, waiter, target, added, serial = msg
        self.runtime.edge_reported(waiter, conn, bool(added))
        self.runtime.grants.blocked_on_holder(waiter, target, bool(added), bool(serial))

    def _ask_deadlock(
        self, conn: Connection, request_id: int | None, msg: tuple[Any, ...]
    ) -> None:
        _, waiter, target, error = msg
        self.runtime.waits.fail(waiter, target, error)

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

    def _gone(self, actor_id: str) -> ActorDiedError:
        return ActorDiedError(f"actor {actor_id} no longer exists", actor=actor_id,
                              reason="stopped")

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks))


def _relayed(task: asyncio.Task[Any], conn: Connection, target: Any) -> None:
    conn.resume_reading()
    if not task.cancelled() and task.exception() is not None:
        logger.warning("a tell to %s was dropped: %s", target.describe(), task.exception())


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


def is_inline(target: Any) -> bool:
    return isinstance(target, ActorCell)
