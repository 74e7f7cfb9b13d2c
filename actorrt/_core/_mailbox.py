"""Bounded mailboxes and the envelopes they carry.

A mailbox holds at most ``size`` messages. Past that, messages whose sender can wait (asks,
``tell_wait``, the stop request) queue in an *overflow* line in the order they were sent; a
plain ``tell`` raises :class:`~actorrt.MailboxFullError` instead. Whenever the actor takes a
message, the oldest overflow message moves in, so the two lines together keep the order of
sending. Overflow is only non-empty while the mailbox is full, which is why a plain tell that
finds waiters ahead of it also raises rather than overtaking them.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator
from typing import Any

# A control message that asks the actor to finish after what is queued ahead of it.
STOP = "__actorrt_stop__"


# One message: ``(method, args, kwargs, reply)``. ``reply`` is an ``asyncio.Future`` (asks
# sent on the runtime's loop), a ``concurrent.futures.Future`` (asks sent from another
# thread), or ``None`` (tells). A plain tuple, not a class, for speed: building one is the
# largest fixed cost of a tell.
Envelope = tuple[str, tuple[Any, ...], dict[str, Any], Any]


class Mailbox:
    """A bounded FIFO with an ordered overflow line for senders that wait for room."""

    __slots__ = ("idle", "overflow", "queue", "size", "taken", "waiter")

    def __init__(self, size: int) -> None:
        self.size = size
        self.queue: deque[Envelope] = deque()
        # The run of messages the actor took at once and is working through (a worker's
        # batch of sync methods): the later ones have not begun yet, so a caller may still
        # give them up. An empty tuple while there is none.
        self.taken: list[Envelope] | tuple[()] = ()
        # (envelope, future resolved when it is admitted, or None when nobody awaits that);
        # None until a sender first waits for room. Neither is made for every mailbox: each
        # object an idle actor keeps is one more for the cyclic garbage collector to walk.
        self.overflow: deque[tuple[Envelope, asyncio.Future[None] | None]] | None = None
        self.waiter: asyncio.Future[None] | None = None
        # The actor, while it is idle with no task serving it: the next message resumes it.
        self.idle: Any = None

    def __len__(self) -> int:
        overflow = self.overflow
        return len(self.queue) + (len(overflow) if overflow else 0)

    def has_room(self) -> bool:
        return not self.overflow and len(self.queue) < self.size

    def put(self, envelope: Envelope) -> None:
        """Append a message the caller has checked there is room for."""
        self.queue.append(envelope)
        waiter = self.waiter
        if waiter is not None:
            self.wake(waiter)
        elif self.idle is not None:
            self.resume()

    def resume(self) -> None:
        """Start the idle actor serving again (``self.idle`` is set)."""
        owner, self.idle = self.idle, None
        owner._resume()

    def wake(self, waiter: asyncio.Future[None]) -> None:
        """Wake the actor waiting for a message (``waiter`` is ``self.waiter``)."""
        self.waiter = None
        if not waiter.done():
            waiter.set_result(None)

    def put_waiting(self, envelope: Envelope, admitted: asyncio.Future[None] | None) -> None:
        """Append a message, into the overflow line when the mailbox is full."""
        if self.has_room():
            self.put(envelope)
            if admitted is not None:
                admitted.set_result(None)
        else:
            if self.overflow is None:
                self.overflow = deque()
            self.overflow.append((envelope, admitted))

    def take(self) -> Envelope | None:
        """The next message, or ``None`` when there is none."""
        queue = self.queue
        if not queue:
            return None
        envelope = queue.popleft()
        if self.overflow:
            self.admit_one()
        return envelope

    def admit_one(self) -> None:
        """Move the oldest overflow message that is still wanted into the queue."""
        overflow = self.overflow
        while overflow:
            envelope, admitted = overflow.popleft()
            if admitted is not None and admitted.cancelled():
                continue  # its sender gave up waiting: the message was never sent
            self.queue.append(envelope)
            if admitted is not None:
                admitted.set_result(None)
            return

    def wait(self) -> asyncio.Future[None]:
        """A future resolved once a message is queued (resolved already if one is).

        A future, not a coroutine: an idle actor that keeps its serving task (one serving
        concurrently, or in a worker process) waits on it directly, one object fewer per
        actor for the cyclic garbage collector to walk (docs/actors.md). An inline actor
        serving one message at a time keeps no task while idle: ``idle`` holds it instead.
        """
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.queue:
            waiter.set_result(None)
        else:
            self.waiter = waiter
        return waiter

    def waiting(self) -> Iterator[Envelope]:
        """Every message not begun yet (and the rest of the run being worked through)."""
        yield from self.taken
        yield from self.queue
        for envelope, _admitted in self.overflow or ():
            yield envelope

    def drain(self, error: BaseException) -> list[Envelope]:
        """Remove and return everything queued, overflow included, in order.

        Senders still waiting for room get ``error``: their message will never run.
        """
        envelopes = list(self.queue)
        self.queue.clear()
        for envelope, admitted in self.overflow or ():
            if admitted is None:
                envelopes.append(envelope)
            elif not admitted.done():
                admitted.set_exception(error)
        self.overflow = None
        return envelopes
