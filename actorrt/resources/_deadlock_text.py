"""What deadlock reports and stall warnings say: holders, requests, the two messages."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from ._feasibility import FIX_HINT
from ._spec import Resources
from ._state import Grant, Holder, Request

__all__ = ["MAX_LISTED", "ask_cycle_message", "describe_holdings", "describe_request",
           "resource_message"]

MAX_LISTED = 6  # holders named in a message beyond the main one


def describe_holdings(holder: Holder) -> str:
    """What a holder holds, for messages."""
    parts = []
    for grant in holder.grants.values():
        parts.append(_describe_grant(grant))
    return "; ".join(parts) if parts else "nothing"


def _describe_grant(grant: Grant) -> str:
    if grant.owned is not None:
        bundles = ", ".join(str(b) for b in grant.shape.bundles)
        return f"placement group {grant.rid!r} [{bundles}]"
    if grant.group is not None:
        b = grant.placed[0][0]
        return f"{grant.shape.bundles[0]} in bundle {b} of group {grant.group.gid!r}"
    return str(grant.shape.bundles[0])


def describe_request(req: Request) -> str:
    """A request, for messages: what it asks and where."""
    if req.is_group:
        bundles = ", ".join(str(b) for b in req.shape.bundles)
        what = f"placement group [{bundles}] ({req.shape.strategy.value})"
    else:
        what = str(req.shape.bundles[0])
    if req.group is not None:
        where = "any bundle" if req.bundle is None else f"bundle {req.bundle}"
        return f"request {req.rid!r} for {what} in {where} of group {req.group.gid!r}"
    return f"request {req.rid!r} for {what} from the cluster"


def _waits(h: Holder, requests: Mapping[Hashable, Request]) -> str:
    edges = sorted(h.edges_request, key=repr)
    parts = [describe_request(requests[r]) for r in edges if r in requests]
    parts += [f"an answer from {x}" for x in sorted(h.edges_holder, key=repr)]
    return " and ".join(parts) if parts else "nothing"


def ask_cycle_message(cycle: tuple[Hashable, ...], waiter: Hashable, target: Hashable) -> str:
    """The error of the newest ask in a cycle (long cycles abridged)."""
    size = len(cycle)
    shown: tuple[object, ...] = cycle
    if size > 2 * MAX_LISTED:
        more = f"... {size - 2 * MAX_LISTED} more ..."
        shown = (*cycle[:MAX_LISTED], more, *cycle[-MAX_LISTED:])
    ring = " -> ".join(str(hid) for hid in (*shown, cycle[0]))
    return (
        f"ask deadlock: {waiter} awaits an answer from {target}, but the asks form a cycle "
        f"({ring}) and each of these actors handles one message at a time, so none of the "
        f"answers can ever come; this ask fails. To fix: do not await an ask to an actor that "
        f"is (directly or through others) awaiting you; use tell, call the logic directly, "
        f"or give an actor max_concurrency > 1 so it can answer while it waits."
    )


def resource_message(
    victim: Request,
    main: Hashable,
    main_holder: Holder | None,
    others: Sequence[tuple[Hashable, Holder]],
    more: int,
    requests: Mapping[Hashable, Request],
    free: Resources,
) -> str:
    """The error of a resource deadlock's victim: who holds what and waits for what."""
    held = describe_holdings(main_holder) if main_holder is not None else "nothing"
    parts = [
        f"{hid} holds {describe_holdings(h)} and waits for {_waits(h, requests)}"
        for hid, h in others
    ]
    if more > 0:
        parts.append(f"and {more} more blocked holders")
    rest = "; ".join(parts) if parts else "nobody else: it waits on itself"
    return (
        f"resource deadlock: {main} holds {held} and waits for {describe_request(victim)}, "
        f"which can only be granted once resources held by blocked actors are freed. The rest "
        f"is held by: {rest}. Free once every other actor ends: {free}. None of them "
        f"can proceed, so this request fails. To fix: {FIX_HINT}."
    )
