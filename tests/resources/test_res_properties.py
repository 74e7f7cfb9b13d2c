"""Property tests: no over-allocation, exact return, atomic gangs, and the deadlock rule
checked against an independent brute-force oracle."""

from __future__ import annotations

from collections.abc import Hashable
from itertools import combinations
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from actorrt.resources import (
    Broker,
    Failed,
    Granted,
    GroupTarget,
    InfeasibleResourceError,
    NodeInventory,
    ResourceDeadlockError,
    Revoked,
)

U = 10_000
NODE_SPECS = {"n0": {"CPU": 2, "GPU": 2, "x": 1}, "n1": {"CPU": 1.5, "GPU": 1}}
SETTINGS = settings(
    max_examples=300, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip

amounts = st.fixed_dictionaries(
    {
        "CPU": st.sampled_from([0, 0.25, 0.5, 1, 1.5]),
        "GPU": st.sampled_from([0, 0, 0.25, 0.5, 1]),
        "x": st.sampled_from([0, 0, 0.5, 1]),
    }
)
nonzero = amounts.map(lambda d: d if any(d.values()) else {**d, "CPU": 0.25})


def _new_broker(**kw: Any) -> Broker:
    return Broker([NodeInventory(n, spec) for n, spec in NODE_SPECS.items()], **kw)


def _units(x: float) -> int:
    return round(x * U)


class Ledger:
    """What the test believes each holder holds, built only from the broker's events."""

    def __init__(self) -> None:
        self.grants: dict[Hashable, Granted] = {}
        self.groups: dict[Hashable, int] = {}  # group id -> bundle count
        self.waiting: dict[Hashable, tuple[Hashable, int]] = {}  # rid -> (holder, bundles)

    def apply(self, events: list[Any]) -> None:
        for e in events:
            if isinstance(e, Granted):
                assert e.request_id not in self.grants, "granted twice"
                holder, nbundles = self.waiting.pop(e.request_id)
                assert e.holder == holder
                assert len(e.placements) == nbundles, "a gang was granted partially"
                self.grants[e.request_id] = e
                if e.group is not None:
                    self.groups[e.group] = nbundles
            elif isinstance(e, Failed):
                self.waiting.pop(e.request_id)
            elif isinstance(e, Revoked):
                self.grants.pop(e.request_id, None)

    def drop_holder(self, holder: Hashable) -> None:
        for rid in [r for r, g in self.grants.items() if g.holder == holder]:
            g = self.grants.pop(rid, None)
            if g is not None and g.group is not None:
                self._drop_group(g.group)
        for rid in [r for r, (h, _) in self.waiting.items() if h == holder]:
            del self.waiting[rid]

    def _drop_group(self, gid: Hashable) -> None:
        self.groups.pop(gid, None)
        for rid in [r for r, g in self.grants.items() if g.placement.group == gid]:
            del self.grants[rid]


def check_invariants(b: Broker, ledger: Ledger, holders: list[Hashable]) -> None:
    # 1. no pool over-allocated, per node and per device
    for node in b.nodes:
        assert all(0 <= v <= node.capacity[k] for k, v in node.free.items())
        assert all(0 <= f <= c for f, c in zip(node.gpu_free, node.gpu_capacity, strict=True))
    # 2. what the broker says each holder holds matches the event ledger
    listed = {g.request_id: g for h in holders for g in b.grants_of(h)}
    assert listed == ledger.grants
    # 3. node-level conservation: total - held == available (reservations are available)
    held: dict[str, int] = {}
    per_device: dict[tuple[Hashable, str], float] = {}
    in_bundles: dict[tuple[Hashable, int], dict[str, int]] = {}
    for g in listed.values():
        for p in g.placements:
            if p.group is not None:
                slot = in_bundles.setdefault((p.group, p.bundle_index or 0), {})
                for k, v in p.resources.items_units():
                    slot[k] = slot.get(k, 0) + v
                continue
            for k, v in p.resources.items_units():
                held[k] = held.get(k, 0) + v
            for dev, frac in p.gpus:
                per_device[(p.node_id, dev)] = per_device.get((p.node_id, dev), 0) + frac
    total = {k: _units(v) for k, v in b.total().items()}
    avail = {k: _units(v) for k, v in b.available().items()}
    for k, v in total.items():
        assert avail.get(k, 0) == v - held.get(k, 0), (k, avail, total, held)
    assert all(share <= 1.0 + 1e-9 for share in per_device.values())
    # 4. per bundle: placements inside + free == the bundle
    for (gid, i), used in in_bundles.items():
        free = {k: _units(v) for k, v in b.bundle_available(gid, i).items()}
        bundle = ledger.grants[gid].placements[i].resources
        for k, v in bundle.items_units():
            assert free.get(k, 0) + used.get(k, 0) == v
    # 5. a waiting gang holds nothing
    for rid in ledger.waiting:
        assert rid not in listed and b.is_waiting(rid)


@SETTINGS
@given(st.data())
def test_random_operations_keep_the_invariants(data: st.DataObject) -> None:
    b = _new_broker(reservation_depth=data.draw(st.sampled_from([0, 1, 4])))
    holders = [f"h{i}" for i in range(5)]
    ledger = Ledger()
    now = 0.0
    for step in range(data.draw(st.integers(5, 40))):
        now += 0.05
        op = data.draw(st.sampled_from(["plain", "plain", "group", "cancel", "release", "edge"]))
        holder = data.draw(st.sampled_from(holders))
        rid = f"r{step}"
        events: list[Any] = []
        if op == "plain":
            target: object = data.draw(st.sampled_from(["auto", "cluster", "group"]))
            if target == "group":
                if not ledger.groups:
                    continue
                gid = data.draw(st.sampled_from(sorted(ledger.groups)))
                idx = data.draw(st.none() | st.integers(0, ledger.groups[gid] - 1))
                target = GroupTarget(gid, idx)
            ledger.waiting[rid] = (holder, 1)
            try:
                events = b.request(rid, holder, data.draw(amounts), placement=target, now=now)
            except InfeasibleResourceError:
                del ledger.waiting[rid]
        elif op == "group":
            bundles = data.draw(st.lists(nonzero, min_size=1, max_size=3))
            strategy = data.draw(
                st.sampled_from(["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"])
            )
            ledger.waiting[rid] = (holder, len(bundles))
            try:
                events = b.request(rid, holder, bundles=bundles, strategy=strategy, now=now)
            except InfeasibleResourceError:
                del ledger.waiting[rid]
        elif op == "cancel":
            known = sorted(set(ledger.waiting) | set(ledger.grants))
            if not known:
                continue
            victim = data.draw(st.sampled_from(known))
            if victim in ledger.waiting:
                del ledger.waiting[victim]
            elif ledger.grants[victim].group is not None:
                ledger._drop_group(victim)
                ledger.grants.pop(victim, None)
            else:
                del ledger.grants[victim]
            events = b.cancel(victim, now=now)
        elif op == "release":
            events_before = b.release(holder, now=now)
            ledger.drop_holder(holder)
            events = events_before
        else:
            waiting = sorted(ledger.waiting)
            if waiting:
                b.blocked(holder, on_request=data.draw(st.sampled_from(waiting)), now=now)
            events = b.poll(now + 1.0)
        ledger.apply(events)
        check_invariants(b, ledger, holders)
    for h in holders:
        ledger.apply(b.release(h))
        ledger.drop_holder(h)
    assert b.available() == b.total()
    assert all(node.is_idle() for node in b.nodes)
    assert b.waiting_count == 0 and not ledger.waiting


# -- the deadlock oracle -----------------------------------------------------------------------


class Oracle:
    """Brute force over subsets of holders; shares no code with the broker."""

    def __init__(
        self,
        b: Broker,
        holders: list[str],
        waiting: dict[str, tuple[str, dict[str, float]]],
        order: list[str],
        edges: dict[str, tuple[set[str], set[str]]],
    ) -> None:
        self.holders = holders
        self.waiting = waiting  # rid -> (holder, resources)
        self.order = order  # request ids, oldest first
        self.edges = edges  # holder -> (request ids, holder ids)
        self.cap = {
            n: {k: _units(v) for k, v in s.items() if k != "GPU"} for n, s in NODE_SPECS.items()
        }
        self.devices = {
            n: [str(i) for i in range(int(s.get("GPU", 0)))] for n, s in NODE_SPECS.items()
        }
        self.held: dict[str, list[tuple[str, dict[str, int], dict[str, int]]]] = {}
        for h in holders:
            rows = []
            for g in b.grants_of(h):
                for p in g.placements:
                    other = {k: v for k, v in p.resources.items_units() if k != "GPU"}
                    gpus = {d: _units(f) for d, f in p.gpus}
                    rows.append((str(p.node_id), other, gpus))
            self.held[h] = rows

    def free_after(
        self, finished: frozenset[str]
    ) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
        free = {n: (dict(c), dict.fromkeys(self.devices[n], U)) for n, c in self.cap.items()}
        for h in self.holders:
            if h in finished:
                continue
            for node, other, gpus in self.held[h]:
                for k, v in other.items():
                    free[node][0][k] -= v
                for d, v in gpus.items():
                    free[node][1][d] -= v
        return free

    @staticmethod
    def fits(res: dict[str, float], free: dict[str, tuple[dict[str, int], dict[str, int]]]) -> bool:
        need = {k: _units(v) for k, v in res.items() if v}
        g = need.pop("GPU", 0)
        for other, devs in free.values():
            if any(other.get(k, 0) < v for k, v in need.items()):
                continue
            if g == 0:
                return True
            if g < U and any(f >= g for f in devs.values()):
                return True
            if g >= U and sum(1 for f in devs.values() if f == U) >= g // U:
                return True
        return False

    def blocked(self, h: str) -> bool:
        reqs, hs = self.edges.get(h, (set(), set()))
        return bool(reqs or hs)

    def can_finish(self, h: str, finished: frozenset[str]) -> bool:
        reqs, hs = self.edges.get(h, (set(), set()))
        free = self.free_after(finished)
        for x in hs:
            if x not in finished and self.blocked(x):
                return False
        return all(r not in self.waiting or self.fits(self.waiting[r][1], free) for r in reqs)

    def closure(self, start: frozenset[str]) -> frozenset[str]:
        """The union of every set of finished holders reachable from ``start``."""
        seen = {start}
        frontier = [start]
        while frontier:
            s = frontier.pop()
            for h in self.holders:
                if h not in s and self.can_finish(h, s):
                    t = s | {h}
                    if t not in seen:
                        seen.add(t)
                        frontier.append(t)
        return frozenset().union(*seen)

    def victim(self) -> str | None:
        done = self.closure(frozenset())
        stuck = [h for h in self.holders if h not in done]
        if not stuck:
            return None
        cands = [r for r in reversed(self.order) if r in self.waiting
                 and any(r in self.edges.get(h, (set(), set()))[0] for h in stuck)]  # fmt: skip
        if not cands:
            return None
        for r in cands:
            waiters = {h for h in stuck if r in self.edges.get(h, (set(), set()))[0]}
            rest = set(stuck) - waiters
            if not rest or self.closure(done | waiters) & rest:
                return r
        return cands[0]


@settings(
    max_examples=250, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip
@given(st.data())
def test_deadlock_reduction_and_victim_match_the_oracle(data: st.DataObject) -> None:
    b = _new_broker(reservation_depth=data.draw(st.sampled_from([0, 2])), stall_after=1e9)
    holders = [f"H{i}" for i in range(data.draw(st.integers(2, 4)))]
    waiting: dict[str, tuple[str, dict[str, float]]] = {}
    order: list[str] = []
    for i in range(data.draw(st.integers(2, 8))):
        h = data.draw(st.sampled_from(holders))
        res = data.draw(amounts)
        rid = f"r{i}"
        try:
            events = b.request(rid, h, res, now=0.0)
        except InfeasibleResourceError:
            continue
        order.append(rid)
        if not events:
            waiting[rid] = (h, res)
    edges: dict[str, tuple[set[str], set[str]]] = {}
    for h in holders:
        kind = data.draw(st.sampled_from(["none", "request", "request", "holder"]))
        if kind == "request" and waiting:
            r = data.draw(st.sampled_from(sorted(waiting)))
            b.blocked(h, on_request=r, now=1.0)
            edges.setdefault(h, (set(), set()))[0].add(r)
        elif kind == "holder":
            x = data.draw(st.sampled_from([o for o in holders if o != h]))
            b.blocked(h, on_holder=x, now=1.0)
            edges.setdefault(h, (set(), set()))[1].add(x)
    expected = Oracle(b, holders, waiting, order, edges).victim()
    event("deadlock" if expected is not None else "no deadlock")
    events = b.poll(2.0)
    failed = [e for e in events if isinstance(e, Failed)]
    if expected is None:
        assert failed == []
    else:
        assert [f.request_id for f in failed] == [expected]
        assert isinstance(failed[0].error, ResourceDeadlockError)


def test_oracle_sanity() -> None:
    # two holders each waiting for what the other holds
    b = _new_broker()
    b.request("a", "A", {"CPU": 2, "x": 1})
    b.request("c", "C", {"CPU": 1.5})
    b.request("aw", "A", {"CPU": 1})
    b.request("cw", "C", {"x": 1})
    edges = {"A": ({"aw"}, set[str]()), "C": ({"cw"}, set[str]())}
    waiting = {"aw": ("A", {"CPU": 1.0}), "cw": ("C", {"x": 1.0})}
    oracle = Oracle(b, ["A", "C"], waiting, ["a", "c", "aw", "cw"], edges)
    assert oracle.victim() == "cw"
    assert list(combinations("ab", 2)) == [("a", "b")]
