"""The dashboard in a real headless Chromium (Debian's chromium and chromium-driver, driven
by selenium): a running sweep's rows change state, its curves gain points, a trial's log
line appears; a Modin-style deadlock appears in the waits view with its graph.

Each page's screenshot is saved to ``$ACTORRT_SCREENSHOTS`` (``docs/images`` makes the set
docs/dashboard.md shows), else to the test's temporary folder. Selenium's calls block, so
they run in a thread: the runtime and its dashboard serve on this test's loop meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_helpers import modin_style, trainable

import actorrt
from actorrt import tune
from benchmarks.deadlock import Gate

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="Debian's chromium and chromium-driver are not installed (`make chromium`)",
)

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1280,1100",
)  # fmt: skip


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    service = webdriver.ChromeService(executable_path=str(DRIVER))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    where = Path(os.environ.get("ACTORRT_SCREENSHOTS") or tmp_path / "shots")
    where.mkdir(parents=True, exist_ok=True)
    return where


async def until(read: Callable[[], Any], holds: Callable[[Any], bool], within: float) -> Any:
    """Read the page (in a thread) until ``holds(value)``; the last value, asserted."""
    deadline = time.monotonic() + within
    value = await asyncio.to_thread(read)
    while not holds(value) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        value = await asyncio.to_thread(read)
    assert holds(value), value
    return value


async def act(browser: Any, by: str, value: str, do: Callable[[Any], Any]) -> None:
    """Find an element and act on it as a user does (a click, typing). The page redraws
    once a second, so an element found just before a redraw may be gone (or not yet
    usable) when acted on: find it again then, as a user's next click would."""
    from selenium.common.exceptions import (
        ElementNotInteractableException,
        StaleElementReferenceException,
    )

    for _ in range(20):
        element = await asyncio.to_thread(browser.find_element, by, value)
        try:
            await asyncio.to_thread(do, element)
            return
        except (StaleElementReferenceException, ElementNotInteractableException):
            await asyncio.sleep(0.05)  # replaced while acted on: the next redraw is done
            continue
    raise AssertionError(f"{by}={value!r} was redrawn under every one of 20 tries")


def script(browser: Any, js: str) -> Callable[[], Any]:
    return lambda: browser.execute_script(js)


ROWS = """return [...document.querySelectorAll('#trials tbody tr')].map(
    r => [r.dataset.trial, r.querySelector('td.status').textContent])"""
POINTS = "const c = document.getElementById('curves'); return c ? +c.dataset.points : -1"


async def screenshot(browser: Any, shots: Path, page: str) -> None:
    await asyncio.sleep(0.3)  # the chart's first frame
    await asyncio.to_thread(browser.save_screenshot, str(shots / f"dashboard-{page}.png"))


