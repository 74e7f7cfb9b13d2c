"""The runtime's bridge to the resource broker: requests become futures, events become
grants, failures, revocations and warnings, and the broker's timer runs on the loop.

The broker (``actorrt.resources``) is pure: it never sleeps and never calls back. This
module feeds it the loop's time, arms one timer at ``next_poll_at()``, resolves the future
of each request it grants or fails, stops actors whose grants it revokes (a removed
placement group, a lost node), and logs stalled requests. Holders are actor ids, or
``DRIVER`` for what the program reserves outside any actor.

The broker keeps the one record of each placement group (its bundles, strategy and holder,
dropped when the group is removed or its holder ends); this bridge keeps only the futures of
requests still waiting, and fails those of a holder that ends. It reaches the runtime
through :class:`SchedulerHost`, never by importing it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from .._core._context import PlacementInfo
from .._core._handle import EDGE_DELAY
from .._core._waits import WaitGraph, bounded_by_awaiter
from ..resources import (
    AskDeadlocked,
    Broker,
    Event,
    Failed,
    Granted,
    NodeInventory,
    PendingRequest,
    ResourceError,
    Resources,
    Revoked,
    Stalled,
)

# Seconds from a new wait edge to the deadlock check that sees it.
DEADLOCK_DELAY = 0.15

logger = logging.getLogger("actorrt")

DRIVER = "driver"
DEADLOCKS_KEPT = 32  # named deadlock reports kept for the dashboard

# A word of a broker message that may be an actor id: not part of ``key=value`` (an id the
# message already describes), nor of a longer word.
# An actor id (``Runtime.new_id``: the runtime's 8 hex digits, a dash, a number): only
# these are looked up, not every word of a report (a report is some 80 words).
_TOKEN = re.compile(r"(?<![\w=-])[0-9a-f]{8}-\d+(?![\w-])")


class NamedDeadlock(NamedTuple):
    """A deadlock the broker broke (``resources.DeadlockReport``), its holders named as
    users know them; ``at`` is wall-clock time."""

    at: float
    kind: str
    waiter: str
    involved: tuple[str, ...]
    message: str
    parent: str | None


class SchedulerHost(Protocol):
    """What the scheduler asks of the runtime it serves."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    def lookup(self, actor_id: str) -> Any:
        """The cell or proxy of a live actor, or ``None``."""
        ...

    def describe_id(self, actor_id: str) -> str | None:
        """``Class(id=..., name=...)`` for an actor id the runtime knows of."""
        ...

    def revoked(
        self, holder: Hashable, reason: str, why: str | None = None
    ) -> asyncio.Future[Any] | None:
        """The broker ended ``holder``'s grant (``why``: its node's loss, in words): stop
        that actor; returns its death."""
        ...

    @property
    def waits(self) -> WaitGraph:
        """Who awaits whom in this runtime."""
        ...

    def ask_deadlocked(self, waiter: Any, target: Any, error: BaseException) -> None:
        """``waiter``'s ask to ``target`` can never be answered: fail it."""
        ...


class BrokerClock:
    """The broker's one timer on a loop: armed at its ``next_poll_at()``, it runs ``poll()``
    then and hands the events to ``dispatch`` (the broker never sleeps by itself)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        broker: Broker,
        dispatch: Callable[[list[Event]], object],
    ) -> None:
        self.loop = loop
        self.broker = broker
        self.dispatch = dispatch
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None

    def arm(self) -> None:
        """Set the timer for the broker's next poll (after anything changed it)."""
        at = self.broker.next_poll_at()
        if at == self._timer_at:
            return
        self.cancel()
        self._timer_at = at
        if at is not None:
            self._timer = self.loop.call_at(max(at, self.loop.time()), self._poll)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = None

    def _poll(self) -> None:
        self._timer = None
        self._timer_at = None
        self.dispatch(self.broker.poll(self.loop.time()))


