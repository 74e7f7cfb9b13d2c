"""The broker: grants, releases, queue order, reservations, capture, removal, reports."""

from __future__ import annotations

import pytest

from actorrt.resources import (
    Broker,
    Failed,
    Granted,
    GroupTarget,
    InfeasibleResourceError,
    NodeInventory,
    ResourceError,
    Revoked,
)


def _broker(spec: dict[str, float], n: int = 1, **kw: float) -> Broker:
    return Broker([NodeInventory(f"n{i}", spec) for i in range(n)], **kw)  # type: ignore[arg-type]


def _ids(events: list[object]) -> list[object]:
    return [e.request_id for e in events if isinstance(e, Granted)]  # type: ignore[union-attr]


def test_half_cpus_fit_eight_and_the_ninth_waits() -> None:
    b = _broker({"CPU": 4})
    for i in range(8):
        assert _ids(b.request(i, f"h{i}", {"CPU": 0.5})) == [i]
    assert b.request(8, "h8", {"CPU": 0.5}) == []
    assert b.is_waiting(8) and b.available() == {}
    assert _ids(b.release("h3")) == [8]


def test_tenths_give_back_exactly_one() -> None:
    b = _broker({"CPU": 1})
    for i in range(10):
        assert _ids(b.request(i, f"h{i}", {"CPU": 0.1})) == [i]
    assert b.request("x", "hx", {"CPU": 0.1}) == []
    b.cancel("x")
    for i in range(10):
        b.release(f"h{i}")
    assert b.available() == {"CPU": 1.0} == b.total()


def test_eight_gpus_eight_devices() -> None:
    b = _broker({"GPU": 8})
    devices = []
    for i in range(8):
        (g,) = b.request(i, f"h{i}", {"GPU": 1})
        assert isinstance(g, Granted)
        devices.extend(g.placement.gpu_ids)
    assert sorted(devices, key=int) == [str(i) for i in range(8)]
    assert b.request(9, "h9", {"GPU": 0.01}) == []


def test_infeasible_at_once() -> None:
    b = _broker({"CPU": 4, "GPU": 1}, n=2)
    with pytest.raises(InfeasibleResourceError, match=r"asks for \{CPU: 5\}.*2 nodes of"):
        b.request("r", "h", {"CPU": 5})
    with pytest.raises(InfeasibleResourceError, match="GPU: 2"):
        b.request("r", "h", {"GPU": 2})
    with pytest.raises(InfeasibleResourceError, match="custom"):
        b.request("r", "h", {"custom": 1})
    assert not b.is_waiting("r")
    assert b.request("r", "h", {"CPU": 4}) != []  # the id was not taken by the failures


def test_request_validation() -> None:
    b = _broker({"CPU": 4})
    b.request("r", "h", {"CPU": 1})
    with pytest.raises(ValueError, match="already in use"):
        b.request("r", "h", {"CPU": 1})
    with pytest.raises(TypeError, match="not both"):
        b.request("x", "h", {"CPU": 1}, bundles=[{"CPU": 1}])
    with pytest.raises(ValueError, match="no placement group 'nope'"):
        b.request("x", "h", {"CPU": 1}, placement=GroupTarget("nope"))
    with pytest.raises(ValueError, match="'somewhere'"):
        b.request("x", "h", {"CPU": 1}, placement="somewhere")
    with pytest.raises(TypeError, match="resource 'CPU'"):
        b.request("x", "h", {"CPU": "1"})
    b.request("g", "h", bundles=[{"CPU": 1}])
    with pytest.raises(ValueError, match=r"bundle index must be in 0\.\.0"):
        b.request("x", "h", {"CPU": 1}, placement=GroupTarget("g", 1))
    with pytest.raises(ValueError, match="never inside another group"):
        b.request("x", "h", bundles=[{"CPU": 1}], placement=GroupTarget("g"))


def test_release_returns_everything_and_is_idempotent() -> None:
    b = _broker({"CPU": 4, "GPU": 2, "memory": 1000})
    b.request("a", "h", {"CPU": 1, "GPU": 0.5, "memory": 100})
    b.request("g", "h", bundles=[{"CPU": 1}, {"GPU": 1}])
    b.request("w", "h", {"CPU": 4})
    assert b.available() == {"CPU": 2.0, "GPU": 0.5, "memory": 900.0}
    assert b.release("h") == []
    assert b.available() == b.total() == {"CPU": 4.0, "GPU": 2.0, "memory": 1000.0}
    assert b.release("h") == [] and not b.is_waiting("w")


def test_cancel_waiting_and_granted() -> None:
    b = _broker({"CPU": 1})
    b.request("a", "h1", {"CPU": 1})
    assert b.request("b", "h2", {"CPU": 1}) == []
    assert b.request("c", "h3", {"CPU": 1}) == []
    assert b.cancel("b") == []
    assert _ids(b.cancel("a")) == ["c"]
    assert b.cancel("a") == [] and b.cancel("unknown") == []


