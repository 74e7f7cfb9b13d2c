"""Placement groups from the driver, and broker decisions at scale (docs/benchmarks.md).

    python -m benchmarks.broker [--check] [--reps R] [--quick]

1. Reserve + release of a placement group of two ``{"CPU": 1}`` bundles from the driver
   program, end to end through the public API (``actorrt.placement_group``, ``ready()``,
   ``remove()``) on a 4-CPU runtime: target >= 20,000 per second (Ray 2.60: 2 per second).
2. One scheduling decision with 10,000 waiting requests over 1,000 simulated full nodes: a
   holder ends (its CPU goes to the oldest waiting request), a new request joins the queue
   with a wait edge on it. Reported as decisions per second: target >= 1,000 (about a
   millisecond per decision; this module's own target, not a project one).
3. The deadlock check over that state (every waiter blocked on its request), run through
   ``poll`` once it is due: milliseconds per check, report only. The runtime runs it only
   after 100-250 ms without a grant, so it is not part of every decision.

The simulated broker is built once per run (a queue of 10,000 on 1,000 nodes takes seconds
to build); each repetition measures a block of decisions and one check on it.
"""

from __future__ import annotations

import argparse
import time

import actorrt

from ._common import Figure, exit_for, report
from .broker_sim import DecisionBench

RAY_PG_PER_S = 2.0


async def pg_rate(
    n: int, bundles: list[dict[str, float]], strategy: str = "PACK", warmup: int = 100
) -> float:
    """Placement groups of ``bundles`` reserved (``ready()``) and released (``remove()``)
    per second, one after another, on the running runtime (after ``warmup`` not counted)."""
    for counted in (False, True):
        start = time.perf_counter()
        for _ in range(n if counted else warmup):
            pg = actorrt.placement_group(bundles, strategy=strategy)
            await pg.ready()
            await pg.remove()
    return n / (time.perf_counter() - start)


def pg_cycles(n: int) -> float:
    """Placement groups of 2 x {"CPU": 1} reserved and released per second, from the driver."""

    async def cycles() -> float:
        rate = await pg_rate(n, [{"CPU": 1}, {"CPU": 1}])
        assert actorrt.available_resources()["CPU"] == 4
        return rate

    rate: float = actorrt.run(cycles, num_cpus=4)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--reps", type=int, default=3, help="samples per figure")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    args = parser.parse_args()
    cycles, nodes, pending, steps = (200, 50, 500, 50) if args.quick else (5_000, 1_000,
                                                                          10_000, 200)
    pg_rates, decision_rates, check_ms = [], [], []
    bench = DecisionBench(nodes, pending)
    for _ in range(args.reps):
        pg_rates.append(pg_cycles(cycles))
        decision_rates.append(bench.decisions_per_s(steps))
        check_ms.append(bench.check_ms())
    figures = [
        Figure("placement group reserve+release", "per s", pg_rates, target_value=20_000),
        Figure(f"decisions, {pending:,} waiting on {nodes:,} nodes", "per s", decision_rates,
               target_value=1_000),
        Figure(f"deadlock check, {pending:,} waiting on {nodes:,} nodes", "ms", check_ms,
               lower_is_better=True),
    ]
    ok = report("benchmarks.broker: placement groups and broker decisions", figures, "broker",
                {"loop": "uvloop", "ray_pg_per_s": RAY_PG_PER_S, "nodes": nodes,
                 "pending": pending, "pg_cycles": cycles, "decisions_per_sample": steps})
    rate = figures[0].value
    print(f"Ray 2.60 reserved+released {RAY_PG_PER_S:.0f} placement groups per second on this "
          f"machine class (docs/benchmarks.md); actorrt: {rate:,.0f} ({rate / RAY_PG_PER_S:,.0f}x)")
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
