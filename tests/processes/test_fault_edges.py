"""Small faults and bad input: an ask given up on, get_actor not awaited, bad ready()
timeouts, exceptions that cannot be rebuilt, and who may read an experiment's folder."""

from __future__ import annotations

import asyncio
import gc
import math
import os
import signal
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import eventually

import actorrt
from actorrt import tune


class PickyError(Exception):
    """Rebuilt from its pickled args it fails: its constructor wants two."""

    def __init__(self, a: str, b: str) -> None:
        super().__init__(f"{a}+{b}")


@actorrt.actor(process=True, num_cpus=0.01)
class Slow:
    def pid(self) -> int:
        return os.getpid()

    def nap(self, seconds: float) -> str:
        time.sleep(seconds)
        return "rested"

    def picky(self) -> None:
        raise PickyError("a", "b")


async def test_an_ask_that_timed_out_logs_nothing_when_its_actor_dies_later(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    reported: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        ref = await Slow.options(max_restarts=0).spawn()
        pid = await ref.pid()
        handles = [ref.nap.options(timeout=0.1)(60) for _ in range(3)]
        for handle in handles:
            with pytest.raises(actorrt.AskTimeoutError):
                await handle
        os.kill(pid, signal.SIGKILL)
        died = await ref.wait_stopped()
        assert died.signal == signal.SIGKILL
        del handles, handle
        gc.collect()
        await asyncio.sleep(0)
        gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert not [c for c in reported if "never retrieved" in str(c.get("message"))], reported


async def test_get_actor_must_be_awaited_and_says_so(actorrt_runtime: actorrt.Runtime) -> None:
    await Slow.options(name="slow", process=False).spawn()
    with pytest.raises(AttributeError) as err:
        actorrt.get_actor("slow").pid()  # as Ray's handle would be used
    assert "ref = await actorrt.get_actor('slow')" in str(err.value)
    assert "actorrt.get(actorrt.get_actor('slow'))" in str(err.value)
    with pytest.warns(RuntimeWarning, match=r"get_actor\('slow'\) was never awaited"):
        actorrt.get_actor("slow")
        gc.collect()
    ref = await actorrt.get_actor("slow")
    assert await ref.pid() == os.getpid()
    with pytest.raises(TypeError, match="got 3"):
        actorrt.get_actor(3)  # type: ignore[arg-type]
    with pytest.raises(actorrt.ActorNotFoundError):
        await actorrt.get_actor("nobody")


def test_get_actor_from_sync_code() -> None:
    actorrt.init(num_cpus=1)
    try:
        actorrt.get(Slow.options(name="s", process=False).spawn())
        ref = actorrt.get(actorrt.get_actor("s"))
        assert actorrt.get(ref.pid()) == os.getpid()
    finally:
        actorrt.shutdown()


@pytest.mark.actorrt(num_cpus=2)
async def test_placement_group_ready_rejects_bad_timeouts(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    pg = actorrt.placement_group([{"CPU": 1}])
    for bad in (math.nan, -1, -0.5, math.inf):
        with pytest.raises(ValueError, match=f"got {bad!r}"):
            await pg.ready(timeout=bad)
    with pytest.raises(TypeError, match="got '5'"):
        await pg.ready(timeout="5")  # type: ignore[arg-type]
    await pg.ready(timeout=30)  # still reserves after the refusals
    await pg.remove()


async def test_an_exception_that_cannot_be_rebuilt_is_an_actorrt_remote_error(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref = await Slow.spawn()
    with pytest.raises(actorrt.RemoteError) as err:
        await ref.picky()
    assert isinstance(err.value, actorrt.ActorrtError)
    assert err.value.type_name.endswith("PickyError") and "a+b" in str(err.value)
    assert repr(type(err.value)) == "<class 'actorrt.RemoteError'>"


def report_once(config: dict[str, Any]) -> None:
    tune.report({"v": config["v"]})


@pytest.mark.actorrt(num_cpus=1)
async def test_experiment_folders_are_private(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    old = os.umask(0o022)  # the usual umask: would leave the folders world-readable
    try:
        grid = await tune.Tuner(
            report_once,
            param_space={"v": tune.grid_search([1, 2])},
            run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
        ).fit_async()
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(grid.experiment_path).st_mode) == 0o700
    for result in grid:
        assert stat.S_IMODE(os.stat(result.path).st_mode) == 0o700
        assert "params.pkl" in os.listdir(result.path)


@actorrt.actor(process=True)
class Share:
    def granted(self) -> dict[str, float]:
        return dict(actorrt.get_context().get_assigned_resources())


@pytest.mark.actorrt(num_cpus=1)
async def test_fractions_ray_accepts_are_put_on_the_grid_as_ray_does(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    thirds = [await Share.options(num_cpus=1 / 3).spawn() for _ in range(3)]  # all fit in 1
    for ref in thirds:
        assert (await ref.granted())["CPU"] == 0.3333
    assert actorrt.available_resources().get("CPU", 0.0) == pytest.approx(0.0001)
    for ref in thirds:
        await ref.stop()
    assert actorrt.available_resources()["CPU"] == 1.0  # exactly all of it back
    summed = await Share.options(num_cpus=0.1 + 0.2).spawn()
    assert (await summed.granted())["CPU"] == 0.3
    with pytest.raises(ValueError, match=r"num_cpus=1e-05: below 1/10000"):
        Share.options(num_cpus=0.00001)


@actorrt.actor(num_cpus=0.01)
class SlowStart:
    """Marks that it is constructed, then takes up to a minute in ``on_start``."""

    def __init__(self, marker: str) -> None:
        Path(marker).touch()

    async def on_start(self) -> None:
        await asyncio.sleep(60)


@pytest.mark.parametrize("where", ["inline", "worker"])
@pytest.mark.actorrt(num_cpus=2)
async def test_a_spawn_whose_group_is_removed_while_it_starts_fails_saying_so(
    actorrt_runtime: actorrt.Runtime, where: str, tmp_path: Path
) -> None:
    """A spawner still waiting learns the reason its actor was ended for (in a cluster, a
    lost node: what lets Tune retry a trial whose actor was starting there)."""
    pg = actorrt.placement_group([{"CPU": 1}])
    await pg.ready(timeout=30)
    marker = tmp_path / "starting"
    spawn = asyncio.ensure_future(
        SlowStart.options(process=where == "worker", placement=pg.bundle(0)).spawn(str(marker))
    )
    assert await eventually(marker.exists, within=30)
    await pg.remove()
    with pytest.raises(actorrt.ActorDiedError) as caught:
        await asyncio.wait_for(spawn, 30)
    assert caught.value.reason == actorrt.DeathReason.GROUP_REMOVED, caught.value
    assert await eventually(lambda: actorrt.available_resources()["CPU"] == 2, within=30)


@pytest.mark.parametrize("where", ["inline", "worker", "stopped worker"])
@pytest.mark.actorrt(num_cpus=2)
async def test_a_call_in_flight_when_its_group_is_removed_fails_saying_so(
    actorrt_runtime: actorrt.Runtime, where: str
) -> None:
    """The reason an actor is ended for reaches the calls it had in flight, not only later
    ones, also from a worker that cannot answer (stopped, as one cut off on a lost node):
    in a cluster, the same path ends the actors of a lost node (``NODE_LOST``)."""
    pg = actorrt.placement_group([{"CPU": 1}])
    await pg.ready(timeout=30)
    napper = await Slow.options(process=where != "inline", placement=pg.bundle(0)).spawn()
    pid = await napper.pid()  # up and answering
    call = asyncio.ensure_future(napper.nap(60))
    if where == "stopped worker":
        os.kill(pid, signal.SIGSTOP)  # it hears nothing more: no reply
    await pg.remove()
    with pytest.raises(actorrt.ActorDiedError) as caught:
        await asyncio.wait_for(call, 30)
    assert caught.value.reason == actorrt.DeathReason.GROUP_REMOVED, caught.value
    with pytest.raises(actorrt.ActorDiedError) as later:
        await napper.pid()
    assert later.value.reason == actorrt.DeathReason.GROUP_REMOVED, later.value
