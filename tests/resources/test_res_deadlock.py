"""Deadlock detection, its timing, victim and message; stall reports; next_poll_at."""

from __future__ import annotations

import pytest

from actorrt.resources import (
    Broker,
    Failed,
    Granted,
    GroupTarget,
    NodeInventory,
    ResourceDeadlockError,
    Stalled,
)


def _trials(b: Broker, n: int) -> None:
    """n trials, each reserving a one-CPU group and running its driver in bundle 0."""
    for i in range(n):
        b.request(f"g{i}", f"T{i}", bundles=[{"CPU": 1}], now=0.0)
        b.request(f"d{i}", f"T{i}", {"CPU": 1}, placement=GroupTarget(f"g{i}", 0), now=0.0)


def test_modin_style_deadlock_is_reported_with_the_fix() -> None:
    b = Broker([NodeInventory("n", {"CPU": 4})])
    _trials(b, 4)
    for i in range(4):
        # each trial driver spawns a worker outside its group and waits for it
        assert b.request(f"w{i}", f"W{i}", {"CPU": 1}, parent=f"T{i}", placement="cluster") == []
        b.blocked(f"T{i}", on_request=f"w{i}", now=1.0 + i * 0.01)
    due = b.next_poll_at()
    assert due == pytest.approx(1.0 + 0.15)  # from the first edge not yet checked
    assert b.poll(1.1) == []  # too early
    events = b.poll(due)
    (failed,) = events
    assert isinstance(failed, Failed) and failed.request_id == "w3"
    err = failed.error
    assert isinstance(err, ResourceDeadlockError)
    msg = str(err)
    assert msg.startswith("resource deadlock: T3 holds placement group 'g3' [{CPU: 1}]")
    assert "waits for request 'w3' for {CPU: 1} from the cluster" in msg
    assert "T0 holds placement group 'g0'" in msg and "waits for request 'w0'" in msg
    # The broker knows no Tune: the generic fix (the actor layer words it for trials).
    assert "placement_group=[its own bundle] + [one bundle per worker]" in msg
    assert "PlacementGroupFactory" not in msg
    # the failed request's waiter is unblocked: no second victim while T3 still holds
    assert not b.is_waiting("w3")
    assert b.poll(due + 1.0) == []
    # T3 ends; its CPU goes to the oldest waiting worker
    events = b.release("T3", now=due + 1.0)
    assert [e.request_id for e in events if isinstance(e, Granted)] == ["w0"]


def test_no_deadlock_when_a_holder_is_not_blocked() -> None:
    b = Broker([NodeInventory("n", {"CPU": 2})])
    _trials(b, 2)
    b.request("w0", "W0", {"CPU": 1}, parent="T0", placement="cluster")
    b.blocked("T0", on_request="w0", now=1.0)
    # T1 is not blocked: it is assumed to end, so T0 will get its CPU
    assert b.poll(5.0) == []
    assert b.next_poll_at() is not None  # the stall report is still ahead


def test_deadlock_through_an_ask_chain() -> None:
    b = Broker([NodeInventory("n", {"CPU": 2})])
    _trials(b, 2)
    b.request("w0", "W0", {"CPU": 1}, parent="T0", placement="cluster")
    b.blocked("T0", on_request="w0", now=1.0)
    b.blocked("T1", on_holder="T0", now=1.0)  # T1 asks T0, which is blocked
    (failed,) = b.poll(2.0)
    assert isinstance(failed, Failed) and failed.request_id == "w0"
    assert "T1 holds placement group 'g1'" in str(failed.error)
    assert "an answer from T0" in str(failed.error)


def test_self_deadlock_single_holder() -> None:
    b = Broker([NodeInventory("n", {"CPU": 2})])
    b.request("a", "A", {"CPU": 2}, now=0.0)
    b.request("more", "A", {"CPU": 1}, now=0.0)  # the same holder asks for more
    b.blocked("A", on_request="more", now=0.0)
    (failed,) = b.poll(1.0)
    assert isinstance(failed, Failed) and failed.request_id == "more"
    assert "it waits on itself" in str(failed.error)


