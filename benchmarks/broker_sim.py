"""Broker decision cost: pure broker time, no actors, no processes, no event loop.

Measures, in one run:

1. reserve + release of a 2 x {"CPU": 1} placement group on one node (the per-spawn cost the
   actor layer pays; DESIGN.md §8 wants >= 20,000/s end to end, so the broker alone must be
   well above it), with pre-parsed bundles and with plain dicts;
2. one scheduling decision (a release that grants the oldest waiting request, plus a new request
   that queues) against 100 ... 100,000 waiting requests;
3. request + release of one {"CPU": 1} actor and of a 2-bundle group against 1 ... 1,000 nodes,
   on an idle cluster and on one where every node but the last is full (first-fit's worst case).

Prints a table, writes ``benchmarks/results/broker_sim.json`` stamped with the commit, and with
``--check`` exits non-zero when the reserve+release rate is below its target.

Run: ``python -m benchmarks.broker_sim [--check] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable

from actorrt.resources import Broker, NodeInventory, Resources

TARGET_RESERVE_RELEASE_PER_S = 20_000
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "broker_sim.json")


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        )
        return out.stdout.strip() or "uncommitted"
    except (OSError, subprocess.SubprocessError):
        return "uncommitted"


def _best_of(repeats: int, n: int, setup: Callable[[], Callable[[int], None]]) -> float:
    """Best seconds per op over ``repeats`` runs of ``n`` ops (the least disturbed run)."""
    best = float("inf")
    for _ in range(repeats):
        op = setup()
        start = time.perf_counter()
        for i in range(n):
            op(i)
        best = min(best, (time.perf_counter() - start) / n)
    return best


def reserve_release(n: int, repeats: int, *, parsed: bool) -> float:
    bundles: list[object] = [Resources({"CPU": 1})] * 2 if parsed else [{"CPU": 1}] * 2

    def setup() -> Callable[[int], None]:
        b = Broker([NodeInventory("n0", {"CPU": 4})])

        def op(i: int) -> None:
            b.request(i, "driver", bundles=bundles, placement="cluster")  # type: ignore[arg-type]
            b.release("driver")

        return op

    return _best_of(repeats, n, setup)


def decision_vs_pending(pending: int, n: int, repeats: int) -> float:
    one = Resources({"CPU": 1})
    two = Resources({"CPU": 2})

    def setup() -> Callable[[int], None]:
        b = Broker([NodeInventory("n0", {"CPU": 4})])
        running = [f"run{i}" for i in range(4)]
        for h in running:
            b.request(h, h, one)
        for i in range(pending):
            b.request(f"w{i}", f"w{i}", one if i % 2 else two)
        state = {"next": pending}

        def op(i: int) -> None:
            # the oldest running holder ends; whatever is granted becomes running; a new
            # request joins the queue, so the queue length stays the same
            events = b.release(running.pop(0))
            running.extend(str(e.holder) for e in events)
            k = state["next"]
            state["next"] = k + 1
            b.request(f"w{k}", f"w{k}", one if k % 2 else two)

        return op

    return _best_of(repeats, n, setup)


def decision_vs_nodes(nodes: int, n: int, repeats: int, *, group: bool, busy: bool) -> float:
    one = Resources({"CPU": 1})
    pair = [one, one]

    def setup() -> Callable[[int], None]:
        b = Broker([NodeInventory(f"n{i}", {"CPU": 8}) for i in range(nodes)])
        if busy:
            for i in range(nodes - 1):
                b.request(f"fill{i}", f"fill{i}", {"CPU": 8}, placement="cluster")

        def op(i: int) -> None:
            if group:
                b.request(i, "h", bundles=pair, placement="cluster")
            else:
                b.request(i, "h", one, placement="cluster")
            b.release("h")

        return op

    return _best_of(repeats, n, setup)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args(argv)
    scale = 0.2 if args.quick else 1.0
    repeats = 3 if args.quick else 5
    n = max(1000, int(20_000 * scale))

    per_op = reserve_release(n, repeats, parsed=True)
    per_op_dict = reserve_release(n, repeats, parsed=False)
    rate = 1.0 / per_op
    rows: list[tuple[str, str, float]] = [
        ("reserve+release 2 x {CPU: 1}, 1 node", "pre-parsed bundles", per_op),
        ("reserve+release 2 x {CPU: 1}, 1 node", "dict bundles", per_op_dict),
    ]
    pending_results = {}
    for pending in (100, 1_000, 10_000, 100_000):
        t = decision_vs_pending(pending, max(200, int(2000 * scale)), repeats)
        pending_results[pending] = t
        rows.append(("release+grant+enqueue", f"{pending:,} waiting", t))
    node_results: dict[str, dict[int, float]] = {}
    for label, group, busy in (
        ("actor, idle cluster", False, False),
        ("actor, all but last node full", False, True),
        ("2-bundle group, idle cluster", True, False),
        ("2-bundle group, all but last node full", True, True),
    ):
        node_results[label] = {}
        for nodes in (1, 10, 100, 1_000):
            ops = max(100, int((2000 if nodes < 1000 else 500) * scale))
            t = decision_vs_nodes(nodes, ops, repeats, group=group, busy=busy)
            node_results[label][nodes] = t
            rows.append((f"request+release, {label}", f"{nodes:,} nodes", t))

    print(f"{'measure':<55} {'case':<22} {'us/op':>9} {'ops/s':>10}")
    for name, case, t in rows:
        print(f"{name:<55} {case:<22} {t * 1e6:>9.2f} {1 / t:>10,.0f}")
    ok = rate >= TARGET_RESERVE_RELEASE_PER_S
    verdict = "ok" if ok else "MISSED"
    print(
        f"\nreserve+release: {rate:,.0f}/s of pure broker time "
        f"(target >= {TARGET_RESERVE_RELEASE_PER_S:,}/s): {verdict}"
    )

    result = {
        "benchmark": "broker_sim",
        "commit": _commit(),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "quick": args.quick,
        "reserve_release": {
            "us_per_op_parsed": per_op * 1e6,
            "us_per_op_dict": per_op_dict * 1e6,
            "per_s": rate,
            "target_per_s": TARGET_RESERVE_RELEASE_PER_S,
            "ok": ok,
        },
        "decision_vs_pending_us": {str(k): v * 1e6 for k, v in pending_results.items()},
        "decision_vs_nodes_us": {
            label: {str(k): v * 1e6 for k, v in by.items()} for label, by in node_results.items()
        },
    }
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {os.path.relpath(RESULTS)}")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
