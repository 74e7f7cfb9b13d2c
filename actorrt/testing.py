"""Pytest helpers for testing your own actors.

Enable them in a ``conftest.py``::

    pytest_plugins = ["actorrt.testing"]

then ask for the ``actorrt_runtime`` fixture in an async test (pytest-asyncio)::

    async def test_counter(actorrt_runtime):
        counter = await Counter.spawn()
        assert await counter.incr() == 1

The fixture gives the test a running ``actorrt.Runtime``; at teardown it shuts the runtime
down and fails the test if any task the test's actors started is still running (an actor
that spawned a background task and never ended it). Pass runtime options with a marker:
``@pytest.mark.actorrt(shutdown_timeout=1)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from ._runtime._root import Runtime


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "actorrt(**options): options for the actorrt_runtime fixture's Runtime"
    )


def leftover_tasks(before: set[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
    """Tasks of the running loop that were not in ``before`` and have not finished."""
    me = asyncio.current_task()
    return [t for t in asyncio.all_tasks() if t not in before and t is not me and not t.done()]


@pytest_asyncio.fixture
async def actorrt_runtime(request: pytest.FixtureRequest) -> AsyncIterator[Runtime]:
    """A running runtime for one test; teardown fails the test on leftover tasks."""
    marker = request.node.get_closest_marker("actorrt")
    options = dict(marker.kwargs) if marker else {}
    before = set(asyncio.all_tasks())
    async with Runtime(**options) as runtime:
        yield runtime
    left = leftover_tasks(before)
    if left:
        names = ", ".join(t.get_name() for t in left)
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        pytest.fail(f"tasks left running after the runtime shut down: {names}")