def test_neither_grants_nor_new_edges_postpone_the_check() -> None:
    # Unrelated traffic (grants, other actors' asks) must not put the report off.
    b = Broker([NodeInventory("n", {"CPU": 4})], deadlock_delay=0.2)
    b.request("a", "A", {"CPU": 4}, now=0.0)
    b.request("r", "R", {"CPU": 1}, now=0.0)
    b.blocked("A", on_request="r", now=1.0)
    assert b.next_poll_at() == pytest.approx(1.2)
    t = 1.0
    for i in range(10):  # a stream of grants and short asks elsewhere
        t += 0.05
        b.request(f"x{i}", f"X{i}", {}, now=t)
        b.blocked(f"X{i}", on_holder="Y", now=t)
        b.unblocked(f"X{i}", on_holder="Y", now=t)
        assert b.next_poll_at() == pytest.approx(1.2)
        if t >= 1.2:
            break
    (failed,) = b.poll(1.2)
    assert isinstance(failed, Failed) and failed.request_id == "r"


def test_unblocked_and_released_edges_clear() -> None:
    b = Broker([NodeInventory("n", {"CPU": 1})])
    b.request("a", "A", {"CPU": 1}, now=0.0)
    b.request("r", "A", {"CPU": 1}, now=0.0)
    b.blocked("A", on_request="r", now=0.0)
    b.unblocked("A", on_request="r")
    assert b.poll(1.0) == []
    b.blocked("A", on_request="r", now=2.0)
    b.unblocked("A")
    assert b.poll(3.0) == []
    with pytest.raises(TypeError, match="exactly one"):
        b.blocked("A")
    with pytest.raises(ValueError, match="itself"):
        b.blocked("A", on_holder="A")
    b.blocked("A", on_request="not-a-request")  # ignored: nothing to wait on


def test_two_independent_deadlocks_are_both_reported() -> None:
    b = Broker([NodeInventory("n", {"CPU": 2, "x": 2})])
    for name, res in (("A", "CPU"), ("B", "x")):
        b.request(f"{name}1", f"{name}1", {res: 1}, now=0.0)
        b.request(f"{name}2", f"{name}2", {res: 1}, now=0.0)
        b.request(f"{name}1w", f"{name}1w", {res: 1}, now=0.0)
        b.request(f"{name}2w", f"{name}2w", {res: 1}, now=0.0)
        b.blocked(f"{name}1", on_request=f"{name}1w", now=0.0)
        b.blocked(f"{name}2", on_request=f"{name}2w", now=0.0)
    first = b.poll(1.0)
    assert [e.request_id for e in first if isinstance(e, Failed)] == ["B2w"]
    due = b.next_poll_at()
    assert due == pytest.approx(1.15)
    second = b.poll(due)
    assert [e.request_id for e in second if isinstance(e, Failed)] == ["A2w"]


def test_victim_is_newest_whose_release_helps() -> None:
    # B waits for a GPU that only A holds; A waits for a CPU that only C holds; C waits on
    # a huge CPU request. Failing C's request (newest) lets C end, and then A and B proceed.
    b = Broker([NodeInventory("n", {"CPU": 2, "GPU": 1})])
    b.request("a", "A", {"GPU": 1}, now=0.0)
    b.request("c", "C", {"CPU": 2}, now=0.0)
    b.request("b_wants", "B", {"GPU": 1}, now=0.0)
    b.request("a_wants", "A", {"CPU": 1}, now=0.0)
    b.request("x", "X", {"CPU": 1}, now=0.0)  # newest, but nobody waits on it
    b.request("c_wants", "C", {"CPU": 1}, now=0.0)
    for h, r in (("B", "b_wants"), ("A", "a_wants"), ("C", "c_wants")):
        b.blocked(h, on_request=r, now=0.0)
    (failed,) = b.poll(1.0)
    assert isinstance(failed, Failed) and failed.request_id == "c_wants"