class Scheduler:
    """Requests to the broker, as awaitables on the runtime's loop.

    ``node``: the one node of a runtime on one machine, whose broker this scheduler makes;
    ``broker``: instead, a broker elsewhere (cluster mode: the head's, reached through a
    stand-in with the broker's interface that returns its events later, through
    :meth:`deliver`).
    """

    def __init__(
        self, host: SchedulerHost, node: NodeInventory | None, broker: Broker | None = None
    ) -> None:
        self.host = host
        self.loop = host.loop
        if broker is None:
            assert node is not None
            # Ask waits reach the broker EDGE_DELAY after they begin (``_core._handle``): the
            # check runs that much sooner, so every deadlock is reported 150 ms after its edge.
            broker = Broker(
                [node], now=self.loop.time(), deadlock_delay=DEADLOCK_DELAY - EDGE_DELAY
            )
        self.broker = broker
        self._waiters: dict[Hashable, asyncio.Future[Granted]] = {}
        # request id -> the actor awaiting it (a spawn inside an actor, a ready()).
        self._requesters: dict[Hashable, Hashable] = {}
        self._ids = itertools.count(1)
        self._clock = BrokerClock(self.loop, self.broker, self._dispatch)
        self._on_waiting: list[Callable[[], None]] = []
        # The last deadlocks the broker broke, their holders named while they still live
        # (for the dashboard), newest last.
        self.deadlocks: deque[NamedDeadlock] = deque(maxlen=DEADLOCKS_KEPT)

    def on_waiting(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` whenever a request made here has to wait for its grant (so
        that what is held idle, for reuse, can be given back for it)."""
        self._on_waiting.append(listener)

    @property
    def waiting(self) -> bool:
        """Whether a request made here waits for its grant."""
        return bool(self._waiters)

    def new_request_id(self) -> str:
        return f"r{next(self._ids)}"

    def submit(
        self,
        request_id: Hashable,
        holder: Hashable,
        resources: Resources | Mapping[str, object] | None = None,
        *,
        bundles: Sequence[Mapping[str, object] | Resources] | None = None,
        strategy: str = "PACK",
        placement: object = "auto",
        parent: Hashable | None = None,
        allow_empty_head: bool = False,
    ) -> asyncio.Future[Granted]:
        """Make a request now (raising at once if it can never be granted); return the
        future of its grant."""
        future: asyncio.Future[Granted] = self.loop.create_future()
        try:
            events = self.broker.request(
                request_id,
                holder,
                resources,
                bundles=bundles,
                strategy=strategy,
                placement=placement,
                parent=parent,
                allow_empty_head=allow_empty_head,
                now=self.loop.time(),
            )
        except ResourceError as exc:  # infeasible: say who, and the fix in Tune's words
            named = self._named(exc)
            if named is exc:
                raise
            raise named from None
        self._waiters[request_id] = future
        self._dispatch(events)
        if not future.done():
            for listener in self._on_waiting:
                listener()
        return future

    async def wait(
        self, request_id: Hashable, future: asyncio.Future[Granted], requester: Hashable | None
    ) -> Granted:
        """Await a grant; while waiting, ``requester`` is blocked on it (for the deadlock
        check). Cancelling the wait withdraws the request."""
        if future.done():
            return future.result()
        if requester is not None and bounded_by_awaiter():
            requester = None  # bounded by asyncio.wait_for: it ends by itself
        if requester is not None:
            self._requesters[request_id] = requester
            self.broker.blocked(requester, on_request=request_id, now=self.loop.time())
            self._arm()
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            self.cancel(request_id)
            raise
        finally:
            if requester is not None:
                self._requesters.pop(request_id, None)
                self.broker.unblocked(requester, on_request=request_id, now=self.loop.time())
                self._arm()

    def cancel(self, request_id: Hashable) -> None:
        """Withdraw a waiting request, or give back a granted one."""
        future = self._waiters.pop(request_id, None)
        if future is not None and not future.done():
            future.cancel()
        self._dispatch(self.broker.cancel(request_id, now=self.loop.time()))

    def abort(self, request_id: Hashable, error: BaseException) -> None:
        """Fail a request that still waits with ``error``, and withdraw it (a request that
        was granted meanwhile is left alone: its waiter sees the grant)."""
        future = self._waiters.get(request_id)
        if future is None or future.done():
            return
        del self._waiters[request_id]
        future.set_exception(error)
        self._dispatch(self.broker.cancel(request_id, now=self.loop.time()))

    def release(self, holder: Hashable) -> None:
        """Everything ``holder`` holds comes back; its waiting requests are withdrawn (and
        whoever still awaits one of them, a ``pg.ready()`` elsewhere, hears why)."""
        waiting = self.broker.waiting_of(holder)
        self._dispatch(self.broker.release(holder, now=self.loop.time()))
        for request_id in waiting:
            future = self._waiters.pop(request_id, None)
            if future is not None and not future.done():
                future.set_exception(ResourceError(
                    f"request {request_id} of {self._describe(holder)} was withdrawn: its "
                    "holder ended"
                ))
                future.exception()  # retrieved: nobody may be waiting for it

    def group_ready(self, group_id: Hashable, requester: Hashable | None) -> Awaitable[Any]:
        """Wait until the group ``group_id`` is reserved (at once if it is)."""
        future = self._waiters.get(group_id)
        if future is None:
            if self.broker.group_info(group_id) is None:
                raise ResourceError(f"placement group {group_id} was removed")
            reserved: asyncio.Future[Any] = self.loop.create_future()
            reserved.set_result(None)
            return self.wait(group_id, reserved, requester)
        return self.wait(group_id, future, requester)

    def remove_group(self, group_id: Hashable) -> list[asyncio.Future[Any]]:
        """Withdraw or give back a group reservation; returns the deaths of the actors
        placed in it, which it stops."""
        future = self._waiters.pop(group_id, None)
        if future is not None and not future.done():
            future.cancel()
        return self._dispatch(self.broker.cancel(group_id, now=self.loop.time()))

    def describe(self, group_id: Hashable, bundle_index: int | None) -> PlacementInfo | None:
        """What an actor placed in bundle ``bundle_index`` of a reserved group may learn."""
        info = self.broker.group_info(group_id)
        if info is None:
            return None
        specs = [dict(bundle) for bundle in info.bundles]
        return PlacementInfo(str(group_id), specs, info.strategy, bundle_index)

    def add_node(self, node: NodeInventory) -> None:
        """A node joins: waiting requests that now fit are granted."""
        self._dispatch(self.broker.add_node(node, now=self.loop.time()))

    def remove_node(self, node_id: Hashable) -> None:
        """Drain a node: nothing new goes there; what it holds stays until released."""
        self._dispatch(self.broker.remove_node(node_id, now=self.loop.time()))

    def node_lost(self, node_id: Hashable) -> list[asyncio.Future[Any]]:
        """A node is gone: the actors holding grants there stop (their deaths are returned),
        and requests no node left can hold fail."""
        return self._dispatch(self.broker.node_lost(node_id, now=self.loop.time()))

    def set_parent(self, holder: Hashable, parent: Hashable) -> None:
        self.broker.set_parent(holder, parent)

    def blocked_on_holder(
        self, waiter: Hashable, target: Hashable, blocked: bool, serial: bool | None = None
    ) -> None:
        """An actor started (or stopped) awaiting an ask to another actor. ``serial``: it
        serves one message at a time (looked up when the actor is this runtime's)."""
        now = self.loop.time()
        if blocked:
            if serial is None:
                cell = self.host.lookup(str(waiter))
                serial = cell is None or self.host.waits.saturated(
                    waiter, getattr(cell, "max_concurrency", 1)
                )
            self.broker.blocked(waiter, on_holder=target, serial=serial, now=now)
        else:
            self.broker.unblocked(waiter, on_holder=target, now=now)
        self._arm()

    def pending(self) -> list[PendingRequest]:
        """The waiting requests explained, with their holders named as users know them."""
        return self.broker.pending(now=self.loop.time(), name=self._describe)

    # ------------------------------------------------------------------ events

    def deliver(self, events: list[Event]) -> None:
        """Act on events a broker elsewhere sent (cluster mode)."""
        self._dispatch(events)

    def _dispatch(self, events: list[Event]) -> list[asyncio.Future[Any]]:
        """Act on the broker's events; returns the deaths of the actors it revoked."""
        self._name_deadlocks()
        deaths: list[asyncio.Future[Any]] = []
        described: dict[str, str | None] = {}  # names looked up for this batch's messages
        for event in events:
            if isinstance(event, Granted):
                self._granted(event)
            elif isinstance(event, Failed):
                future = self._waiters.pop(event.request_id, None)
                if future is not None and not future.done():
                    future.set_exception(self._named(event.error))
            elif isinstance(event, Revoked):
                died = self._revoked(event)
                if died is not None:
                    deaths.append(died)
            elif isinstance(event, AskDeadlocked):
                error = self._named(event.error)
                logger.info("%s", error)  # the asker gets it, as an error
                self.host.ask_deadlocked(event.waiter, event.target, error)
            elif isinstance(event, Stalled):
                # A warning when an actor is stuck on it (it may hold what others need), or
                # when what it is short of is held by an actor that itself waits (it may wait
                # for what only this request would give); else a request that nobody awaits
                # from inside an actor (the driver program's spawns: a sweep's queued
                # trials) is ordinary queueing, worth a note only.
                waiter = self._requesters.get(event.request_id)
                level = logging.INFO
                if waiter is not None or event.blocked_holder is not None:
                    level = logging.WARNING
                by = "" if waiter is None else f" (awaited by {self._describe(waiter)})"
                logger.log(level, "resource request %s of %s is stalled: %s%s",
                           event.request_id, self._describe(event.holder),
                           self._words(event.reason, described), by)
        self._arm()
        return deaths

    def _revoked(self, event: Revoked) -> asyncio.Future[Any] | None:
        if event.node is None:
            return self.host.revoked(event.holder, "placement group removed")
        if event.request_id == event.group:  # the group itself: its members go one by one
            logger.warning("placement group %s of %s was lost with node %s", event.group,
                           self._describe(event.holder), event.node)
            return None
        logger.warning("the grant %s of %s ended: node %s was lost", event.request_id,
                       self._describe(event.holder), event.node)
        return self.host.revoked(event.holder, "node lost", f"node {event.node} was lost")

    def _name_deadlocks(self) -> None:
        """Take the broker's new deadlock reports, naming their holders now (the victim's
        actor may end as soon as its error arrives)."""
        found = getattr(self.broker, "deadlock_reports", None)  # a cluster's: the head's
        while found:
            report = found.popleft()
            self.deadlocks.append(
                NamedDeadlock(
                    time.time() - (self.loop.time() - report.at),
                    report.kind,
                    self._describe(report.waiter),
                    tuple(self._describe(h) for h in report.involved),
                    self._words(report.message),
                    None if report.parent is None else self._describe(report.parent),
                )
            )

    def _describe(self, actor_id: Hashable) -> str:
        """A holder as users know it: ``Class(id=..., name=...)``, or the driver program."""
        if actor_id == DRIVER:
            return "the driver program"
        return self.host.describe_id(str(actor_id)) or str(actor_id)

    def _fix_hint(self, ids: set[str]) -> str | None:
        """The fix in the words of the library that made one of the actors ``ids`` (Tune's
        trials: its ``PlacementGroupFactory``), where its class gives one."""
        for actor_id in ids:
            target = self.host.lookup(actor_id)
            actor_class = getattr(target, "actor_class", None)
            hint = getattr(getattr(actor_class, "cls", None), "_actorrt_fix_hint", None)
            if isinstance(hint, str):
                return hint
        return None

    def _words(self, raw: str, described: dict[str, str | None] | None = None) -> str:
        """A broker message for users: actors by class, id and name (one pass over the text,
        with one static pattern: a report names many ids, and a pattern per id would be
        compiled anew for each); the fix in the words of the library that made them.
        ``described``: names already looked up, shared by the messages of one batch."""
        if described is None:
            described = {}

        named: set[str] = set()

        def name(match: re.Match[str]) -> str:
            token = match.group(0)
            if token not in described:
                described[token] = self.host.describe_id(token)
            found = described[token]
            if found is None:
                return token
            named.add(token)
            return found

        text = _TOKEN.sub(name, raw)
        hint = self._fix_hint(named)
        if hint is not None and "To fix: " in text:
            text = text[: text.rindex("To fix: ")] + f"To fix: {hint}."
        return text

    def _named(self, error: Exception) -> Exception:
        text = self._words(str(error))
        if text == str(error):
            return error
        named = type(error)(text)
        named.__cause__ = error.__cause__
        return named

    def _granted(self, event: Granted) -> None:
        future = self._waiters.pop(event.request_id, None)
        if future is None or future.done():
            # Nobody waits any more (the wait was cancelled): give it straight back.
            self.loop.call_soon(self.cancel, event.request_id)
            return
        future.set_result(event)

    def _arm(self) -> None:
        self._clock.arm()

    def close(self) -> None:
        self._clock.cancel()
        for future in self._waiters.values():
            if not future.done():
                future.cancel()
        self._waiters.clear()


def gpu_ids(grant: Granted | None) -> tuple[str, ...]:
    """The GPU device ids a grant gives its actor (its first placement's)."""
    if grant is None:
        return ()
    return grant.placement.gpu_ids

