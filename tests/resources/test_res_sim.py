"""A simulation driving the broker over 1,000 fake nodes with a seeded random workload."""

from __future__ import annotations

import heapq
import random

from actorrt.resources import Broker, Failed, Granted, InfeasibleResourceError, NodeInventory


def test_thousand_node_simulation() -> None:
    rnd = random.Random(20261130)
    nodes = [NodeInventory(f"n{i}", {"CPU": 8, "GPU": 2, "memory": 64 << 30}) for i in range(1000)]
    b = Broker(nodes)
    ends: list[tuple[float, int, str]] = []  # (end time, seq, holder)
    granted: set[str] = set()
    made = 0
    shapes = [
        ({"CPU": 1}, None, None),
        ({"CPU": 0.5, "GPU": 0.25}, None, None),
        ({"GPU": 1}, None, None),
        (None, [{"CPU": 8}] * 4, "STRICT_SPREAD"),
        (None, [{"CPU": 2, "GPU": 1}] * 8, "PACK"),
        (None, [{"CPU": 4}] * 16, "SPREAD"),
        (None, [{"CPU": 4, "GPU": 1}] * 2, "STRICT_PACK"),
    ]

    def handle(events: list[object], now: float) -> None:
        for e in events:
            assert not isinstance(e, Failed)
            if isinstance(e, Granted):
                granted.add(str(e.request_id))
                if e.group is not None:
                    assert len({p.node_id for p in e.placements}) >= 1
                heapq.heappush(ends, (now + rnd.uniform(1, 20), len(granted), str(e.holder)))

    now = 0.0
    for step in range(2000):
        now += 0.01
        while ends and ends[0][0] <= now:
            _, _, holder = heapq.heappop(ends)
            handle(b.release(holder, now=now), now)
        res, bundles, strategy = shapes[rnd.randrange(len(shapes))]
        rid = f"r{step}"
        made += 1
        if bundles is None:
            handle(b.request(rid, rid, res, placement="cluster", now=now), now)
        else:
            handle(b.request(rid, rid, bundles=bundles, strategy=strategy, now=now), now)
        if step % 500 == 499:
            assert all(min(n.gpu_free) >= 0 and min(n.free.values()) >= 0 for n in b.nodes)
    # drain: everything finishes and every resource comes back
    while ends:
        now, _, holder = heapq.heappop(ends)
        handle(b.release(holder, now=now), now)
    assert len(granted) == made
    assert b.waiting_count == 0
    assert b.available() == b.total()
    assert b.total()["CPU"] == 8000.0 and b.total()["GPU"] == 2000.0
    try:
        b.request("huge", "h", bundles=[{"CPU": 1}] * 1001, strategy="STRICT_SPREAD")
    except InfeasibleResourceError as exc:
        assert "1000 nodes of" in str(exc)
    else:
        raise AssertionError("1001 bundles on 1000 nodes must be infeasible")


def test_many_pending_requests_do_not_slow_a_release() -> None:
    b = Broker([NodeInventory("n", {"CPU": 4})])
    for i in range(4):
        b.request(f"a{i}", f"a{i}", {"CPU": 1})
    for i in range(20_000):
        assert b.request(i, f"w{i}", {"CPU": 1 + (i % 2)}) == []
    # each release runs one pass over the two shapes, not over 20,000 requests
    events = b.release("a0")
    assert [e.request_id for e in events if isinstance(e, Granted)] == [0]
    assert b.waiting_count == 19_999
