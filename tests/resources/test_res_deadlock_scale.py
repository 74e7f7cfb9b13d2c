"""The deadlock check at scale: right at 1,000 and 10,000 waiters, near-linear in work, and in
slices small enough that the loop driving the broker keeps serving (docs/broker.md).

Work is counted in slices (each a bounded amount of work), which is deterministic: a check
that were quadratic would need about 100 times the slices at ten times the waiters. The time
bounds are generous (a shared, loaded machine); ``benchmarks/deadlock.py --check`` holds the
real targets (a slice under 10 ms of CPU, a report within 1 s, at 10,000 waiters).
"""

from __future__ import annotations

import time

import pytest

from actorrt.resources import AskDeadlocked, Broker, Event, Failed, NodeInventory
from benchmarks.deadlock import chain, modin, ring


def draining(n: int) -> Broker:
    """Many waiters and no deadlock: the holders of every CPU are not blocked."""
    b = Broker([NodeInventory("n", {"CPU": n})])
    for i in range(n):
        b.request(f"h{i}", f"H{i}", {"CPU": 1}, now=0.0)
    for i in range(n):
        b.request(f"w{i}", f"W{i}", {"CPU": 1}, parent=f"P{i}", now=0.5)
        b.blocked(f"P{i}", on_request=f"w{i}", now=1.0)
        if i:
            b.blocked(f"P{i}", on_holder=f"P{i - 1}", now=1.0)
    return b


def run_check(b: Broker) -> tuple[list[Event], int, float]:
    """(events, slices, longest slice in CPU seconds), polling as the runtime does."""
    events: list[Event] = []
    slices = 0
    worst = 0.0
    now = 2.0
    while True:
        start = time.thread_time()
        events += b.poll(now)
        worst = max(worst, time.thread_time() - start)
        slices += 1
        due = b.next_poll_at()
        if events or due is None or due > now:
            return events, slices, worst


@pytest.mark.parametrize("shape", [modin, chain, ring, draining])
def test_the_check_is_right_and_near_linear_at_1000_and_10000_waiters(shape: object) -> None:
    make = shape  # type: ignore[assignment]
    results = {n: run_check(make(n)) for n in (1_000, 10_000)}  # type: ignore[operator]
    for n, (events, _slices, worst) in results.items():
        if make is draining:
            assert events == [], f"no deadlock at {n}: every CPU's holder ends"
        elif make is ring:
            (found,) = events
            assert isinstance(found, AskDeadlocked) and "ask deadlock" in str(found.error)
            assert f"{n - 2 * 6} more" in str(found.error)  # long cycles are abridged
        else:
            (found,) = events
            assert isinstance(found, Failed)
            assert found.request_id == ("more" if make is chain else f"w{n - 1}")
            assert len(str(found.error)) < 2000, "the message stays readable at any size"
        assert worst < 0.25, f"a slice took {worst * 1000:.0f} ms of CPU at {n} waiters"
    small, large = results[1_000][1], results[10_000][1]
    assert large <= 15 * small + 5, f"{small} slices at 1,000, {large} at 10,000: not linear"
