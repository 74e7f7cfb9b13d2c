"""Placement groups: bundle lists, strategies, and placing a gang of bundles on nodes.

Strategies have Ray's meaning across nodes:

- ``PACK``: as few nodes as possible, best effort (one node if any node can take every bundle);
- ``SPREAD``: each bundle on a different node where possible, best effort;
- ``STRICT_PACK``: every bundle on one node, or not at all;
- ``STRICT_SPREAD``: every bundle on a different node, or not at all (so on one node, more than
  one bundle is infeasible).

Placement is atomic: :func:`place` either allocates every bundle or changes nothing.

How it decides. Nodes are tried in the order given (the broker passes node order, which packs
nodes first-fit, Ray's default for a lightly loaded cluster being to pack). Within a node,
bundles are allocated largest GPU share first, so per-device GPU fractions pack well.
``STRICT_SPREAD`` is a bipartite matching of bundles to distinct nodes (exact). ``PACK`` and
``SPREAD`` try a greedy plan first; if it fails, a depth-first search with a step budget looks for
any assignment, skipping nodes whose free state equals one already tried at the same depth (so
1,000 identical nodes cost as much as one). When the budget runs out the answer is "unknown":
a feasibility check then treats the request as feasible (it waits rather than failing wrongly),
a placement attempt treats it as not placeable now.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum

from ._pool import Allocation, ResourcePool
from ._spec import Resources, parse_resources

__all__ = [
    "PlacementStrategy",
    "Shape",
    "parse_bundles",
    "parse_strategy",
    "place",
]

SEARCH_BUDGET = 4000
"""Node attempts the fallback search may make before it answers "unknown"."""
SEARCH_MAX_POOLS = 32
"""Largest cluster on which a placement attempt (not a feasibility check) may search."""


class PlacementStrategy(StrEnum):
    """How the bundles of a placement group are spread over nodes (Ray's four strategies)."""

    PACK = "PACK"
    SPREAD = "SPREAD"
    STRICT_PACK = "STRICT_PACK"
    STRICT_SPREAD = "STRICT_SPREAD"

    def __str__(self) -> str:
        return self.value


PlacementStrategy.__module__ = "actorrt.resources"
_BY_NAME = {s.value: s for s in PlacementStrategy}


def parse_strategy(strategy: str | PlacementStrategy) -> PlacementStrategy:
    """Validate a strategy name (``"PACK"``, ``"SPREAD"``, ``"STRICT_PACK"``, ``"STRICT_SPREAD"``).

    Raises:
        ValueError: an unknown name.
        TypeError: not a string.
    """
    known = _BY_NAME.get(strategy) if isinstance(strategy, str) else None
    if known is not None:
        return known
    if not isinstance(strategy, str):
        raise TypeError(f"strategy must be a string, got {type(strategy).__name__}")
    try:
        return PlacementStrategy(strategy)
    except ValueError:
        allowed = ", ".join(repr(s.value) for s in PlacementStrategy)
        raise ValueError(f"strategy={strategy!r} is not one of {allowed}") from None


def parse_bundles(
    bundles: Sequence[Mapping[str, object] | Resources], *, allow_empty_head: bool = False
) -> tuple[Resources, ...]:
    """Validate a placement group's bundle list.

    Args:
        bundles: a non-empty list of resource dicts.
        allow_empty_head: let bundle 0 ask for nothing (a Tune ``PlacementGroupFactory`` whose
            head bundle is empty); every other all-zero bundle is an error.

    Raises:
        TypeError: not a list of dicts, or a bad amount (see ``parse_resources``).
        ValueError: an empty list, an all-zero bundle, or a bad amount.
    """
    # Fast path: already parsed (the actor layer may cache parsed bundles).
    fast = type(bundles) in (list, tuple) and bool(bundles)
    if fast and all(type(b) is Resources and b for b in bundles):
        return tuple(b for b in bundles if isinstance(b, Resources))
    if isinstance(bundles, Mapping | str | bytes) or not isinstance(bundles, Sequence):
        raise TypeError(
            f"bundles must be a list of resource dicts, got {type(bundles).__name__}: {bundles!r}"
        )
    if not bundles:
        raise ValueError("a placement group needs at least one bundle; got []")
    parsed = []
    for i, bundle in enumerate(bundles):
        if not isinstance(bundle, Mapping | Resources):
            raise TypeError(f"bundle {i} must be a resource dict, got {bundle!r}")
        res = parse_resources(bundle)
        if not res and not (i == 0 and allow_empty_head):
            raise ValueError(
                f"bundle {i} ({dict(bundle) if isinstance(bundle, Mapping) else bundle}) asks "
                "for nothing; every bundle must reserve a non-zero amount of some resource"
            )
        parsed.append(res)
    return tuple(parsed)


class Shape:
    """A request's bundles and strategy, with what placement needs precomputed.

    Requests with equal shapes are interchangeable for placement; the broker shares one
    ``Shape`` between them.
    """

    # Slots for speed: read on every placement attempt.
    __slots__ = ("bundles", "fill_order", "key", "strategy", "total")

    def __init__(self, bundles: tuple[Resources, ...], strategy: PlacementStrategy) -> None:
        self.bundles = bundles
        self.strategy = strategy
        self.key = (bundles, strategy)
        total = bundles[0]
        for b in bundles[1:]:
            total = total + b
        self.total = total
        # Largest GPU share first (then most CPU) so per-device fractions pack well.
        self.fill_order: tuple[int, ...] = tuple(
            sorted(
                range(len(bundles)),
                key=lambda i: (-bundles[i].gpu_units, -bundles[i].units("CPU"), i),
            )
        )

    def __repr__(self) -> str:
        body = ", ".join(str(b) for b in self.bundles)
        return f"[{body}] {self.strategy.value}"


Placed = list[tuple[int, Allocation]]


def place(shape: Shape, pools: Sequence[ResourcePool], order: Sequence[int]) -> Placed | None:
    """Place every bundle of ``shape`` on ``pools`` (tried in ``order``), or change nothing.

    The fallback search runs only on small clusters (at most :data:`SEARCH_MAX_POOLS` pools):
    on a large one a placement attempt must stay linear in nodes, and a gang that greedy
    placement cannot fit now waits for more to free.

    Returns:
        ``(pool index, allocation)`` for each bundle, in bundle order; ``None`` if the shape does
        not fit now (or the search budget ran out).
    """
    result = place_or_unknown(shape, pools, order, search=len(order) <= SEARCH_MAX_POOLS)
    return result if isinstance(result, list) else None


def place_or_unknown(
    shape: Shape, pools: Sequence[ResourcePool], order: Sequence[int], *, search: bool = True
) -> Placed | bool:
    """As :func:`place`, but tell "certainly not" (``False``) from "gave up" (``True``).

    Without ``search``, a greedy failure is reported as "gave up".
    """
    bundles = shape.bundles
    if len(bundles) == 1:
        b = bundles[0]
        for i in order:
            alloc = pools[i].allocate(b)
            if alloc is not None:
                return [(i, alloc)]
        return False
    strategy = shape.strategy
    if strategy is PlacementStrategy.STRICT_SPREAD:
        return _strict_spread(shape, pools, order)
    if strategy is not PlacementStrategy.SPREAD:
        for i in order:
            placed = _all_on(shape, pools, i)
            if placed is not None:
                return placed
        if strategy is PlacementStrategy.STRICT_PACK:
            return False
    placed = _greedy(shape, pools, order, spread=strategy is PlacementStrategy.SPREAD)
    if placed is not None:
        return placed
    return _search(shape, pools, order) if search else True


def undo(pools: Sequence[ResourcePool], placed: Placed) -> None:
    """Release every allocation of a placement."""
    for i, alloc in placed:
        pools[i].release(alloc)


def _all_on(shape: Shape, pools: Sequence[ResourcePool], i: int) -> Placed | None:
    pool = pools[i]
    free = pool.free
    total = shape.total
    for k, v in total._other:
        if free.get(k, 0) < v:
            return None
    gpu = total._gpu
    if gpu and sum(pool.gpu_free) < gpu:
        return None
    bundles = shape.bundles
    allocs: list[Allocation | None] = [None] * len(bundles)
    for b in shape.fill_order:
        alloc = pool.allocate(bundles[b])
        if alloc is None:
            for a in allocs:
                if a is not None:
                    pool.release(a)
            return None
        allocs[b] = alloc
    return [(i, a) for a in allocs if a is not None]


def _greedy(
    shape: Shape, pools: Sequence[ResourcePool], order: Sequence[int], *, spread: bool
) -> Placed | None:
    """PACK: fill nodes already used first. SPREAD: one bundle per fresh node, then reuse."""
    bundles = shape.bundles
    todo = list(shape.fill_order)
    used: dict[int, int] = {}  # pool index -> bundles placed there, in first-use order
    allocs: dict[int, tuple[int, Allocation]] = {}

    def put(b: int, i: int) -> bool:
        alloc = pools[i].allocate(bundles[b])
        if alloc is None:
            return False
        allocs[b] = (i, alloc)
        used[i] = used.get(i, 0) + 1
        return True

    if spread:
        k = 0
        for i in order:  # one pass over the nodes: each takes the next bundle that fits it
            if k == len(todo):
                break
            if put(todo[k], i):
                k += 1
        todo = todo[k:]
    for b in todo:
        again = sorted(used, key=lambda i: used[i]) if spread else list(used)
        if any(put(b, i) for i in again):
            continue
        if any(put(b, i) for i in order if i not in used):
            continue
        undo(pools, list(allocs.values()))
        return None
    return [allocs[b] for b in range(len(bundles))]


def _state(pool: ResourcePool) -> tuple[object, ...]:
    # Key order is fixed per pool (free never gains keys); pools built alike compare equal.
    return (tuple(pool.free.items()), tuple(pool.gpu_free), pool.gpu_capacity)


def _search(shape: Shape, pools: Sequence[ResourcePool], order: Sequence[int]) -> Placed | bool:
    """Depth-first search for any assignment; ``True`` when the budget ran out."""
    fill = shape.fill_order
    chosen: dict[int, tuple[int, Allocation]] = {}
    budget = [SEARCH_BUDGET]

    def dfs(depth: int) -> bool | None:
        if depth == len(fill):
            return True
        b = fill[depth]
        seen: set[tuple[object, ...]] = set()
        for i in order:
            state = _state(pools[i])
            if state in seen:
                continue
            seen.add(state)
            budget[0] -= 1
            if budget[0] < 0:
                return None
            alloc = pools[i].allocate(shape.bundles[b])
            if alloc is None:
                continue
            chosen[b] = (i, alloc)
            found = dfs(depth + 1)
            if found:
                return True
            pools[i].release(alloc)
            del chosen[b]
            if found is None:
                return None
        return False

    found = dfs(0)
    if found:
        return [chosen[b] for b in range(len(shape.bundles))]
    return found is None


def _strict_spread(
    shape: Shape, pools: Sequence[ResourcePool], order: Sequence[int]
) -> Placed | bool:
    """Bundles on distinct nodes: a bipartite matching (Kuhn's augmenting paths)."""
    bundles = shape.bundles
    if len(bundles) > len(order):
        return False
    by_res: dict[Resources, list[int]] = {}
    for res in bundles:
        if res not in by_res:
            by_res[res] = [i for i in order if pools[i].fits(res)]
    options = [by_res[res] for res in bundles]
    owner: dict[int, int] = {}  # pool index -> bundle index

    def augment(b: int, visited: set[int]) -> bool:
        for i in options[b]:
            if i in visited:
                continue
            visited.add(i)
            if i not in owner or augment(owner[i], visited):
                owner[i] = b
                return True
        return False

    for b in sorted(range(len(bundles)), key=lambda b: len(options[b])):
        if not augment(b, set()):
            return False
    by_bundle = {b: i for i, b in owner.items()}
    placed: Placed = []
    for b in range(len(bundles)):
        i = by_bundle[b]
        alloc = pools[i].allocate(bundles[b])
        assert alloc is not None  # each pool holds one bundle, which fits it
        placed.append((i, alloc))
    return placed
