"""Reports on the broker's state: pending requests explained, totals, what a holder holds.

Read-only views for ``actorrt.pending_requests()``, ``cluster_resources()``,
``available_resources()`` and tests; nothing here changes state.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Mapping

from ._core import BrokerCore
from ._deadlock import describe_holdings, describe_request
from ._events import BundlePlacement, Granted, GroupInfo, PendingRequest, Stalled
from ._explain import Explainer, place_in_line, reason_text, set_aside_for
from ._feasibility import FIX_HINT
from ._node import NodeInventory
from ._spec import MEMORY, UNIT, Resources
from ._state import Grant, Request, WaitQueue

__all__ = ["BrokerReports"]

_LISTED = 4
STALE_DROPS = 64  # stale entries of the awaited heap dropped per look at its top


class BrokerReports(BrokerCore):
    """The broker's read-only reports (see :class:`~actorrt.resources.Broker`)."""

    # -- reports -----------------------------------------------------------------------------

    def pending(
        self, *, now: float | None = None, name: Callable[[Hashable], str] = str
    ) -> list[PendingRequest]:
        """Every waiting request with the reason it waits (cluster queue first, in order).

        ``name`` says how the reasons name a holder (the runtime passes the actor's class,
        id and name); the other fields keep the ids.
        """
        return self._explain(self._tick(now), name=name)

    def _explain(
        self, now: float, only: object = None, name: Callable[[Hashable], str] = str
    ) -> list[PendingRequest]:
        ex = self._explainer()
        out: list[PendingRequest] = []
        if only is None or only == "cluster":
            for req in self._queue.waiting_requests():
                out.append(self._explain_one(ex, req, now, name))
        groups = [self._groups[g] for g in sorted(self._groups_waiting, key=repr)]
        for group in groups:
            if only is not None and only is not group:
                continue
            for req in group.queue.values():
                out.append(self._explain_one(ex, req, now, name))
        return out

    def _explainer(self) -> Explainer:
        return Explainer(self._nodes, self._queue, self._grants.values(), self._order)

    def _explain_one(
        self, ex: Explainer, req: Request, now: float, name: Callable[[Hashable], str] = str
    ) -> PendingRequest:
        """One waiting request, explained (in its group's queue or the cluster's)."""
        group = req.group
        if group is not None:
            short, held_by = ex.group(req, group)
            return self._report(req, short, held_by, False, (), group.waits, now, name)
        short, held_by, fits = ex.cluster(req)
        aside = set_aside_for(self._queue, req) if fits else ()
        return self._report(req, short, held_by, fits, aside, self._queue.waits, now, name)

    def _report(
        self,
        req: Request,
        short: dict[str, int],
        held_by: tuple[Hashable, ...],
        fits: bool,
        aside: tuple[Request, ...],
        waits: WaitQueue,
        now: float,
        name: Callable[[Hashable], str],
    ) -> PendingRequest:
        reserved = req.rid in self._queue.reservations
        stalled = now - max(req.arrival, waits.last_progress) >= self._stall_after
        reason = reason_text(
            short=short, held_by=held_by, fits=fits, line=place_in_line(self._queue, req),
            set_aside=aside, awaited=bool(req.waiters),
            idle_s=now - waits.last_progress if stalled else None, name=name,
        )  # fmt: skip
        return PendingRequest(
            request_id=req.rid,
            holder=req.holder,
            bundles=tuple(b.to_dict() for b in req.shape.bundles),
            strategy=req.shape.strategy.value if req.is_group else None,
            queue="cluster" if req.group is None else req.group.gid,
            waited_s=now - req.arrival,
            short_of={k: v / UNIT if k != MEMORY else v // UNIT for k, v in short.items()},
            held_by=held_by,
            reserved=reserved,
            behind=tuple(r.rid for r in aside),
            stalled=stalled,
            reason=reason,
        )

    def _awaited_due(self) -> float | None:
        """When the next awaited request counts as stalled (stale heap entries dropped, at
        most :data:`STALE_DROPS` per call: after ten thousand waits end at once, the time
        of the stale entry left on top brings the next poll, which drops more)."""
        heap = self._awaited
        for _ in range(STALE_DROPS):
            if not heap:
                return None
            _, _, rid = heap[0]
            req = self._requests.get(rid)
            if req is not None and req.waiters and rid not in self._stall_told:
                return heap[0][0]
            heapq.heappop(heap)
            if req is None or not req.waiters:
                self._awaited_known.discard(rid)
        return heap[0][0] if heap else None

    def _awaited_stall_reports(self, now: float, budget: int) -> list[Stalled]:
        """A request an actor awaits is stalled once it has waited ``stall_after``, whatever
        else its queue grants meanwhile (unrelated traffic must not put the warning off);
        reported once. At most ``budget`` reports per call: the rest stay due."""
        events: list[Stalled] = []
        ex: Explainer | None = None
        children: Mapping[Hashable, set[Hashable]] | None = None
        for _ in range(budget):  # bounded work: stale entries count as turns too
            due = self._awaited_due()
            if due is None or due > now:
                return events
            _, _, rid = heapq.heappop(self._awaited)
            req = self._requests.get(rid)
            if req is None or not req.waiters or rid in self._stall_told:
                if req is None or not req.waiters:
                    self._awaited_known.discard(rid)
                continue  # stale: left on top by _awaited_due's bound
            self._stall_told.add(rid)
            if ex is None:
                ex = self._explainer()
                children = self._children()
            fits = False
            if req.group is None:
                short, held_by, fits = ex.cluster(req)
            else:
                short, held_by = ex.group(req, req.group)
            aside = set_aside_for(self._queue, req) if fits else ()
            reason = reason_text(
                short=short, held_by=held_by, fits=fits, line=place_in_line(self._queue, req),
                set_aside=aside, awaited=True, idle_s=None,
            )  # fmt: skip
            detail = self.stall_detail(req, children)
            reason = f"{reason}; waited {now - req.arrival:.1f} s. {detail}"
            events.append(Stalled(rid, req.holder, reason))
        return events

    def _queued_stall_reports(self, now: float, budget: int) -> list[Stalled]:
        """The reports of stalled queues (``_stall_queue``), at most ``budget`` per call."""
        events: list[Stalled] = []
        queue = self._stall_queue
        ex: Explainer | None = None
        children: Mapping[Hashable, set[Hashable]] | None = None
        while queue and len(events) < budget:
            rid, waits = queue.popleft()
            req = self._requests.get(rid)
            if req is None or rid in self._stall_told:
                continue
            if now - max(req.arrival, waits.last_progress) < self._stall_after:
                continue  # its queue granted something meanwhile
            if ex is None:
                ex = self._explainer()
                children = self._children()
            report = self._explain_one(ex, req, now)
            reason = report.reason
            blocked = None
            if req.waiters:
                self._stall_told.add(rid)
                reason = f"{reason}. {self.stall_detail(req, children)}"
            else:
                blocked = next(
                    (hid for hid in report.held_by
                     if (h := self._holders.get(hid)) is not None and h.is_blocked()),
                    None,
                )
                if blocked is not None:
                    reason = f"{reason}. {self.blocked_detail(blocked)}"
            events.append(Stalled(rid, req.holder, reason, blocked))
        return events

    def blocked_detail(self, hid: Hashable) -> str:
        """For a stalled request nobody awaits from inside an actor, short of what ``hid``
        holds while ``hid`` itself waits: who, what it holds, what it waits for, the fix. Not
        a proven deadlock (what it waits for may come), but if it can only come from the
        stalled request's holder (a value a queued trial would give), it never does."""
        h = self._holders[hid]
        waits = [f"an answer from {t}" for t in sorted(h.edges_holder, key=repr)[:_LISTED]]
        for rid in sorted(h.edges_request, key=repr)[:_LISTED]:
            req = self._requests.get(rid)
            if req is not None:
                waits.append(describe_request(req))
        return (
            f"{hid}, which holds {describe_holdings(h)}, is itself waiting, for "
            f"{' and '.join(waits) or 'a request'}. If what it waits for can only come "
            "from work queued behind it (a value a queued trial would give), this never ends. "
            "The fix: do not make a running actor wait for queued work; give both what they "
            "need at once (less per trial, or more capacity), or bound the wait with a timeout"
        )

    def _children(self) -> Mapping[Hashable, set[Hashable]]:
        """Every recorded parent's children (kept by the broker as parents are recorded)."""
        return self._child_ids

    def stall_detail(
        self, req: Request, children: Mapping[Hashable, set[Hashable]] | None = None
    ) -> str:
        """For a stalled request an actor awaits: the line of actors it belongs to (its
        outermost ancestor, a trial, and what that line holds, workers that did start
        included), what it waits for, and the fix. Not a proven deadlock: actors that are not
        blocked are assumed to end, but started workers that sit waiting for their siblings
        (a gang started piecemeal) never will. ``children``: the broker's index of children
        (:meth:`_children`), so the work is that of the line, not of every holder."""
        waiter = min(req.waiters, key=repr)
        root = self._ancestors(waiter)[-1]
        if children is None:
            children = self._children()
        holders = self._holders
        line: list[Hashable] = []
        seen = {root}
        todo = list(children.get(root, ()))
        while todo:
            hid = todo.pop()
            if hid in seen:
                continue
            seen.add(hid)
            h = holders.get(hid)
            if h is not None and h.grants:
                line.append(hid)
            todo.extend(children.get(hid, ()))
        root_h = holders.get(root)
        held = describe_holdings(root_h) if root_h is not None else "nothing"
        started = ""
        if line:
            listed = sorted(line, key=repr)[:_LISTED]
            parts = [f"{hid} holds {describe_holdings(holders[hid])}" for hid in listed]
            if len(line) > len(listed):
                parts.append(f"and {len(line) - len(listed)} more")
            started = f"; of the actors it started, {', '.join(parts)}"
        who = root if waiter == root else f"{waiter} (of {root})"
        return (
            f"{root} holds {held}{started}; {who} waits for {describe_request(req)}. If what "
            f"its started actors wait for is each other (a gang started piecemeal), this never "
            f"ends. To fix: {FIX_HINT}."
        )

    def total(self) -> dict[str, float]:
        """Cluster totals, as Ray's ``cluster_resources()`` (GPU: the number of devices)."""
        gone = self._gone
        return _floats(
            sum(
                (n.total_resources() for i, n in enumerate(self._nodes) if i not in gone),
                Resources(),
            )
        )

    def available(self) -> dict[str, float]:
        """What is free, as Ray's ``available_resources()``: reserved groups are not free;
        GPU is the sum of each device's free share; zero amounts are left out. A node being
        drained has nothing available."""
        nodes = self._nodes
        free = sum((nodes[i].free_resources() for i in self._order), Resources())
        for r in self._queue.reservations.values():
            free = free + Resources.from_units(r.amounts())
        return _floats(free)

    def node_usage(self) -> list[tuple[Hashable, dict[str, float], dict[str, float], bool]]:
        """Per node in service or being drained: its id, total and free resources, and
        whether it is being drained (free here counts what queue reservations hold)."""
        gone, draining = self._gone, self._draining
        return [
            (n.node_id, _floats(n.total_resources()), _floats(n.free_resources()), i in draining)
            for i, n in enumerate(self._nodes)
            if i not in gone
        ]

    def holders(self) -> list[Hashable]:
        """Every holder that holds a grant now, in the order they first did."""
        return [hid for hid, h in self._holders.items() if h.grants]

    def grants_of(self, holder: Hashable) -> list[Granted]:
        """What ``holder`` holds now, as the :class:`Granted` events that gave it."""
        h = self._holders.get(holder)
        if h is None:
            return []
        out = []
        for grant in h.grants.values():
            out.append(self._describe_grant(grant))
        return out

    def _describe_grant(self, grant: Grant) -> Granted:
        nodes = self._nodes
        if grant.group is not None:
            b, alloc = grant.placed[0]
            node = nodes[grant.group.node_idx[b]]
            one = BundlePlacement(
                node.node_id, grant.shape.bundles[0], grant.group.pools[b].gpu_shares(alloc),
                grant.group.gid, b,
            )  # fmt: skip
            return Granted(grant.rid, grant.holder, (one,), None)
        places = tuple(
            BundlePlacement(
                nodes[i].node_id,
                grant.shape.bundles[b],
                nodes[i].gpu_shares(alloc),
                None,
                b if grant.owned is not None else None,
            )
            for b, (i, alloc) in enumerate(grant.placed)
        )
        return Granted(grant.rid, grant.holder, places, grant.rid if grant.owned else None)

    def group_info(self, group: Hashable) -> GroupInfo | None:
        """The reserved group ``group``, or ``None`` (waiting, removed, or never made)."""
        g = self._groups.get(group)
        if g is None:
            return None
        nodes = self._nodes
        return GroupInfo(
            g.gid,
            g.grant.holder,
            tuple(b.to_dict() for b in g.bundles),
            g.grant.shape.strategy.value,
            tuple(nodes[i].node_id for i in g.node_idx),
        )

    def groups(self) -> list[GroupInfo]:
        """Every reserved group, oldest first."""
        return [info for gid in self._groups if (info := self.group_info(gid)) is not None]

    def bundle_available(self, group: Hashable, bundle: int) -> dict[str, float]:
        """What is free in one bundle of a reserved group.

        Raises:
            ValueError: no such group.
        """
        g = self._groups.get(group)
        if g is None:
            raise ValueError(f"no placement group {group!r} is reserved")
        return _floats(g.pools[bundle].free_resources())

    def waiting_of(self, holder: Hashable) -> list[Hashable]:
        """The ids of ``holder``'s requests that wait."""
        h = self._holders.get(holder)
        return list(h.requests) if h is not None else []

    def is_waiting(self, request_id: Hashable) -> bool:
        """Whether the request is waiting."""
        return request_id in self._requests

    def is_granted(self, request_id: Hashable) -> bool:
        """Whether the request holds a grant now."""
        return request_id in self._grants

    @property
    def nodes(self) -> tuple[NodeInventory, ...]:
        """The nodes, those being drained included (read them; do not change them)."""
        gone = self._gone
        return tuple(n for i, n in enumerate(self._nodes) if i not in gone)

    @property
    def waiting_count(self) -> int:
        """How many requests wait (cluster queue and groups)."""
        return len(self._requests)


def _floats(res: Resources) -> dict[str, float]:
    return {k: v / UNIT for k, v in res.items_units()}
