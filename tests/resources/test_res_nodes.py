"""Nodes leaving the cluster: drained (``remove_node``) or lost (``node_lost``).

Driven by events only, as a cluster's head (or a simulation) would drive the broker: no
grant survives on a lost node, nothing new lands on a drained one, requests no node left can
hold fail with the node named, and once everything ends what is available is the total.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actorrt.resources import (
    Broker,
    Failed,
    Granted,
    GroupTarget,
    InfeasibleResourceError,
    NodeInventory,
    Revoked,
)


def _broker(**specs: dict[str, float]) -> Broker:
    return Broker([NodeInventory(name, spec) for name, spec in specs.items()])


def _nodes_of(events: list[Any]) -> list[Hashable]:
    return [p.node_id for e in events if isinstance(e, Granted) for p in e.placements]


def test_a_drained_node_keeps_its_grants_and_takes_no_new_ones() -> None:
    b = _broker(a={"CPU": 2}, b={"CPU": 2})
    assert _nodes_of(b.request("r1", "h1", {"CPU": 2})) == ["a"]
    assert b.remove_node("a") == []
    assert b.total() == {"CPU": 4.0}  # still there until its grant ends
    assert b.available() == {"CPU": 2.0}  # nothing new goes to it
    assert b.grants_of("h1")[0].placement.node_id == "a"  # not revoked
    assert _nodes_of(b.request("r2", "h2", {"CPU": 2})) == ["b"]
    assert b.request("r3", "h3", {"CPU": 1}) == []  # waits for b, never goes to a
    b.release("h1")  # a's last grant: the node is gone
    assert b.total() == {"CPU": 2.0}
    assert [n.node_id for n in b.nodes] == ["b"]
    assert _nodes_of(b.release("h2")) == ["b"]
    b.release("h3")
    assert b.available() == b.total() == {"CPU": 2.0}


def test_draining_fails_a_request_only_that_node_could_hold() -> None:
    b = _broker(big={"CPU": 8}, small={"CPU": 2})
    b.request("r0", "h0", {"CPU": 8})
    assert b.request("r1", "h1", {"CPU": 4}) == []
    (failed,) = b.remove_node("big")
    assert isinstance(failed, Failed) and failed.request_id == "r1"
    assert isinstance(failed.error, InfeasibleResourceError)
    assert "node 'big' was drained" in str(failed.error)
    assert "1 node of {CPU: 2}" in str(failed.error)
    with pytest.raises(InfeasibleResourceError, match="1 node of"):
        b.request("r2", "h2", {"CPU": 4})
    assert b.waiting_count == 0


def test_an_idle_node_drains_at_once_and_can_join_again() -> None:
    b = _broker(a={"CPU": 1}, b={"CPU": 1})
    b.remove_node("b")
    assert b.total() == {"CPU": 1.0} and [n.node_id for n in b.nodes] == ["a"]
    with pytest.raises(ValueError, match="no node 'b' is in the cluster"):
        b.remove_node("b")
    b.add_node(NodeInventory("b", {"CPU": 3}))
    assert b.total() == b.available() == {"CPU": 4.0}


def test_a_lost_node_revokes_its_grants_and_groups_naming_it() -> None:
    b = _broker(a={"CPU": 2}, b={"CPU": 2})
    b.request("plain", "p", {"CPU": 1})  # on a
    (group,) = b.request("g", "trial", bundles=[{"CPU": 1}, {"CPU": 2}], strategy="SPREAD")
    assert sorted(p.node_id for p in group.placements) == ["a", "b"]
    b.request("m0", "w0", {"CPU": 1}, placement=GroupTarget("g", 0))
    b.request("m1", "w1", {"CPU": 2}, placement=GroupTarget("g", 1))
    assert b.request("m2", "w2", {"CPU": 1}, placement=GroupTarget("g")) == []  # waits inside
    lost = next(p.node_id for p in group.placements if p.node_id != "a")
    events = b.node_lost(lost)
    revoked = {e.request_id: e for e in events if isinstance(e, Revoked)}
    assert set(revoked) == {"g", "m0", "m1"}  # the whole group: a bundle was on the lost node
    assert all(e.node == lost for e in revoked.values())
    assert revoked["g"].group == "g" and revoked["g"].holder == "trial"
    (failed,) = [e for e in events if isinstance(e, Failed)]
    assert failed.request_id == "m2"
    assert [g.request_id for g in b.grants_of("p")] == ["plain"]  # on a: untouched
    assert b.total() == {"CPU": 2.0}
    assert b.available() == {"CPU": 1.0}  # the group's bundle on a came back
    with pytest.raises(ValueError, match="no node"):
        b.node_lost(lost)


def test_losing_a_node_reevaluates_waiting_requests() -> None:
    b = _broker(a={"CPU": 2}, b={"CPU": 4})
    b.request("full-a", "x", {"CPU": 2})
    b.request("full-b", "y", {"CPU": 4})
    assert b.request("small", "s", {"CPU": 2}) == []
    assert b.request("big", "t", {"CPU": 3}) == []
    events = b.node_lost("b")
    assert [e.request_id for e in events if isinstance(e, Revoked)] == ["full-b"]
    (failed,) = [e for e in events if isinstance(e, Failed)]
    assert failed.request_id == "big" and "node 'b' was lost" in str(failed.error)
    assert b.is_waiting("small")  # still fits a, once x ends
    assert _nodes_of(b.release("x")) == ["a"]


# -- property: random traffic with nodes drained and lost --------------------------------------

SPECS = {"n0": {"CPU": 2, "GPU": 1}, "n1": {"CPU": 1.5}, "n2": {"CPU": 1, "GPU": 2}}
amounts = st.fixed_dictionaries(
    {"CPU": st.sampled_from([0.25, 0.5, 1, 1.5]), "GPU": st.sampled_from([0, 0, 0.5, 1])}
)


@settings(
    max_examples=250, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip
@given(st.data())
def test_no_grant_survives_on_a_lost_node(data: st.DataObject) -> None:
    b = Broker([NodeInventory(n, s) for n, s in SPECS.items()],
               reservation_depth=data.draw(st.sampled_from([0, 4])))  # fmt: skip
    holders = [f"h{i}" for i in range(4)]
    granted: dict[Hashable, Granted] = {}
    lost: set[Hashable] = set()
    drained: set[Hashable] = set()
    extra = 0
    for step in range(data.draw(st.integers(5, 40))):
        op = data.draw(st.sampled_from(
            ["plain", "plain", "group", "inside", "release", "drain", "lose", "add"]
        ))  # fmt: skip
        holder = data.draw(st.sampled_from(holders))
        rid = f"r{step}"
        live = sorted(n.node_id for n in b.nodes if n.node_id not in drained)
        events: list[Any] = []
        try:
            if op == "plain":
                events = b.request(rid, holder, data.draw(amounts), placement="cluster")
            elif op == "group":
                bundles = data.draw(st.lists(amounts, min_size=1, max_size=3))
                strategy = data.draw(st.sampled_from(["PACK", "SPREAD", "STRICT_SPREAD"]))
                events = b.request(rid, holder, bundles=bundles, strategy=strategy)
            elif op == "inside":
                groups = sorted(g for g, e in granted.items() if e.group is not None)
                if groups:
                    gid = data.draw(st.sampled_from(groups))
                    events = b.request(rid, holder, {"CPU": 0.25}, placement=GroupTarget(gid))
            elif op == "release":
                events = b.release(holder)
                for r in [r for r, g in granted.items() if g.holder == holder]:
                    gone = granted.pop(r)
                    for m in [m for m, g in granted.items()
                              if g.placement.group == gone.group is not None]:  # fmt: skip
                        del granted[m]
            elif op == "drain" and live:
                node = data.draw(st.sampled_from(live))
                events = b.remove_node(node)
                drained.add(node)
            elif op == "lose" and live:
                node = data.draw(st.sampled_from(live))
                events = b.node_lost(node)
                lost.add(node)
            elif op == "add":
                extra += 1
                events = b.add_node(NodeInventory(f"x{extra}", {"CPU": 1, "GPU": 1}))
        except InfeasibleResourceError:
            continue
        for e in events:
            if isinstance(e, Granted):
                granted[e.request_id] = e
                for p in e.placements:
                    if p.group is None:  # a cluster grant: only on nodes in service
                        assert p.node_id not in lost and p.node_id not in drained
            elif isinstance(e, Revoked):
                granted.pop(e.request_id, None)
                if e.node is not None:
                    assert e.node in lost
        # the broker's view matches the events, and nothing sits on a lost node
        listed = {g.request_id: g for h in holders for g in b.grants_of(h)}
        assert listed == granted
        assert not any(p.node_id in lost for g in listed.values() for p in g.placements)
        for node in b.nodes:
            assert node.node_id not in lost
            assert all(0 <= v <= node.capacity[k] for k, v in node.free.items())
            assert all(0 <= f <= c for f, c in zip(node.gpu_free, node.gpu_capacity, strict=True))
    for h in holders:
        b.release(h)
    assert b.waiting_count == 0
    assert b.available() == b.total()
    remaining = {n.node_id for n in b.nodes}
    assert not remaining & (lost | drained)  # drained nodes left once their grants ended
    assert all(node.is_idle() for node in b.nodes)