@pytest.mark.timeout(240)
async def test_a_running_sweep_is_watched_live(browser: Any, shots: Path, tmp_path: Any) -> None:
    async with actorrt.Runtime(num_cpus=2, dashboard={"port": 0}) as rt:
        url = rt.dashboard_url
        assert url is not None
        fit = asyncio.ensure_future(tune.Tuner(
            trainable,
            param_space={"x": tune.grid_search([1, 2, 3, 4, 5]), "iters": 8, "pause": 0.4,
                         "fail": tune.sample_from(lambda spec: spec.config["x"] == 5)},
            tune_config=tune.TuneConfig(metric="score", mode="max"),
            run_config=tune.RunConfig(storage_path=str(tmp_path), name="live", verbose=0),
        ).fit_async())
        try:
            await asyncio.to_thread(browser.get, url + "#/sweeps")
            rows = await until(script(browser, ROWS),
                               lambda rs: any(s == "running" for _, s in rs), 90)
            running = {name for name, s in rows if s == "running"}
            points = await until(script(browser, POINTS), lambda p: p > 0, 60)
            await until(script(browser, POINTS), lambda p: p > points, 60)
            await screenshot(browser, shots, "sweep")
            # Rows change state as the trials go on: one seen running ends.
            await until(script(browser, ROWS),
                        lambda rs: any(n in running and s == "terminated" for n, s in rs), 90)
            # A running trial's page shows its log lines as they come.
            rows = await until(script(browser, ROWS),
                               lambda rs: any(s == "running" for _, s in rs), 90)
            live = next(name for name, s in rows if s == "running")
            await asyncio.to_thread(browser.get, url + f"#/trial/live/{live}")
            log = script(browser, "const l = document.getElementById('log'); "
                                  "return l ? l.textContent : ''")
            first = await until(log, lambda t: "step 0 of trial" in t, 60)
            await until(log, lambda t: t.count("step ") > first.count("step "), 60)
            await screenshot(browser, shots, "trial")
            for page in ("resources", "actors", "nodes"):
                await asyncio.to_thread(browser.get, url + f"#/{page}")
                heading = script(browser, "return document.querySelector('main h2')?.textContent")
                await until(heading, lambda h, page=page: h is not None and h.lower() == page, 30)
                await screenshot(browser, shots, page)
            await fit
            await asyncio.to_thread(browser.get, url + "#/sweeps")
            rows = await until(script(browser, ROWS),
                               lambda rs: len(rs) == 5 and all(s in ("terminated", "error")
                                                                for _, s in rs), 60)
            assert sum(s == "error" for _, s in rows) == 1
            best = await asyncio.to_thread(
                browser.execute_script, "return document.querySelector('tr.best')?.dataset.trial"
            )
            assert best is not None and best.endswith(tuple("0123456789"))
            await screenshot(browser, shots, "sweep-done")
            # Sorted by a click on a column's header (twice: descending), filtered by typing.
            await act(browser, "css selector", "th[data-key=latest]", lambda e: e.click())
            scores = script(browser, """return [...document.querySelectorAll(
                '#trials tbody td.latest')].map(td => +td.textContent)""")
            await until(scores, lambda v: v == sorted(v) and len(v) == 5, 30)
            await act(browser, "css selector", "th[data-key=latest]", lambda e: e.click())
            await until(scores, lambda v: v == sorted(v, reverse=True) and len(v) == 5, 30)
            await act(browser, "id", "filter", lambda e: (e.clear(), e.send_keys("cannot go on")))
            await until(script(browser, ROWS), lambda rs: [s for _, s in rs] == ["error"], 30)
        finally:
            fit.cancel()
            await asyncio.gather(fit, return_exceptions=True)


@pytest.mark.timeout(240)
async def test_a_modin_style_deadlock_shows_in_the_waits_view(
    browser: Any, shots: Path, tmp_path: Any
) -> None:
    async with actorrt.Runtime(num_cpus=2, dashboard={"port": 0}) as rt:
        url = rt.dashboard_url
        assert url is not None
        gate = await Gate.spawn(2)
        await asyncio.to_thread(browser.get, url + "#/waits")
        grid = await tune.Tuner(
            modin_style,
            param_space={"gate": gate, "i": tune.grid_search([0, 1])},
            run_config=tune.RunConfig(storage_path=str(tmp_path), name="modin", verbose=0),
        ).fit_async()
        assert len(grid.errors) == 1 and isinstance(grid.errors[0], actorrt.ResourceDeadlockError)
        report = script(browser, """const d = document.querySelector('#deadlocks .deadlock');
            return d ? [d.querySelectorAll('svg path.edge').length,
                        d.querySelectorAll('svg g.node').length, d.textContent] : null""")
        lines, nodes, text = await until(report, lambda r: r is not None, 30)
        assert lines >= 3 and nodes >= 3, (lines, nodes)  # spawner -> worker -> both trials
        assert "Resource deadlock" in text and "TrialDriver(" in text
        assert "with_resources" in text  # the fix, as the error says it
        await screenshot(browser, shots, "waits")
        await gate.stop()


NODE_ROWS = """return [...document.querySelectorAll('#nodes-table tbody tr')].map(
    r => [r.querySelector('td.node').textContent, r.querySelector('td.state').textContent])"""


@pytest.mark.timeout(240)
async def test_the_heads_nodes_page_shows_the_clusters_nodes(
    browser: Any, shots: Path, tmp_path: Path
) -> None:
    from cluster._cluster import Cluster

    cluster = Cluster(tmp_path)
    try:
        cluster.start_head("--num-cpus", "1", "--include-dashboard=true",
                           "--dashboard-port", "0")
        cluster.start_node("--num-cpus", "2")
        assert cluster.head is not None
        await asyncio.to_thread(browser.get, cluster.head.info["dashboard"] + "#/nodes")
        rows = await until(script(browser, NODE_ROWS),
                           lambda rs: [s for _, s in rs] == ["alive", "alive"], 30)
        assert len({n for n, _ in rows}) == 2
        await screenshot(browser, shots, "cluster-nodes")
        await asyncio.to_thread(cluster.nodes[0].kill)
        await until(script(browser, NODE_ROWS),
                    lambda rs: sorted(s for _, s in rs) == ["alive", "lost"], 30)
    finally:
        cluster.close()
