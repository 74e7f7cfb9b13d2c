"""Embedding in a service's own loop, actorrt.run, and runtime misuse."""

import asyncio

import pytest

import actorrt


@actorrt.actor
class Greeter:
    def __init__(self) -> None:
        self.count = 0

    async def greet(self, name: str) -> str:
        self.count += 1
        await asyncio.sleep(0)
        return f"hello {name} #{self.count}"

    def served(self) -> int:
        return self.count


async def test_a_tcp_service_asks_an_actor_from_its_handlers() -> None:
    before = set(asyncio.all_tasks())
    async with actorrt.Runtime() as runtime:
        greeter = await Greeter.spawn()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            name = (await reader.readline()).decode().strip()
            writer.write((await greeter.greet(name) + "\n").encode())
            await writer.drain()
            writer.close()
            await writer.wait_closed()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]

        async def client(i: int) -> str:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"client{i}\n".encode())
            await writer.drain()
            line = (await reader.readline()).decode().strip()
            writer.close()
            await writer.wait_closed()
            return line

        replies = await asyncio.gather(*(client(i) for i in range(100)))
        assert sorted(int(r.rsplit("#", 1)[1]) for r in replies) == list(range(1, 101))
        assert all(r.startswith(f"hello client{i} ") for i, r in enumerate(replies))
        assert await greeter.served() == 100
        server.close()
        await server.wait_closed()
    assert runtime.closed
    me = asyncio.current_task()
    left = [t for t in asyncio.all_tasks() if t not in before and t is not me and not t.done()]
    assert left == []


def test_actorrt_run_uses_uvloop_and_returns_the_result() -> None:
    async def main() -> tuple[str, str]:
        greeter = await Greeter.spawn()
        return await greeter.greet("run"), type(asyncio.get_running_loop()).__module__

    greeting, loop_module = actorrt.run(main)
    assert greeting == "hello run #1"
    assert loop_module.startswith("uvloop")
    with pytest.raises(TypeError, match="takes an async function or coroutine"):
        actorrt.run(42)  # type: ignore[arg-type]


async def test_one_runtime_per_process(actorrt_runtime: actorrt.Runtime) -> None:
    with pytest.raises(actorrt.RuntimeAlreadyRunningError, match="already running"):
        async with actorrt.Runtime():
            pass
    with pytest.raises(actorrt.RuntimeAlreadyRunningError):
        actorrt.init()


async def test_a_ref_after_shutdown_is_a_clear_error() -> None:
    async with actorrt.Runtime():
        greeter = await Greeter.spawn()
    with pytest.raises(actorrt.RuntimeClosedError, match="runtime that has shut down"):
        greeter.greet("late")
    with pytest.raises(actorrt.RuntimeClosedError):
        greeter.served.tell()


def test_spawning_without_a_runtime_says_how_to_start_one() -> None:
    with pytest.raises(actorrt.NoRuntimeError, match=r"async with actorrt.Runtime\(\)"):
        asyncio.run(Greeter.spawn())


async def test_shutdown_stops_actors_gracefully_then_kills_the_stuck() -> None:
    stopped: list[str] = []
    entered = asyncio.Event()

    @actorrt.actor
    class Polite:
        def on_stop(self) -> None:
            stopped.append("polite")

    @actorrt.actor
    class Stuck:
        async def hang(self) -> None:
            entered.set()
            await asyncio.Event().wait()

        def on_stop(self) -> None:
            stopped.append("stuck")

    async with actorrt.Runtime(shutdown_timeout=0.1):
        polite = await Polite.spawn()
        stuck = await Stuck.spawn()
        hanging = stuck.hang()
        await entered.wait()
    assert stopped == ["polite"]
    assert (await polite.wait_stopped()).reason == "runtime shut down"
    assert (await stuck.wait_stopped()).reason == "runtime shut down"
    with pytest.raises(actorrt.ActorDiedError, match="runtime shut down"):
        await hanging
    with pytest.raises(ValueError, match="shutdown_timeout must be >= 0"):
        actorrt.Runtime(shutdown_timeout=-1)
