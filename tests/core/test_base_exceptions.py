"""An actor's code that raises a BaseException which is not an Exception is answered, never
left hanging: an exit (SystemExit, KeyboardInterrupt) ends the actor and its caller learns
so; any other one (pytest's own outcomes among them) reaches the caller with its own type."""

import asyncio
import logging
from typing import Any

import pytest

import actorrt


class Outcome(BaseException):
    """A BaseException of a library's own, as pytest.fail's and pytest.skip's are."""


class Methods:
    def __init__(self, fail_with: str | None = None) -> None:
        if fail_with == "outcome":
            raise Outcome("from the constructor")
        if fail_with == "exit":
            raise SystemExit(4)

    def outcome(self) -> None:
        raise Outcome("from a method")

    async def outcome_async(self) -> None:
        await asyncio.sleep(0)
        raise Outcome("from an async method")

    def exit(self) -> None:
        raise SystemExit(3)

    def interrupt(self) -> None:
        raise KeyboardInterrupt

    def pytest_fail(self) -> None:
        pytest.fail("checked inside the actor")

    def ok(self) -> str:
        return "ok"


Inline = actorrt.actor(type("Inline", (Methods,), {}))
InProcess = actorrt.actor(process=True)(type("InProcess", (Methods,), {}))
Concurrent = actorrt.actor(max_concurrency=4)(type("Concurrent", (Methods,), {}))

KINDS = [Inline, InProcess, Concurrent]
NAMES = ["inline", "process", "concurrent"]


async def answer(handle: Any) -> Any:
    # A bound, so that a regression shows as a failure rather than a hung test.
    return await asyncio.wait_for(handle, 20)


@pytest.mark.parametrize("cls", KINDS, ids=NAMES)
async def test_a_base_exception_of_a_library_reaches_the_caller_and_the_actor_goes_on(
    actorrt_runtime: actorrt.Runtime, cls: Any
) -> None:
    ref = await cls.spawn()
    with pytest.raises(Outcome, match="from a method"):
        await answer(ref.outcome())
    with pytest.raises(Outcome, match="from an async method"):
        await answer(ref.outcome_async())
    # pytest's Failed names its module "builtins", so from a worker it arrives as a copy of
    # the class (pickled by value): its name and message, not its identity, are kept.
    with pytest.raises(BaseException, match="checked inside the actor") as caught:
        await answer(ref.pytest_fail())
    assert type(caught.value).__name__ == "Failed"
    if cls is not InProcess:
        assert type(caught.value) is pytest.fail.Exception
    assert await answer(ref.ok()) == "ok"


@pytest.mark.parametrize("method", ["exit", "interrupt"])
@pytest.mark.parametrize("cls", KINDS, ids=NAMES)
async def test_an_exit_in_a_method_ends_the_actor_and_says_so(
    actorrt_runtime: actorrt.Runtime, cls: Any, method: str, caplog: pytest.LogCaptureFixture
) -> None:
    ref = await cls.spawn()
    kind = "SystemExit" if method == "exit" else "KeyboardInterrupt"
    with (
        caplog.at_level(logging.ERROR, logger="actorrt"),
        pytest.raises(actorrt.ActorDiedError, match=f"crashed with {kind}"),
    ):
        await answer(getattr(ref, method)())
    with pytest.raises(actorrt.ActorDiedError):
        await answer(ref.ok())
    if cls is not InProcess:  # a worker's log goes to its own stderr
        assert f"which raised {kind} (an exit: it ends the actor)" in caplog.text


@pytest.mark.parametrize("cls", KINDS, ids=NAMES)
async def test_a_constructor_that_raises_one_fails_the_spawn(
    actorrt_runtime: actorrt.Runtime, cls: Any
) -> None:
    with pytest.raises(Outcome, match="from the constructor"):
        await asyncio.wait_for(cls.spawn("outcome"), 20)
    # An exit from the constructor must not end the spawner's program: it is the death error.
    with pytest.raises(actorrt.ActorDiedError, match="crashed with SystemExit: 4"):
        await asyncio.wait_for(cls.spawn("exit"), 20)


async def test_an_exit_in_a_method_restarts_an_actor_allowed_to(
    actorrt_runtime: actorrt.Runtime,
) -> None:
    ref = await Inline.options(max_restarts=1).spawn()
    with pytest.raises(actorrt.ActorDiedError, match="SystemExit"):
        await answer(ref.exit())
    assert await answer(ref.ok()) == "ok"
