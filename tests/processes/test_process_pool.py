"""The worker pool, worker environments, and worker output reaching the driver."""

import asyncio
import os
import signal

import pytest

import actorrt


@actorrt.actor(process=True)
class Probe:
    def pid(self) -> int:
        return os.getpid()

    def env(self, name: str) -> str | None:
        return os.environ.get(name)

    def say(self, text: str) -> None:
        import sys

        print(text)
        print(f"err: {text}", file=sys.stderr)


async def test_a_matching_environment_reuses_the_worker(actorrt_runtime: actorrt.Runtime) -> None:
    first = await Probe.spawn()
    pid = await first.pid()
    await first.stop()
    second = await Probe.spawn()
    assert await second.pid() == pid  # same environment: the idle worker is reused
    other_env = await Probe.options(worker_env={"ACTORRT_TEST_VAR": "1"}).spawn()
    assert await other_env.pid() != pid  # a different environment never shares a worker
    assert await other_env.env("ACTORRT_TEST_VAR") == "1"
    await second.stop()
    await other_env.stop()


async def test_a_crashed_worker_is_never_reused(actorrt_runtime: actorrt.Runtime) -> None:
    ref = await Probe.spawn()
    pid = await ref.pid()
    os.kill(pid, signal.SIGKILL)
    died = await ref.wait_stopped()
    assert died.reason == "process died" and died.signal == signal.SIGKILL
    again = await Probe.spawn()
    assert await again.pid() != pid


@pytest.mark.actorrt(worker_env={"ACTORRT_TEST_VAR": "runtime"})
async def test_worker_env_runtime_wide_and_per_actor(actorrt_runtime: actorrt.Runtime) -> None:
    plain = await Probe.spawn()
    assert await plain.env("ACTORRT_TEST_VAR") == "runtime"
    own = await Probe.options(worker_env={"ACTORRT_TEST_VAR": "actor", "OTHER": "x"}).spawn()
    assert await own.env("ACTORRT_TEST_VAR") == "actor"
    assert await own.env("OTHER") == "x"
    with pytest.raises(TypeError, match="worker_env must map str to str"):
        Probe.options(worker_env={"N": 1})


async def test_worker_output_reaches_the_driver_prefixed(
    actorrt_runtime: actorrt.Runtime, capfd: pytest.CaptureFixture[str]
) -> None:
    ref = await Probe.options(name="talker").spawn()
    pid = await ref.pid()
    await ref.say("hello from the worker")
    await ref.stop()  # its output is flushed before it stops answering
    await actorrt_runtime.shutdown()
    out, err = capfd.readouterr()
    assert f"(Probe(id={ref.actor_id} name='talker') pid={pid}) hello from the worker" in out
    assert f"pid={pid}) err: hello from the worker" in err


async def test_first_spawns_at_once_share_one_pool(actorrt_runtime: actorrt.Runtime) -> None:
    refs = await asyncio.gather(*(Probe.spawn() for _ in range(3)))
    assert len({await r.pid() for r in refs}) == 3
