"""actorrt.util.ActorPool: Ray's methods and their meaning, from sync and async code."""

import asyncio
import os
import signal

import pytest

import actorrt
from actorrt.util import ActorPool
from actorrt.util.actor_pool import ActorPool as RayPathPool


@actorrt.actor(process=True, max_concurrency=4)
class Doubler:
    """Doubles values; ``held(key)`` answers once ``release(key)`` came (test ordering)."""

    def __init__(self) -> None:
        self.events: dict[str, asyncio.Event] = {}

    def double(self, v: int) -> int:
        return 2 * v

    def pid(self, _v: object = None) -> int:
        return os.getpid()

    async def held(self, key: str) -> str:
        await self.events.setdefault(key, asyncio.Event()).wait()
        return key

    def release(self, key: str) -> None:
        self.events.setdefault(key, asyncio.Event()).set()

    def fail(self, v: int) -> int:
        raise ValueError(f"bad value {v}")


def test_the_ray_path_is_the_same_class() -> None:
    assert RayPathPool is ActorPool
    import actorrt as ray

    assert ray.util.ActorPool is ActorPool
    assert repr(ActorPool).startswith("<class 'actorrt.util.ActorPool")


def test_map_over_1000_items_keeps_order_and_uses_every_actor(facade) -> None:
    actors = [actorrt.get(Doubler.spawn()) for _ in range(3)]
    pool = ActorPool(actors)
    assert list(pool.map(lambda a, v: a.double(v), range(1000))) == [2 * v for v in range(1000)]
    assert sorted(pool.map_unordered(lambda a, v: a.double(v), range(100))) == [
        2 * v for v in range(100)
    ]
    pids = set(pool.map(lambda a, v: a.pid(v), range(30)))
    assert len(pids) == 3
    assert not pool.has_next() and pool.has_free()
    with pytest.raises(StopIteration, match="No more results"):
        pool.get_next()


def test_submit_get_next_and_the_busy_rules(facade) -> None:
    a1, a2 = actorrt.get(Doubler.spawn()), actorrt.get(Doubler.spawn())
    pool = ActorPool([a1])
    pool.submit(lambda a, v: a.held(v), "first")
    assert not pool.has_free() and pool.pop_idle() is None
    pool.submit(lambda a, v: a.double(v), 21)  # queued: the only actor is busy
    with pytest.raises(TimeoutError, match="Timed out waiting for result"):
        pool.get_next(timeout=0.05)
    assert pool.has_next()
    a1.release.tell("first")
    assert pool.get_next() == "first"
    assert pool.get_next(timeout=30) == 42
    assert not pool.has_next() and pool.has_free()
    with pytest.raises(ValueError, match="already belongs"):
        pool.push(a1)
    pool.push(a2)
    assert pool.pop_idle() in (a1, a2) and pool.pop_idle() in (a1, a2)
    assert pool.pop_idle() is None


def test_get_next_unordered_returns_what_came_first(facade) -> None:
    actor_a, actor_b = actorrt.get(Doubler.spawn()), actorrt.get(Doubler.spawn())
    pool = ActorPool([actor_a, actor_b])
    pool.submit(lambda a, v: a.held(v), "slow")
    pool.submit(lambda a, v: a.double(v), 5)
    assert pool.get_next_unordered(timeout=30) == 10
    with pytest.raises(TimeoutError):
        pool.get_next_unordered(timeout=0.05)
    for actor in (actor_a, actor_b):
        actor.release.tell("slow")
    assert pool.get_next_unordered() == "slow"


def test_ignore_if_timedout_skips_the_value(facade) -> None:
    actor = actorrt.get(Doubler.spawn())
    pool = ActorPool([actor])
    pool.submit(lambda a, v: a.held(v), "never read")
    pool.submit(lambda a, v: a.double(v), 4)
    with pytest.raises(TimeoutError, match="'never read' was skipped"):
        pool.get_next(timeout=0.05, ignore_if_timedout=True)
    actor.release.tell("never read")
    assert pool.get_next() == 8  # the skipped value's result is dropped when it comes
    assert not pool.has_next()


