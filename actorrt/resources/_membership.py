"""Nodes leaving the cluster: drained on purpose, or lost.

- :meth:`~actorrt.resources.Broker.remove_node` *drains* a node: nothing new is granted there,
  and what it holds stays until released; the node leaves the totals when its last grant is
  released.
- :meth:`~actorrt.resources.Broker.node_lost` says the node is gone now: every grant on it is
  revoked (a :class:`~actorrt.resources.Revoked` naming the node), and so is every placement
  group with a bundle there (its members too, and requests waiting inside it fail).

Either way the node's index leaves the placement order, so no placement, reservation or
feasibility answer uses it again; every waiting cluster request is checked anew against the
nodes that remain, and one that no longer fits any of them fails with
``InfeasibleResourceError`` saying which node went. Pure logic, like the rest of the broker:
the caller (a cluster's head, or a simulation) decides when a node is drained or lost.
"""

from __future__ import annotations

from collections.abc import Hashable

from actorrt._errors import InfeasibleResourceError

from ._events import Event, Revoked
from ._feasibility import check_cluster
from ._reports import BrokerReports
from ._state import Grant

__all__ = ["BrokerMembership"]


class BrokerMembership(BrokerReports):
    """Node removal and loss (see :class:`~actorrt.resources.Broker`)."""

    def remove_node(self, node_id: Hashable, *, now: float | None = None) -> list[Event]:
        """Drain a node: no new grants there; existing grants stay until released.

        Waiting requests that only that node could hold fail (``Failed`` with an
        ``InfeasibleResourceError``). Draining a node that is already draining does nothing.

        Raises:
            ValueError: no node with that id is in the cluster.
        """
        self._tick(now)
        i = self._node_index(node_id)
        if i in self._draining:
            return []
        self._take_out_of_service(i)
        if self._nodes[i].is_idle():
            self._gone.add(i)
        else:
            self._draining.add(i)
        return self._reevaluate(f"node {node_id!r} was drained")

    def node_lost(self, node_id: Hashable, *, now: float | None = None) -> list[Event]:
        """The node is gone: revoke every grant on it and every group with a bundle there.

        Returns ``Revoked`` events (``node`` set) for each grant that ended, ``Failed`` for
        requests that waited in a revoked group or that no remaining node can hold, and the
        ``Granted`` events of what the freed capacity elsewhere lets through.

        Raises:
            ValueError: no node with that id is in the cluster.
        """
        self._tick(now)
        i = self._node_index(node_id)
        self._take_out_of_service(i)
        self._draining.discard(i)
        self._gone.add(i)
        events: list[Event] = []
        for grant in [g for g in self._grants.values() if g.group is None]:
            if grant.rid in self._grants and any(n == i for n, _ in grant.placed):
                self._revoke_on_lost(grant, i, node_id, events)
        events.extend(self._reevaluate(f"node {node_id!r} was lost"))
        return events

    # -- helpers -----------------------------------------------------------------------------

    def _node_index(self, node_id: Hashable) -> int:
        for i, node in enumerate(self._nodes):
            if node.node_id == node_id and i not in self._gone:
                return i
        known = ", ".join(
            repr(n.node_id) for i, n in enumerate(self._nodes) if i not in self._gone
        )
        raise ValueError(f"no node {node_id!r} is in the cluster (nodes: {known or 'none'})")

    def _take_out_of_service(self, i: int) -> None:
        """No placement, reservation or feasibility answer uses node ``i`` from now on."""
        queue = self._queue
        queue.drop_reservations(self._nodes)  # remade by the next pass, on the nodes left
        if i in self._order:
            self._order.remove(i)
        queue.dirty.update(self._order)  # what was reserved anywhere is free to try again
        queue.dirty.discard(i)
        self._feasible.clear()
        for req in queue.waiting_requests():
            req.plan = None  # a reservation plan may have used the node
        if self._check is not None:  # a check under way saw the old nodes: start again
            self._check = None
            self._check_due = self._now

    def _revoke_on_lost(
        self, grant: Grant, lost: int, node_id: Hashable, events: list[Event]
    ) -> None:
        """End a grant with a bundle on the lost node; what it held elsewhere comes back."""
        del self._grants[grant.rid]
        h = self._holders[grant.holder]
        del h.grants[grant.rid]
        h.version += 1
        if grant.key == h.min_key:
            h.recompute_min_key()
        for n, alloc in grant.placed:
            if n != lost:
                self._nodes[n].release(alloc)
                self._queue.dirty.add(n)
        owned = grant.owned
        if owned is not None:
            self._remove_group(owned, events, node_id)
        events.append(
            Revoked(grant.rid, grant.holder, owned.gid if owned is not None else None, node_id)
        )
        if self._draining:
            self._retire_drained(grant.placed)
        self._drop_if_idle(h)

    def _reevaluate(self, why: str) -> list[Event]:
        """Fail the waiting cluster requests no node left can hold; grant what now fits."""
        events: list[Event] = []
        for req in self._queue.waiting_requests():
            try:
                check_cluster(
                    req.rid, req.holder, req.shape, self._nodes, self._empty, self._order
                )
            except InfeasibleResourceError as exc:
                error = InfeasibleResourceError(f"{exc} (It became so when {why}.)")
                events.append(self._fail(req, error)[0])
        events.extend(self._schedule())
        return events
