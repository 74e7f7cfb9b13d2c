"""The resource broker: an event-driven state machine over nodes, groups and holders.

Inputs are method calls; every call that can change who holds what returns the list of events
it caused (:class:`Granted`, :class:`Failed`, :class:`Revoked`, :class:`Stalled`), in order.
Nothing is delivered later on its own: time-based work (the deadlock check, stall reports) runs
in :meth:`Broker.poll`, which the caller schedules at :meth:`Broker.next_poll_at`. Bad input and
infeasible requests raise at the call that made them. The broker never sleeps, never spawns a
thread and never reads a clock: time comes in as ``now`` (any monotonic float, e.g.
``loop.time()``; when omitted, the last ``now`` given is reused).

Model (docs/broker.md, docs/resources.md):

- A *request* asks for one resource dict (an actor's own resources) or a list of bundles with a
  strategy (a placement-group reservation). It has exactly one *holder*, an opaque hashable
  whose :meth:`Broker.release` gives back everything it holds and withdraws what it waits for.
- Where: ``"cluster"`` (the cluster queue), ``"auto"`` (the default: inside the group that the
  holder or its nearest ancestor is placed in, else the cluster; a group reservation is never
  captured), or a :class:`GroupTarget` (any bundle with room, or one bundle). Parents come from
  ``parent=`` or :meth:`Broker.set_parent`.
- The cluster queue is served as ``actorrt.resources._queue`` describes (priority by
  admission key, reservations for the oldest few, backfill). A group's own queue is served in
  arrival order, each waiting request granted as soon as it fits (groups are small and belong
  to one trial).
- Wait edges (:meth:`Broker.blocked`) feed the deadlock check (``_deadlock``), which runs from
  :meth:`Broker.poll` ``deadlock_delay`` seconds after the first wait edge it has not yet seen
  (neither grants nor further edges postpone it), in slices of bounded work: while a check is
  under way, :meth:`Broker.next_poll_at` says "now", so the caller's loop serves other work
  between slices.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Mapping, Sequence

from actorrt._errors import DeadlockError, ResourceDeadlockError

from ._deadlock import AskCycle, Found, Stale, check
from ._events import AskDeadlocked, DeadlockReport, Event
from ._membership import BrokerMembership
from ._node import NodeInventory
from ._placement import PlacementStrategy
from ._spec import Resources
from ._state import Group, Holder, WaitQueue

__all__ = ["STALL_BATCH", "Broker"]

# Stall reports made per poll at most (the rest in the next polls): each costs about the size
# of the waiter's line of actors, so a batch stays well under a millisecond or so.
STALL_BATCH = 32


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET: object = _Unset()


class Broker(BrokerMembership):
    """The resource broker.

    Args:
        nodes: the cluster's nodes (more can be added with :meth:`add_node`, drained with
            :meth:`remove_node`, or reported lost with :meth:`node_lost`).
        reservation_depth: how many of the oldest waiting cluster requests get reservations
            (default 4).
        deadlock_delay: seconds from a new wait edge to the deadlock check that sees it
            (default 0.15; at least this long after the previous check ended).
        stall_after: seconds without a grant in a queue after which its waiting requests are
            reported as stalled (default 10).
        now: the starting time.

    Every method is synchronous and cheap; none blocks. Methods that change state return the
    events they caused, in order. Holder, parent, request and group ids are opaque hashables
    chosen by the caller; a group's id is the id of the request that reserved it.
    """

    # -- inputs ------------------------------------------------------------------------------

    def add_node(self, node: NodeInventory, *, now: float | None = None) -> list[Event]:
        """Add a node; waiting requests that now fit are granted."""
        self._tick(now)
        self._add_node(node)
        return self._schedule()

    def request(
        self,
        request_id: Hashable,
        holder: Hashable,
        resources: Mapping[str, object] | Resources | None = None,
        *,
        bundles: Sequence[Mapping[str, object] | Resources] | None = None,
        strategy: str | PlacementStrategy = "PACK",
        placement: object = "auto",
        parent: Hashable | None = None,
        allow_empty_head: bool = False,
        now: float | None = None,
    ) -> list[Event]:
        """Ask for resources for ``holder``.

        Args:
            request_id: a new id (unique among waiting and granted requests).
            holder: who holds the grant (whose :meth:`release` gives it back).
            resources: one resource dict (an actor's own resources); empty means nothing.
            bundles: instead of ``resources``, a placement group's bundles: the grant reserves
                a group whose id is ``request_id``.
            strategy: the group's strategy (``PACK``, ``SPREAD``, ``STRICT_PACK``,
                ``STRICT_SPREAD``).
            placement: ``"auto"`` (default), ``"cluster"`` or a :class:`GroupTarget`; a group
                reservation always goes to the cluster.
            parent: if given, records ``holder``'s parent (for ``"auto"`` capture, priority
                and infeasibility inside groups).
            allow_empty_head: let bundle 0 of ``bundles`` be empty (a Tune factory).
            now: the current time.

        Returns:
            ``[Granted]`` when granted at once (and any events a full pass caused), else ``[]``
            (the request waits; a later call returns its ``Granted`` or ``Failed``).

        Raises:
            TypeError, ValueError: bad input (named, with its value); a reused request id;
                an unknown group or bundle.
            InfeasibleResourceError: it can never be granted (the message says why and what
                exists).
        """
        self._tick(now)
        if parent is not None:
            self.set_parent(holder, parent)
        req = self._new_request(
            request_id, holder, resources, bundles, strategy, placement, allow_empty_head
        )
        return self._enqueue(req)

    def cancel(self, request_id: Hashable, *, now: float | None = None) -> list[Event]:
        """Withdraw a waiting request, or give back a granted one (removing its group).

        Unknown or finished ids are ignored (so the call is idempotent).
        """
        self._tick(now)
        req = self._requests.get(request_id)
        if req is not None:
            return self._schedule() if self._withdraw(req) else []
        grant = self._grants.get(request_id)
        if grant is None:
            return []
        events: list[Event] = []
        freed = self._release_grant(grant, events)
        h = self._holders.get(grant.holder)
        if h is not None:
            self._drop_if_idle(h)
        if freed:
            events.extend(self._schedule())
        return events

    def release(self, holder: Hashable, *, now: float | None = None) -> list[Event]:
        """The holder ended: give back everything it holds and withdraw what it waits for.

        Its wait edges go, and so do edges of others that wait on it (an ask to an ended actor
        fails). Call this for every actor that ends, also ones that never asked for anything
        but were given a parent, so that the record is dropped.
        """
        self._tick(now)
        self._unparent(holder)
        for w in self._holder_waiters.pop(holder, ()):
            waiter = self._holders.get(w)
            if waiter is not None:
                waiter.edges_holder.pop(holder, None)
                waiter.version += 1
                self._drop_if_idle(waiter)
        h = self._holders.get(holder)
        if h is None:
            return []
        if h.edges_request or h.edges_holder:
            self._clear_edges(h)
        events: list[Event] = []
        needs_pass = False
        for req in list(h.requests.values()):
            needs_pass |= self._withdraw(req)
        # Grants inside groups first, so the holder's own group removal revokes nothing of its.
        grants = list(h.grants.values())
        if len(grants) > 1:
            grants.sort(key=lambda g: g.group is None)
        for grant in grants:
            if grant.rid in self._grants:
                needs_pass |= self._release_grant(grant, events)
        self._holders.pop(holder, None)
        if needs_pass:
            events.extend(self._schedule())
        return events

    def set_parent(self, holder: Hashable, parent: Hashable) -> None:
        """Record that ``holder`` was spawned by ``parent`` (``None`` forgets it)."""
        if parent is None:
            self._unparent(holder)
        elif parent == holder:
            raise ValueError(f"holder {holder!r} cannot be its own parent")
        else:
            self._unparent(holder)
            self._parents[holder] = parent
            self._child_ids.setdefault(parent, set()).add(holder)

    def blocked(
        self,
        holder: Hashable,
        *,
        on_request: Hashable = _UNSET,
        on_holder: Hashable = _UNSET,
        serial: bool = True,
        now: float | None = None,
    ) -> None:
        """Add a wait edge: ``holder`` awaits, with no timeout, a request or an ask to a holder.

        An edge on a request that is no longer waiting is ignored; edges on a request go away
        by themselves when it is granted, fails or is withdrawn. ``serial``: the holder serves
        one message at a time, so a cycle of asks through it can never end (such a cycle is
        reported with :class:`AskDeadlocked`); an actor that may answer other messages while
        it waits passes ``False``.
        """
        if (on_request is _UNSET) == (on_holder is _UNSET):
            raise TypeError("blocked() takes exactly one of on_request= or on_holder=")
        self._tick(now)
        if on_request is not _UNSET:
            req = self._requests.get(on_request)
            if req is None:
                return
            h = self._holder(holder)
            h.edges_request.add(on_request)
            req.waiters.add(holder)
            if on_request not in self._awaited_known:
                self._awaited_known.add(on_request)
                heapq.heappush(
                    self._awaited, (req.arrival + self._stall_after, req.seq, on_request)
                )
        else:
            if on_holder == holder:
                raise ValueError(f"holder {holder!r} cannot wait on itself")
            h = self._holder(holder)
            self._edge_seq += 1
            h.edges_holder[on_holder] = self._edge_seq
            self._holder_waiters.setdefault(on_holder, set()).add(holder)
        h.serial = serial
        h.version += 1
        if self._check_due is None:
            self._check_due = max(self._now, self._checked_at) + self._deadlock_delay

    def unblocked(
        self,
        holder: Hashable,
        *,
        on_request: Hashable = _UNSET,
        on_holder: Hashable = _UNSET,
        now: float | None = None,
    ) -> None:
        """Remove one wait edge, or with neither keyword every edge of ``holder``."""
        self._tick(now)
        h = self._holders.get(holder)
        if h is None:
            return
        if on_request is _UNSET and on_holder is _UNSET:
            self._clear_edges(h)
        if on_request is not _UNSET:
            h.edges_request.discard(on_request)
            req = self._requests.get(on_request)
            if req is not None:
                req.waiters.discard(holder)
        if on_holder is not _UNSET:
            h.edges_holder.pop(on_holder, None)
            self._holder_waiters.get(on_holder, set()).discard(holder)
        h.version += 1
        self._drop_if_idle(h)

    def _clear_edges(self, h: Holder) -> None:
        for rid in h.edges_request:
            req = self._requests.get(rid)
            if req is not None:
                req.waiters.discard(h.hid)
        for x in h.edges_holder:
            self._holder_waiters.get(x, set()).discard(h.hid)
        h.edges_request.clear()
        h.edges_holder.clear()
        h.version += 1

    # -- time --------------------------------------------------------------------------------

    def next_poll_at(self) -> float | None:
        """When :meth:`poll` has work next (a deadlock check or a stall report), or ``None``.

        While a deadlock check is under way this is the current time: call :meth:`poll` again
        soon (after serving other work), until the check completes.
        """
        if self._check is not None or self._stall_queue:
            return self._now
        due: list[float] = []
        if self._check_due is not None:
            due.append(self._check_due)
        for waits in self._wait_queues():
            at = self._stall_due(waits)
            if at is not None:
                due.append(at)
        awaited = self._awaited_due()
        if awaited is not None:
            due.append(awaited)
        return min(due) if due else None

    def poll(self, now: float) -> list[Event]:
        """Do time-based work that is due: a slice of the deadlock check, stall reports.

        A check does at most a bounded amount of work per call (see ``_deadlock.SLICE``); a
        caller that needs it finished at once (a test, a simulation) calls again while
        :meth:`next_poll_at` returns a time not after ``now``.
        """
        now = self._tick(now)
        events: list[Event] = []
        if self._check is None and self._check_due is not None and now >= self._check_due:
            self._check_due = None
            self._check = check(
                self._holders, self._groups, self._requests, self._empty, self._order
            )
        if self._check is not None:
            try:
                next(self._check)
            except StopIteration as done:
                self._check = None
                self._checked_at = now
                found: Found | None = done.value
                if found is not None:
                    events.extend(self._act_on(found))
                    # Another, independent set may be deadlocked too: check again.
                    if self._check_due is None:
                        self._check_due = now + self._deadlock_delay
                elif self._check_due is not None:
                    self._check_due = max(self._check_due, now + self._deadlock_delay)
        budget = STALL_BATCH
        events.extend(self._awaited_stall_reports(now, budget))
        self._queue_stalled(now)
        events.extend(self._queued_stall_reports(now, budget - len(events)))
        return events

    def check_now(self, now: float | None = None) -> list[Event]:
        """Run a whole deadlock check now, all slices at once (for tests and simulations)."""
        now = self._tick(now)
        self._check_due = min(self._check_due or now, now)
        events = self.poll(now)
        while self._check is not None:
            events.extend(self.poll(now))
        return events

    def _wait_queues(self) -> list[WaitQueue]:
        queues = [self._queue.waits] if self._queue.waiting else []
        queues.extend(self._groups[g].waits for g in self._groups_waiting)
        return queues

    def _stall_due(self, waits: WaitQueue) -> float | None:
        if waits.stall_reported:
            return None
        oldest = waits.oldest_waiting()
        if oldest is None:
            return None
        return max(oldest.arrival, waits.last_progress) + self._stall_after

    def _queue_stalled(self, now: float) -> None:
        """Queue the reports of every queue that has stalled (each is made later, a bounded
        batch per poll: at 10,000 waiting requests, one poll making them all would stall the
        loop that drives the broker for seconds)."""
        due: list[tuple[WaitQueue, Group | None]] = []
        if self._queue.waiting:
            due.append((self._queue.waits, None))
        due.extend(
            (self._groups[g].waits, self._groups[g]) for g in sorted(self._groups_waiting, key=repr)
        )
        for waits, group in due:
            at = self._stall_due(waits)
            if at is None or at > now:
                continue
            waits.stall_reported = True
            if group is None:  # queue by queue, not sorted: a sort of 10,000 stalls the loop
                waiting = self._queue.waiting_unordered()
            else:
                waiting = list(group.queue.values())
            self._stall_queue.extend((req.rid, waits) for req in waiting)

    def _act_on(self, found: Found) -> list[Event]:
        """Fail what a validated deadlock check chose."""
        if isinstance(found, Stale):
            return []
        if isinstance(found, AskCycle):
            h = self._holders.get(found.waiter)
            if h is not None:
                h.edges_holder.pop(found.target, None)
                h.version += 1
                self._holder_waiters.get(found.target, set()).discard(found.waiter)
                self._drop_if_idle(h)
            self.deadlock_reports.append(
                DeadlockReport(self._now, "asks", found.waiter, found.cycle, found.message)
            )
            return [AskDeadlocked(found.waiter, found.target, DeadlockError(found.message))]
        req = found.victim
        self.deadlock_reports.append(
            DeadlockReport(
                self._now, "resources", req.holder, found.holders, found.message,
                self._parents.get(req.holder),
            )
        )
        failed, needs_pass = self._fail(req, ResourceDeadlockError(found.message))
        waits = self._queue.waits if req.group is None else req.group.waits
        waits.progressed(self._now)
        events: list[Event] = [failed]
        if needs_pass:
            events.extend(self._schedule())
        return events