def test_stalled_is_reported_once_per_period() -> None:
    b = Broker([NodeInventory("n", {"CPU": 1})], stall_after=10.0)
    b.request("a", "A", {"CPU": 1}, now=0.0)
    b.request("r", "R", {"CPU": 1}, now=2.0)
    assert b.next_poll_at() == pytest.approx(12.0)
    assert b.poll(11.0) == []
    (s,) = b.poll(12.0)
    assert isinstance(s, Stalled) and s.request_id == "r" and "held by A" in s.reason
    assert "no grant in its queue for 12.0 s" in s.reason  # nobody awaits it: queueing
    assert b.next_poll_at() is None and b.poll(30.0) == []
    assert b.pending(now=30.0)[0].stalled
    # progress restarts the clock
    b.request("z", "Z", {}, now=31.0)
    assert b.next_poll_at() == pytest.approx(41.0)


def test_group_queue_stall() -> None:
    b = Broker([NodeInventory("n", {"CPU": 2})], stall_after=5.0)
    b.request("g", "T", bundles=[{"CPU": 1}], now=0.0)
    b.request("a", "A", {"CPU": 1}, placement=GroupTarget("g"), now=0.0)
    b.request("b", "B", {"CPU": 1}, placement=GroupTarget("g"), now=1.0)
    assert b.next_poll_at() == pytest.approx(6.0)
    (s,) = b.poll(6.0)
    assert isinstance(s, Stalled) and s.request_id == "b" and "held by A" in s.reason


def test_deadlock_inside_a_group() -> None:
    b = Broker([NodeInventory("n", {"CPU": 4})])
    b.request("g", "T", bundles=[{"CPU": 1}, {"CPU": 1}], now=0.0)
    b.request("d", "T", {"CPU": 1}, placement=GroupTarget("g", 0), now=0.0)
    b.request("w1", "W1", {"CPU": 1}, parent="T", now=0.0)  # takes bundle 1
    b.request("w2", "W2", {"CPU": 1}, parent="T", now=0.0)  # waits for a sibling
    b.blocked("T", on_request="w2", now=0.0)
    assert b.poll(1.0) == []  # W1 is not blocked: it will end
    b.blocked("W1", on_holder="T", now=1.0)  # but it waits on T: now nobody can move
    (failed,) = b.poll(2.0)
    assert isinstance(failed, Failed) and failed.request_id == "w2"
    assert "in any bundle of group 'g'" in str(failed.error)


def test_an_ask_cycle_fails_its_newest_ask() -> None:
    from actorrt.resources import AskDeadlocked

    b = Broker([NodeInventory("n", {"CPU": 1})])
    b.blocked("A", on_holder="B", now=1.0)
    b.blocked("B", on_holder="C", now=1.1)
    b.blocked("C", on_holder="A", now=1.2)  # closes the cycle
    b.blocked("D", on_holder="A", now=1.2)  # waits on the cycle, is not in it
    (found,) = b.check_now(2.0)
    assert isinstance(found, AskDeadlocked) and (found.waiter, found.target) == ("C", "A")
    assert "A -> B -> C -> A" in str(found.error) or "B -> C -> A -> B" in str(found.error)
    # The failed edge is gone: nothing more to report until the actors wait again.
    assert b.check_now(3.0) == []


def test_a_cycle_through_an_actor_that_serves_concurrently_is_not_reported() -> None:
    b = Broker([NodeInventory("n", {"CPU": 1})])
    b.blocked("A", on_holder="B", now=1.0)
    b.blocked("B", on_holder="A", serial=False, now=1.0)  # B may answer A meanwhile
    assert b.check_now(2.0) == []
