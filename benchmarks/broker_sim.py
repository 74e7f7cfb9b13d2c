"""Broker decision cost at scale: pure broker time, no actors, no processes, no event loop.

    python -m benchmarks.broker_sim [--check] [--quick] [--reps R] [--build-budget S]

Measures, in one run, on simulated nodes (``actorrt.resources.Broker`` driven by events):

1. reserve + release of a 2 x ``{"CPU": 1}`` placement group on one node (the per-spawn cost
   the actor layer pays; the project target is >= 20,000/s end to end, so the broker alone must
   be well above it), with pre-parsed bundles and with plain dicts;
2. request + release of one ``{"CPU": 1}`` actor and of a 2-bundle group against 1 ... 1,000
   nodes, on an idle cluster and on one where every node but the last is full (first-fit's
   worst case);
3. the decision grid: 1 ... 1,000 full 4-CPU nodes x 100 ... 100,000 waiting 1-CPU requests,
   each with a blocked waiter (a wait edge): microseconds per decision (a holder ends, its
   CPU goes to the oldest waiting request, a new request joins), milliseconds per deadlock
   check over that state, and microseconds per request while the queue was built. A queue
   whose building would take longer than ``--build-budget`` seconds (estimated from the
   previous size) is skipped and listed as such, so the run stays bounded.

Prints tables, writes ``RESULTS/broker_sim.json`` (figures for 1, curves for 2 and 3) stamped
with the commit, and with ``--check`` exits 1 when pure reserve+release is under 20,000/s.
"""

from __future__ import annotations

import argparse
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

from actorrt.resources import Broker, Granted, NodeInventory, Resources

from ._common import Figure, exit_for, number, report

TARGET_RESERVE_RELEASE_PER_S = 20_000
ONE = Resources({"CPU": 1})
SIZES: dict[str, dict[str, Any]] = {
    "default": {"ops": 20_000, "nodes": (1, 10, 100, 1_000),
                "pending": (100, 1_000, 10_000, 100_000), "budget": 60.0},
    "quick": {"ops": 2_000, "nodes": (1, 10, 100), "pending": (100, 1_000), "budget": 1.0},
}


