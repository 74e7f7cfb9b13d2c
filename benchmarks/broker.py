"""Placement groups from the driver, and broker decisions at scale (DESIGN.md §8).

    python -m benchmarks.broker [--check] [--reps R] [--quick]

1. Reserve + release of a placement group of two ``{"CPU": 1}`` bundles from the driver
   program, end to end through the public API (``actorrt.placement_group``, ``ready()``,
   ``remove()``) on a 4-CPU runtime: target >= 20,000 per second (Ray 2.60: 2 per second).
2. One scheduling decision with 10,000 waiting requests over 1,000 simulated nodes, with the
   deadlock check on: a holder ends (its CPUs go to the oldest waiting request), a new request
   joins the queue, and the broker's timer runs the deadlock reduction over all wait edges.
   Reported as decisions per second: target >= 1,000 (about a millisecond per decision).
"""

from __future__ import annotations

import argparse
import time

import actorrt
from actorrt.resources import Broker, NodeInventory, Resources

from ._common import Figure, exit_for, report

RAY_PG_PER_S = 2.0


def pg_cycles(n: int) -> float:
    async def main() -> float:
        bundles = [{"CPU": 1}, {"CPU": 1}]
        for _ in range(100):  # warm up
            pg = actorrt.placement_group(bundles)
            await pg.ready()
            await pg.remove()
        start = time.perf_counter()
        for _ in range(n):
            pg = actorrt.placement_group(bundles)
            await pg.ready()
            await pg.remove()
        rate = n / (time.perf_counter() - start)
        assert actorrt.available_resources()["CPU"] == 4
        return rate

    return actorrt.run(main, num_cpus=4)


def decisions(nodes: int, pending: int, n: int) -> float:
    """Decisions per second with ``pending`` waiting requests over ``nodes`` full nodes."""
    broker = Broker([NodeInventory(f"n{i}", Resources({"CPU": 4})) for i in range(nodes)])
    now = 0.0
    one = Resources({"CPU": 1})
    holders = []
    for i in range(nodes * 4):  # fill every CPU, one holder each
        broker.request(f"g{i}", f"h{i}", one, placement="cluster", now=now)
        holders.append(f"h{i}")
    for i in range(pending):  # then a queue; its requesters wait on it (wait edges)
        broker.request(f"w{i}", f"q{i}", one, placement="cluster", now=now)
        broker.blocked(f"waiter{i}", on_request=f"w{i}", now=now)
    start = time.perf_counter()
    for i in range(n):
        now += 0.2  # past the deadlock delay, so every poll runs the check
        broker.release(holders[i], now=now)
        broker.request(f"x{i}", f"y{i}", one, placement="cluster", now=now)
        broker.poll(now)
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--reps", type=int, default=3, help="samples per figure")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    args = parser.parse_args()
    sizes = (200, 50, 500, 50) if args.quick else (5_000, 1_000, 10_000, 200)
    cycles, nodes, pending, steps = sizes
    pg_rates, decision_rates = [], []
    for _ in range(args.reps):
        pg_rates.append(pg_cycles(cycles))
        decision_rates.append(decisions(nodes, pending, steps))
    figures = [
        Figure("placement group reserve+release", "per s", pg_rates, target_value=20_000),
        Figure(f"decisions, {pending:,} waiting on {nodes:,} nodes", "per s", decision_rates,
               target_value=1_000),
    ]
    ok = report("benchmarks.broker: placement groups and broker decisions", figures, "broker",
                {"loop": "uvloop", "ray_pg_per_s": RAY_PG_PER_S, "nodes": nodes,
                 "pending": pending})
    print(f"Ray 2.60 reserved+released {RAY_PG_PER_S:.0f} placement groups per second here; "
          f"actorrt: {pg_rates and sorted(pg_rates)[len(pg_rates) // 2]:,.0f} "
          f"({sorted(pg_rates)[len(pg_rates) // 2] / RAY_PG_PER_S:,.0f}x)")
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
