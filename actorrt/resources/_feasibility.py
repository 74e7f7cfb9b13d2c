"""Infeasibility: requests that can never be granted, refused at once with the fix in the message.

Two checks, both run when a request is made (never later inside the scheduler):

- **cluster**: the request's bundles, under its strategy, must fit the node *totals* (node
  shapes, per-device GPU amounts). Answers are cached per shape until a node is added.
- **inside a group**: the request must fit some candidate bundle's capacity minus what the
  requester and its ancestors hold in that bundle. Those cannot end while the request waits (a
  child dies with its parent, and a waiting request dies with its holder), so nothing else can
  ever make room; a request that fits once *siblings* end is feasible and waits.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from actorrt._errors import InfeasibleResourceError

from ._node import NodeInventory
from ._placement import PlacementStrategy, Shape, place_or_unknown, undo
from ._pool import ResourcePool
from ._spec import Resources
from ._state import Grant, Group

__all__ = ["FIX_HINT", "check_cluster", "check_in_group", "describe_nodes"]

# The fix for a driver that holds resources and waits for workers it did not declare. The
# broker knows no Tune: the actor layer puts Tune's spelling in its place for a trial (an actor
# class with a ``_actorrt_fix_hint``).
FIX_HINT = (
    "declare the workers together with their driver, as one atomic gang: spawn the driver with "
    "placement_group=[its own bundle] + [one bundle per worker] (e.g. "
    "placement_group=[{'CPU': 1}] + [{'CPU': 1}] * num_workers); the workers it spawns are "
    "then placed in that group"
)


def describe_nodes(nodes: Sequence[NodeInventory]) -> str:
    """``"2 nodes of {CPU: 4, GPU: 1}, 1 node of {CPU: 8}"`` (node totals, grouped)."""
    if not nodes:
        return "no nodes"
    counts: dict[Resources, int] = {}
    for node in nodes:
        total = node.total_resources()
        counts[total] = counts.get(total, 0) + 1
    parts = [f"{n} node{'s' if n > 1 else ''} of {res}" for res, n in counts.items()]
    return ", ".join(parts)


def check_cluster(
    rid: Hashable,
    holder: Hashable,
    shape: Shape,
    nodes: Sequence[NodeInventory],
    empty: Sequence[ResourcePool],
    order: Sequence[int],
) -> None:
    """Raise ``InfeasibleResourceError`` if ``shape`` cannot fit the node totals.

    A search that runs out of budget counts as feasible (the request waits rather than fail
    wrongly).
    """
    placed = place_or_unknown(shape, empty, order)
    if isinstance(placed, list):
        undo(empty, placed)
        return
    if placed:
        return
    nodes = [nodes[i] for i in order]  # the nodes in service
    what = f"[{', '.join(str(b) for b in shape.bundles)}] with strategy {shape.strategy.value}"
    if len(shape.bundles) == 1:
        what = str(shape.bundles[0])
    why = ""
    if shape.strategy is PlacementStrategy.STRICT_SPREAD and len(shape.bundles) > len(nodes):
        why = (
            f" STRICT_SPREAD puts each of the {len(shape.bundles)} bundles on a different node, "
            f"and there {'is' if len(nodes) == 1 else 'are'} {len(nodes)}."
        )
    elif shape.strategy is PlacementStrategy.STRICT_PACK and len(shape.bundles) > 1:
        why = f" STRICT_PACK needs every bundle on one node: {shape.total} in all."
    gpu_hint = (
        " (a fractional GPU must fit one device, a whole GPU needs a whole free device)"
        if shape.total.gpu_units else ""  # a CPU-only request gets no GPU advice
    )
    raise InfeasibleResourceError(
        f"request {rid!r} of {holder} asks for {what}, which the cluster can never hold: it has "
        f"{describe_nodes(nodes)}.{why} Ask for less{gpu_hint}, or start the runtime with "
        "more resources."
    )


def check_in_group(
    rid: Hashable,
    holder: Hashable,
    res: Resources,
    group: Group,
    bundle: int | None,
    chain: Sequence[tuple[Hashable, Sequence[Grant]]],
    captured: bool,
) -> None:
    """Raise ``InfeasibleResourceError`` if ``res`` can never fit the candidate bundles.

    Args:
        rid: the request id.
        holder: the request's holder.
        res: what it asks for.
        group: the target group.
        bundle: a bundle index, or ``None`` for any bundle.
        chain: ``(holder id, its grants)`` for the holder and each ancestor.
        captured: whether the group was chosen by ``"auto"`` capture (for the message).
    """
    candidates = range(len(group.pools)) if bundle is None else (bundle,)
    held: dict[int, list[tuple[Hashable, Grant]]] = {}
    for hid, grants in chain:
        for grant in grants:
            if grant.group is group:
                held.setdefault(grant.placed[0][0], []).append((hid, grant))
    for b in candidates:
        room = _capacity_pool(group.pools[b])
        for _, grant in held.get(b, ()):
            alloc = grant.placed[0][1]
            room.take(alloc.other, alloc.gpus)
        if room.fits(res):
            return
    raise InfeasibleResourceError(_group_message(rid, holder, res, group, bundle, held, captured))


def _capacity_pool(pool: ResourcePool) -> ResourcePool:
    twin = pool.copy()
    twin.free = dict(twin.capacity)
    twin.gpu_free = list(twin.gpu_capacity)
    return twin


def _group_message(
    rid: Hashable,
    holder: Hashable,
    res: Resources,
    group: Group,
    bundle: int | None,
    held: dict[int, list[tuple[Hashable, Grant]]],
    captured: bool,
) -> str:
    bundles = ", ".join(f"{i}: {b}" for i, b in enumerate(group.bundles))
    where = "any bundle" if bundle is None else f"bundle {bundle}"
    how = " (captured: the group its parent runs in)" if captured else ""
    holds = "; ".join(
        f"{hid} holds {grant.shape.bundles[0]} in bundle {b}"
        for b, items in sorted(held.items())
        for hid, grant in items
    )
    holds = f" While it waits, its own line holds: {holds}." if holds else ""
    return (
        f"request {rid!r} of {holder} asks for {res} in {where} of placement group "
        f"{group.gid!r}{how}, which can never hold it, even "
        f"once every sibling has ended: the group holds bundles [{bundles}].{holds} Spawn it "
        f"with placement='cluster' to queue outside the group, or declare more bundles. To "
        f"fix: {FIX_HINT}."
    )