def test_fifo_order_in_the_cluster_queue() -> None:
    b = _broker({"CPU": 2})
    b.request("a", "ha", {"CPU": 2})
    for i in range(3):
        assert b.request(i, f"w{i}", {"CPU": 1}) == []
    assert _ids(b.release("ha")) == [0, 1]
    assert _ids(b.release("w0")) == [2]


def test_large_gang_not_starved_by_small_requests() -> None:
    b = _broker({"CPU": 4})
    for i in range(4):
        b.request(f"s{i}", f"s{i}", {"CPU": 1})
    assert b.request("gang", "drv", bundles=[{"CPU": 1}] * 4, strategy="STRICT_PACK") == []
    n = 4
    for i in range(3):
        # a small one ends; its CPU is reserved for the gang; new small ones wait
        assert b.release(f"s{i}") == []
        assert b.request(f"s{n}", f"s{n}", {"CPU": 1}) == []
        n += 1
    events = b.release("s3")
    assert _ids(events) == ["gang"]
    # the smalls follow once the gang ends, in order
    assert _ids(b.release("drv")) == ["s4", "s5", "s6"]


def test_backfill_takes_only_unreserved() -> None:
    b = _broker({"CPU": 4, "GPU": 1})
    b.request("gpu", "hg", {"GPU": 1})
    assert b.request("big", "hb", {"CPU": 1, "GPU": 1}) == []  # reserves 1 CPU
    for i in range(3):
        assert _ids(b.request(i, f"s{i}", {"CPU": 1})) == [i]  # backfill on the other 3
    assert b.request(3, "s3", {"CPU": 1}) == []  # the 4th CPU is reserved
    (p,) = [p for p in b.pending() if p.request_id == 3]
    assert p.behind == ("big",) and p.reserved
    # One account of where it stands: the reservation ahead of it, and its own place.
    assert p.reason == (
        "what it needs is free, but set aside for the request ahead of it: request big of hb; "
        "it is 2nd in line"
    )
    assert _ids(b.release("hg")) == ["big"]


def test_reservation_depth_zero_is_pure_backfill() -> None:
    b = _broker({"CPU": 4}, reservation_depth=0)
    b.request("a", "ha", {"CPU": 3})
    assert b.request("big", "hb", {"CPU": 4}) == []
    assert _ids(b.request("s", "hs", {"CPU": 1})) == ["s"]


def test_holder_served_at_its_admission_time() -> None:
    b = _broker({"CPU": 2})
    b.request("a1", "A", {"CPU": 1})  # A admitted first
    b.request("x", "X", {"CPU": 1})
    assert b.request("big", "B", {"CPU": 2}) == []  # B waits, reserved
    assert b.request("a2", "A", {"CPU": 1}) == []  # A's second request: A's admission time
    # when X ends, A (admitted before B) is served first, not B
    assert _ids(b.release("X")) == ["a2"]


def test_child_inherits_the_parents_admission_time() -> None:
    b = _broker({"CPU": 2})
    b.request("p", "P", {"CPU": 1})
    b.request("x", "X", {"CPU": 1})
    assert b.request("late", "L", {"CPU": 1}) == []
    assert b.request("child", "C", {"CPU": 1}, parent="P", placement="cluster") == []
    assert _ids(b.release("X")) == ["child"]


def test_auto_captures_into_the_parents_group() -> None:
    b = _broker({"CPU": 4})
    b.request("g", "trial", bundles=[{"CPU": 1}, {"CPU": 1}, {"CPU": 1}])
    (d,) = b.request("d", "trial", {"CPU": 1}, placement=GroupTarget("g", 0))
    assert isinstance(d, Granted)
    (w,) = b.request("w1", "worker1", {"CPU": 1}, parent="trial")
    assert isinstance(w, Granted) and w.placement.group == "g" and w.placement.bundle_index == 1
    # a grandchild (through an inline actor with no grant) is captured too
    b.set_parent("inline", "worker1")
    (w2,) = b.request("w2", "worker2", {"CPU": 1}, parent="inline")
    assert isinstance(w2, Granted) and w2.placement.bundle_index == 2
    # fits once a sibling ends: waits
    assert b.request("w3", "worker3", {"CPU": 1}, parent="trial") == []
    assert _ids(b.release("worker2")) == ["w3"]
    # "cluster" escapes the group; a placement group from inside is never captured
    (c,) = b.request("c", "modin", {"CPU": 1}, parent="trial", placement="cluster")
    assert isinstance(c, Granted) and c.placement.group is None
    assert b.request("pg", "trial", bundles=[{"CPU": 1}]) == []