def test_errors_reach_the_reader_and_dead_actors_leave(facade) -> None:
    survivor, victim = [actorrt.get(Doubler.spawn()) for _ in range(2)]
    pool = ActorPool([survivor, victim])
    pool.submit(lambda a, v: a.fail(v), 7)
    with pytest.raises(ValueError, match="bad value 7"):
        pool.get_next()
    os.kill(actorrt.get(victim.pid()), signal.SIGKILL)
    actorrt.get(victim.wait_stopped())
    for v in range(6):  # 0 goes to the victim (idle last), 1 to the survivor, 2..5 wait
        pool.submit(lambda a, v: a.double(v), v)
    with pytest.raises(actorrt.ActorDiedError):
        pool.get_next()
    # map() drops the results not read yet (values 1..5), as Ray's does.
    assert list(pool.map(lambda a, v: a.double(v), [])) == []
    pool.submit(lambda a, v: a.pid(v), None)
    assert pool.get_next() == actorrt.get(survivor.pid())  # the victim takes no more
    assert pool.pop_idle() == survivor and pool.pop_idle() is None


def test_bad_inputs(facade) -> None:
    pool = ActorPool([actorrt.get(Doubler.spawn())])
    with pytest.raises(TypeError, match="must return the handle of an ask.*returned int: 3"):
        pool.submit(lambda a, v: v, 3)
    assert pool.has_free() and not pool.has_next()
    with pytest.raises(TypeError, match="takes fn"):
        pool.submit(3, 3)
    pool.submit(lambda a, v: a.double(v), 1)
    with pytest.raises(ValueError, match="got -1"):
        pool.get_next(timeout=-1)
    assert pool.get_next() == 2


async def test_async_use(actorrt_runtime) -> None:
    actors = [await Doubler.spawn() for _ in range(2)]
    pool = ActorPool(actors)
    got = [x async for x in pool.map(lambda a, v: a.double(v), range(50))]
    assert got == [2 * v for v in range(50)]
    pool.submit(lambda a, v: a.double(v), 3)
    pool.submit(lambda a, v: a.double(v), 4)
    assert await pool.get_next() == 6
    assert await pool.get_next_unordered(timeout=30) == 8
    with pytest.raises(RuntimeError, match="use `async for`"):
        next(iter(pool.map(lambda a, v: a.double(v), [1])))
    assert await pool.get_next() == 2
    pool.submit(lambda a, v: a.held(v), "k")
    with pytest.raises(TimeoutError):
        await pool.get_next(timeout=0.05)
    for actor in actors:
        await actor.release("k")
    assert sorted([x async for x in pool.map_unordered(lambda a, v: a.double(v), [1, 2])]) == [
        2, 4,
    ]


def test_max_in_flight_sends_ahead_to_each_actor(facade) -> None:
    actor = actorrt.get(Doubler.spawn())
    pool = ActorPool([actor], max_in_flight=2)
    pool.submit(lambda a, v: a.held(v), "one")
    assert pool.has_free()  # a second place
    pool.submit(lambda a, v: a.held(v), "two")
    assert not pool.has_free() and pool.pop_idle() is None
    pool.submit(lambda a, v: a.double(v), 5)  # queued
    actor.release.tell("two")
    assert pool.get_next_unordered(timeout=30) == "two"
    assert pool.pop_idle() is None  # "one" is still in flight
    actor.release.tell("one")
    assert [pool.get_next(), pool.get_next()] == ["one", 10]
    assert pool.pop_idle() == actor and pool.pop_idle() is None
    with pytest.raises(ValueError, match="at least 1, got 0"):
        ActorPool([actor], max_in_flight=0)
    with pytest.raises(TypeError, match="must be an int"):
        ActorPool([actor], max_in_flight=1.5)
