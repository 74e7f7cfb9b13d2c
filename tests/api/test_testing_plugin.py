"""The actorrt_runtime fixture that users get from actorrt.testing."""

import pytest

pytest_plugins = ["pytester"]

INNER = '''
import asyncio
import actorrt

pytest_plugins = ["actorrt.testing"]


@actorrt.actor
class Leaky:
    async def on_start(self):
        self.task = asyncio.ensure_future(asyncio.Event().wait())  # never ended

    def ping(self):
        return "pong"


@actorrt.actor
class Tidy:
    def ping(self):
        return "pong"


async def test_tidy(actorrt_runtime):
    ref = await Tidy.spawn()
    assert await ref.ping() == "pong"


async def test_leaky(actorrt_runtime):
    ref = await Leaky.spawn()
    assert await ref.ping() == "pong"


@pytest.mark.actorrt(shutdown_timeout=0.25)
async def test_marker_options(actorrt_runtime):
    assert actorrt_runtime.shutdown_timeout == 0.25
'''


def test_fixture_fails_a_test_that_leaves_a_task_running(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner="import pytest\n" + INNER)
    pytester.makeini("[pytest]\nasyncio_mode = auto\n")
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*tasks left running after the runtime shut down*"])