def test_captured_request_that_can_never_fit_is_infeasible() -> None:
    b = _broker({"CPU": 8})
    b.request("g", "trial", bundles=[{"CPU": 1}])
    b.request("d", "trial", {"CPU": 1}, placement=GroupTarget("g", 0))
    with pytest.raises(InfeasibleResourceError) as info:
        b.request("w", "worker", {"CPU": 1}, parent="trial")
    msg = str(info.value)
    assert "placement group 'g'" in msg and "captured" in msg
    assert "bundles [0: {CPU: 1}]" in msg and "trial holds {CPU: 1} in bundle 0" in msg
    assert "placement='cluster'" in msg and "placement_group=[its own bundle]" in msg
    assert isinstance(info.value, ValueError)
    # larger than every bundle, even with nothing held
    b.request("g2", "t2", bundles=[{"CPU": 1}, {"CPU": 1}])
    with pytest.raises(InfeasibleResourceError):
        b.request("w2", "x", {"CPU": 2}, placement=GroupTarget("g2"))


def test_removing_a_group_revokes_and_fails() -> None:
    b = _broker({"CPU": 4})
    b.request("g", "trial", bundles=[{"CPU": 2}])
    b.request("a", "actor_a", {"CPU": 2}, placement=GroupTarget("g"))
    assert b.request("b", "actor_b", {"CPU": 1}, placement=GroupTarget("g")) == []
    assert b.request("big", "other", {"CPU": 4}) == []
    events = b.cancel("g")  # pg.remove()
    assert [type(e) for e in events] == [Revoked, Failed, Granted]
    assert events[0] == Revoked("a", "actor_a", "g")
    failed = events[1]
    assert isinstance(failed, Failed) and type(failed.error) is ResourceError
    assert "was removed" in str(failed.error)
    assert b.grants_of("actor_a") == [] and b.grants_of("other")[0].request_id == "big"


def test_grants_of_and_events_describe_devices() -> None:
    b = _broker({"CPU": 4, "GPU": 2})
    (g,) = b.request("g", "t", bundles=[{"CPU": 1, "GPU": 1}, {"GPU": 0.5}])
    assert isinstance(g, Granted) and g.group == "g"
    assert [p.gpus for p in g.placements] == [(("0", 1.0),), (("1", 0.5),)]
    assert b.grants_of("t") == [g]
    (a,) = b.request("a", "x", {"GPU": 0.25}, placement=GroupTarget("g", 1))
    assert isinstance(a, Granted) and a.placement.gpu_ids == ("1",)
    assert b.grants_of("x") == [a]


def test_total_and_available_as_ray() -> None:
    b = Broker(
        [NodeInventory("a", {"CPU": 2, "GPU": 2, "memory": 10}), NodeInventory("b", {"CPU": 1})]
    )
    assert b.total() == {"CPU": 3.0, "GPU": 2.0, "memory": 10.0}
    b.request("x", "h", {"CPU": 0.5, "GPU": 0.25})
    b.request("g", "h", bundles=[{"CPU": 1}])
    assert b.available() == {"CPU": 1.5, "GPU": 1.75, "memory": 10.0}


def test_add_node_grants_waiting() -> None:
    b = _broker({"CPU": 1})
    b.request("a", "h", {"CPU": 1})
    assert b.request("b", "h2", {"CPU": 1}) == []
    with pytest.raises(InfeasibleResourceError):
        b.request("c", "h3", {"GPU": 1})
    assert _ids(b.add_node(NodeInventory("n1", {"CPU": 1, "GPU": 1}))) == ["b"]
    assert b.request("c", "h3", {"GPU": 1}) != []
    with pytest.raises(ValueError, match="already known"):
        b.add_node(NodeInventory("n1", {"CPU": 1}))


def test_pending_explains() -> None:
    b = _broker({"CPU": 2, "GPU": 1})
    b.request("a", "alice", {"CPU": 2})
    b.request("g", "gina", {"GPU": 1})
    b.request("w", "walt", {"CPU": 1, "GPU": 0.5}, now=1.0)
    (p,) = b.pending(now=3.0)
    assert p.request_id == "w" and p.holder == "walt" and p.queue == "cluster"
    assert p.short_of == {"CPU": 1.0, "GPU": 0.5}
    assert set(p.held_by) == {"alice", "gina"} and p.reserved and not p.stalled
    assert p.waited_s == 2.0 and "waiting for {CPU: 1, GPU: 0.5} more" in p.reason
    assert p.bundles == ({"CPU": 1.0, "GPU": 0.5},) and p.strategy is None
    p2 = b.pending(now=20.0)[0]
    # Nobody awaits it from inside an actor: a long wait is queueing, not a stall.
    assert p2.stalled and "stalled" not in p2.reason
    assert "no grant in its queue for 20.0 s" in p2.reason
    b.blocked("gina", on_request="w", now=20.0)
    p3 = b.pending(now=21.0)[0]
    assert p3.reason.endswith(
        "stalled: nothing granted in its queue for 21.0 s while an actor awaits it"
    )


def test_pending_in_group() -> None:
    b = _broker({"CPU": 4})
    b.request("g", "t", bundles=[{"CPU": 2}])
    b.request("a", "x", {"CPU": 2}, placement=GroupTarget("g"))
    b.request("b", "y", {"CPU": 1}, placement=GroupTarget("g"))
    (p,) = b.pending()
    assert p.queue == "g" and p.short_of == {"CPU": 1.0} and p.held_by == ("x",)
