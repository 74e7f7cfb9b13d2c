"""Placement groups: bundle validation, strategies across nodes, atomicity, bundles as pools."""

from __future__ import annotations

import pytest

from actorrt.resources import (
    Broker,
    Granted,
    GroupTarget,
    InfeasibleResourceError,
    NodeInventory,
    PlacementStrategy,
    parse_bundles,
    parse_strategy,
)


def _nodes(n: int, spec: dict[str, float]) -> list[NodeInventory]:
    return [NodeInventory(f"n{i}", spec) for i in range(n)]


def _granted(events: list[object]) -> Granted:
    (g,) = events
    assert isinstance(g, Granted)
    return g


def test_bundle_validation() -> None:
    assert len(parse_bundles([{"CPU": 1}, {"GPU": 0.5}])) == 2
    with pytest.raises(ValueError, match=r"bundle 1 .* asks for nothing"):
        parse_bundles([{"CPU": 1}, {"CPU": 0}])
    with pytest.raises(ValueError, match="bundle 0"):
        parse_bundles([{}])
    assert parse_bundles([{}, {"CPU": 1}], allow_empty_head=True)[0].is_empty()
    with pytest.raises(ValueError, match="bundle 1"):
        parse_bundles([{}, {}], allow_empty_head=True)
    with pytest.raises(ValueError, match="at least one bundle"):
        parse_bundles([])
    with pytest.raises(TypeError, match="list of resource dicts"):
        parse_bundles({"CPU": 1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"resource 'CPU'=-1"):
        parse_bundles([{"CPU": -1}])


def test_strategy_validation() -> None:
    assert parse_strategy("STRICT_SPREAD") is PlacementStrategy.STRICT_SPREAD
    with pytest.raises(ValueError, match="'pack' is not one of 'PACK'"):
        parse_strategy("pack")
    with pytest.raises(TypeError):
        parse_strategy(1)  # type: ignore[arg-type]


def test_pack_uses_one_node_when_it_can() -> None:
    b = Broker(_nodes(3, {"CPU": 4}))
    g = _granted(b.request("g", "d", bundles=[{"CPU": 2}, {"CPU": 2}], strategy="PACK"))
    assert {p.node_id for p in g.placements} == {"n0"}
    g2 = _granted(b.request("g2", "d", bundles=[{"CPU": 3}, {"CPU": 3}], strategy="PACK"))
    assert [p.node_id for p in g2.placements] == ["n1", "n2"]  # best effort: spills over


def test_spread_uses_distinct_nodes_when_it_can() -> None:
    b = Broker(_nodes(3, {"CPU": 4}))
    g = _granted(b.request("g", "d", bundles=[{"CPU": 1}] * 3, strategy="SPREAD"))
    assert sorted(p.node_id for p in g.placements) == ["n0", "n1", "n2"]
    g2 = _granted(b.request("g2", "d", bundles=[{"CPU": 1}] * 4, strategy="SPREAD"))
    nodes = [p.node_id for p in g2.placements]
    assert len(set(nodes)) == 3  # best effort: one node takes two


def test_strict_pack() -> None:
    b = Broker(_nodes(2, {"CPU": 4}))
    g = _granted(b.request("g", "d", bundles=[{"CPU": 2}, {"CPU": 2}], strategy="STRICT_PACK"))
    assert {p.node_id for p in g.placements} == {"n0"}
    with pytest.raises(InfeasibleResourceError, match=r"STRICT_PACK needs every bundle on one"):
        b.request("big", "d", bundles=[{"CPU": 3}, {"CPU": 3}], strategy="STRICT_PACK")
    # fits a node's totals, but not now: it waits, atomically (nothing held meanwhile)
    assert b.request("w", "e", bundles=[{"CPU": 2}, {"CPU": 2}], strategy="STRICT_PACK") != []
    assert b.request("w2", "e", bundles=[{"CPU": 2}, {"CPU": 2}], strategy="STRICT_PACK") == []
    assert b.available() == {}


def test_strict_spread() -> None:
    b = Broker(_nodes(3, {"CPU": 2}))
    g = _granted(b.request("g", "d", bundles=[{"CPU": 1}] * 3, strategy="STRICT_SPREAD"))
    assert sorted(p.node_id for p in g.placements) == ["n0", "n1", "n2"]
    with pytest.raises(InfeasibleResourceError, match="each of the 4 bundles on a different"):
        b.request("g4", "d", bundles=[{"CPU": 1}] * 4, strategy="STRICT_SPREAD")


def test_strict_spread_on_one_node_is_infeasible() -> None:
    b = Broker(_nodes(1, {"CPU": 8}))
    with pytest.raises(InfeasibleResourceError, match=r"there is 1\."):
        b.request("g", "d", bundles=[{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD")
    assert _granted(b.request("one", "d", bundles=[{"CPU": 1}], strategy="STRICT_SPREAD"))


def test_strict_spread_matching_is_exact() -> None:
    # greedy first-fit would put the small bundle on the GPU node and fail; matching succeeds
    b = Broker([NodeInventory("gpu", {"CPU": 1, "GPU": 1}), NodeInventory("cpu", {"CPU": 1})])
    g = _granted(b.request("g", "d", bundles=[{"CPU": 1}, {"GPU": 1}], strategy="STRICT_SPREAD"))
    assert [p.node_id for p in g.placements] == ["cpu", "gpu"]


def test_pack_search_finds_what_greedy_misses() -> None:
    # FFD by GPU places the 0.6s first; the search must still find a packing when one exists
    b = Broker([NodeInventory("a", {"CPU": 2}), NodeInventory("b", {"CPU": 3})])
    g = _granted(b.request("g", "d", bundles=[{"CPU": 2}, {"CPU": 1}, {"CPU": 2}], strategy="PACK"))
    assert sorted(p.node_id for p in g.placements) == ["a", "b", "b"]


def test_gpu_bundles_per_device() -> None:
    b = Broker(_nodes(1, {"GPU": 2}))
    with pytest.raises(InfeasibleResourceError):
        b.request("g", "d", bundles=[{"GPU": 0.6}] * 3, strategy="STRICT_PACK")
    g = _granted(b.request("g", "d", bundles=[{"GPU": 0.5}] * 4, strategy="STRICT_PACK"))
    assert [p.gpus for p in g.placements] == [
        (("0", 0.5),),
        (("0", 0.5),),
        (("1", 0.5),),
        (("1", 0.5),),
    ]


def test_bundle_is_a_sub_inventory() -> None:
    b = Broker(_nodes(1, {"CPU": 4, "GPU": 1}))
    _granted(b.request("g", "d", bundles=[{"CPU": 1}, {"CPU": 1, "GPU": 0.5}]))
    a1 = _granted(b.request("a1", "x1", {"CPU": 0.5}, placement=GroupTarget("g", 0)))
    a2 = _granted(b.request("a2", "x2", {"CPU": 0.5}, placement=GroupTarget("g", 0)))
    assert a1.placement.group == "g" and a1.placement.bundle_index == 0
    assert a2.placement.bundle_index == 0
    assert b.bundle_available("g", 0) == {}
    # "any bundle" finds bundle 1; its GPU share is half of device 0, so 0.25 fits, twice
    a3 = _granted(b.request("a3", "x3", {"CPU": 0.5, "GPU": 0.25}, placement=GroupTarget("g")))
    assert a3.placement.bundle_index == 1 and a3.placement.gpus == (("0", 0.25),)
    with pytest.raises(InfeasibleResourceError):
        b.request("a4", "x4", {"GPU": 1}, placement=GroupTarget("g", 1))
    assert b.request("a5", "x5", {"CPU": 1}, placement=GroupTarget("g", 1)) == []
    events = b.release("x3")
    assert [type(e).__name__ for e in events] == ["Granted"] and events[0].request_id == "a5"
    assert b.available() == {"CPU": 2.0, "GPU": 0.5}


def test_empty_head_bundle() -> None:
    b = Broker(_nodes(1, {"CPU": 2}))
    g = _granted(b.request("g", "t", bundles=[{}, {"CPU": 2}], allow_empty_head=True))
    assert g.placements[0].resources.is_empty()
    assert _granted(b.request("head", "t", {}, placement=GroupTarget("g", 0)))
    with pytest.raises(ValueError, match="asks for nothing"):
        b.request("g2", "t", bundles=[{}, {"CPU": 1}])