class DecisionBench:
    """A broker with ``nodes`` full 4-CPU nodes and a queue of waiting 1-CPU requests, each
    with a blocked waiter (a wait edge); every decision keeps the queue at its length."""

    def __init__(self, nodes: int, pending: int = 0) -> None:
        self.broker = Broker([NodeInventory(f"n{i}", Resources({"CPU": 4})) for i in range(nodes)])
        self.now = 0.0
        self.running: deque[Hashable] = deque()
        self.waiting = 0
        self._next = 0
        for i in range(nodes * 4):  # fill every CPU, one holder each
            self.broker.request(("g", i), ("h", i), ONE, placement="cluster", now=self.now)
            self.running.append(("h", i))
        self.grow(pending)

    def enqueue(self) -> None:
        k = self._next
        self._next += 1
        self.broker.request(("w", k), ("q", k), ONE, placement="cluster", now=self.now)
        self.broker.blocked(("waiter", k), on_request=("w", k), now=self.now)

    def grow(self, pending: int) -> float:
        """Queue requests until ``pending`` wait; returns seconds per request queued."""
        need = pending - self.waiting
        if need <= 0:
            return 0.0
        start = time.perf_counter()
        for _ in range(need):
            self.enqueue()
        self.waiting = pending
        return (time.perf_counter() - start) / need

    def decide(self) -> None:
        """The oldest running holder ends; its CPU goes to the oldest waiting request, whose
        holder runs from then on; a new request joins the queue."""
        self.now += 0.001
        for event in self.broker.release(self.running.popleft(), now=self.now):
            if isinstance(event, Granted):
                self.running.append(event.holder)
        self.enqueue()
        self.broker.poll(self.now)  # not due yet: a grant just happened

    def decisions_per_s(self, n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            self.decide()
        return n / (time.perf_counter() - start)

    def seconds_per_decision(self, budget_s: float, most: int = 200, least: int = 5) -> float:
        """Decisions until ``budget_s`` has passed (at least ``least``, at most ``most``)."""
        start = time.perf_counter()
        done = 0
        while done < most and (done < least or time.perf_counter() - start < budget_s):
            self.decide()
            done += 1
        return (time.perf_counter() - start) / done

    def check_ms(self) -> float:
        """One deadlock check over the current state, made due by waiting past its delay."""
        self.decide()
        self.now += 0.3
        start = time.perf_counter()
        events = self.broker.poll(self.now)
        elapsed = time.perf_counter() - start
        assert not events, events  # every waiter's request is granted once holders end
        return elapsed * 1000


def _timed(n: int, setup: Callable[[], Callable[[int], None]]) -> float:
    """Seconds per op over one run of ``n`` ops."""
    op = setup()
    start = time.perf_counter()
    for i in range(n):
        op(i)
    return (time.perf_counter() - start) / n


def reserve_release(n: int, *, parsed: bool) -> float:
    bundles: list[Any] = [ONE] * 2 if parsed else [{"CPU": 1}] * 2

    def setup() -> Callable[[int], None]:
        b = Broker([NodeInventory("n0", {"CPU": 4})])

        def op(i: int) -> None:
            b.request(i, "driver", bundles=bundles, placement="cluster")
            b.release("driver")

        return op

    return _timed(n, setup)


def request_release_vs_nodes(nodes: int, n: int, *, group: bool, busy: bool) -> float:
    pair = [ONE, ONE]

    def setup() -> Callable[[int], None]:
        b = Broker([NodeInventory(f"n{i}", {"CPU": 8}) for i in range(nodes)])
        if busy:
            for i in range(nodes - 1):
                b.request(f"fill{i}", f"fill{i}", {"CPU": 8}, placement="cluster")

        def op(i: int) -> None:
            if group:
                b.request(i, "h", bundles=pair, placement="cluster")
            else:
                b.request(i, "h", ONE, placement="cluster")
            b.release("h")

        return op

    return _timed(n, setup)


NODE_CASES = (
    ("actor, idle cluster", False, False),
    ("actor, all but last node full", False, True),
    ("2-bundle group, idle cluster", True, False),
    ("2-bundle group, all but last node full", True, True),
)


def nodes_curve(node_counts: tuple[int, ...], ops: int) -> dict[str, Any]:
    series: dict[str, list[float]] = {}
    for label, group, busy in NODE_CASES:
        series[label] = [
            request_release_vs_nodes(nodes, max(100, ops // (10 if nodes >= 1000 else 5)),
                                     group=group, busy=busy) * 1e6
            for nodes in node_counts
        ]
    return {"x": list(node_counts), "x_label": "nodes", "unit": "us per request+release",
            "series": series}


def decision_grid(node_counts: tuple[int, ...], pendings: tuple[int, ...],
                  budget_s: float) -> dict[str, Any]:
    """The decision, deadlock-check and enqueue curves over waiting requests, per node count."""
    decision: dict[str, list[float | None]] = {}
    check: dict[str, list[float | None]] = {}
    enqueue: dict[str, list[float | None]] = {}
    skipped: list[dict[str, Any]] = []
    for nodes in node_counts:
        key = f"{nodes:,} node" + ("s" if nodes > 1 else "")
        bench = DecisionBench(nodes)
        per_request = 0.0
        rows: list[tuple[float | None, float | None, float | None]] = []
        for pending in pendings:
            estimate = per_request * (pending - bench.waiting)
            if rows and estimate > budget_s:
                skipped.append({"nodes": nodes, "pending": pending,
                                "estimated_build_s": round(estimate, 1)})
                rows.append((None, None, None))
                continue
            per_request = bench.grow(pending)
            per_decision = bench.seconds_per_decision(0.3)
            checks = [bench.check_ms()]
            while sum(checks) < 500 and len(checks) < 5:
                checks.append(bench.check_ms())
            rows.append((per_decision * 1e6, min(checks), per_request * 1e6))
            print(f"  {key:>12} {pending:>7,} waiting: decision "
                  f"{per_decision * 1e6:>8,.0f} us, deadlock check {min(checks):>9,.1f} ms, "
                  f"enqueue {per_request * 1e6:>6,.0f} us", flush=True)
        decision[key] = [r[0] for r in rows]
        check[key] = [r[1] for r in rows]
        enqueue[key] = [r[2] for r in rows]
    x = list(pendings)
    return {
        "decision_vs_pending": {"x": x, "x_label": "waiting requests",
                                "unit": "us per decision", "series": decision},
        "deadlock_check_vs_pending": {"x": x, "x_label": "waiting requests",
                                      "unit": "ms per check", "series": check},
        "enqueue_vs_pending": {"x": x, "x_label": "waiting requests",
                               "unit": "us per request queued", "series": enqueue},
        "skipped": skipped,
        "build_budget_s": budget_s,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--reps", type=int, default=5, help="samples of reserve+release")
    parser.add_argument("--build-budget", type=float,
                        help="most seconds to spend building one queue size (default 60)")
    args = parser.parse_args(argv)
    sizes = dict(SIZES["quick" if args.quick else "default"])
    if args.build_budget is not None:
        sizes["budget"] = args.build_budget

    parsed: list[float] = []
    dicts: list[float] = []
    for _ in range(args.reps):
        parsed.append(1 / reserve_release(sizes["ops"], parsed=True))
        dicts.append(1 / reserve_release(sizes["ops"], parsed=False))
    print("request+release vs nodes ...", flush=True)
    curves: dict[str, Any] = {"request_release_vs_nodes": nodes_curve(sizes["nodes"],
                                                                      sizes["ops"])}
    print("decision grid ...", flush=True)
    curves |= decision_grid(sizes["nodes"], sizes["pending"], sizes["budget"])

    figures = [
        Figure("pure broker reserve+release, 2 x {CPU: 1}", "per s", parsed,
               target_value=TARGET_RESERVE_RELEASE_PER_S),
        Figure("pure broker reserve+release, dict bundles", "per s", dicts),
    ]
    grid = curves["decision_vs_pending"]
    for key, values in grid["series"].items():
        print(f"{key:>12}: " + ", ".join(
            f"{p:,} waiting {number(v)} us" for p, v in zip(grid["x"], values, strict=True)
            if v is not None))
    for item in curves["skipped"]:
        print(f"skipped: {item['pending']:,} waiting on {item['nodes']:,} nodes "
              f"(building the queue would take ~{item['estimated_build_s']} s)")
    ok = report("benchmarks.broker_sim: pure broker time", figures, "broker_sim",
                {"loop": "none", "quick": args.quick, "reps": args.reps, "curves": curves})
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
