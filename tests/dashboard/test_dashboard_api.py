"""The dashboard's JSON API through a real server: its shape, read-only, the token."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
from typing import Any

import aiohttp
import pytest
from dashboard_helpers import get, non_loopback_address, trainable

import actorrt
from actorrt import tune
from actorrt._runtime._ray_init import ray_init_args


async def test_the_runtime_pages_answer_json_and_nothing_but_get() -> None:
    async with actorrt.Runtime(num_cpus=2, dashboard={"port": 0}) as rt:
        url = rt.dashboard_url
        assert url is not None and url.startswith("http://127.0.0.1:")
        status, summary = await get(url + "api/summary")
        assert status == 200 and summary["view"] == "runtime"
        assert summary["runtime"]["runtime_id"] == rt.runtime_id
        status, resources = await get(url + "api/resources")
        assert resources["nodes"][0]["total"]["CPU"] == 2.0
        assert {"totals", "groups", "holders"} <= set(resources)
        status, waits = await get(url + "api/waits")
        assert waits == {"pending": [], "stalled": [], "graph": [], "deadlocks": []}
        status, actors = await get(url + "api/actors")
        assert status == 200 and actors["actors"] == []
        status, nodes = await get(url + "api/nodes")
        assert nodes["head"] is None and nodes["nodes"][0]["state"] == "alive"
        status, page = await get(url)
        assert status == 200 and "uPlot.iife.min.js" in page
        status, _ = await get(url + "static/vendor/uPlot.iife.min.js")
        assert status == 200
        async with aiohttp.ClientSession() as session:
            for method in ("POST", "PUT", "DELETE", "PATCH"):
                async with session.request(method, url + "api/summary") as r:
                    assert r.status == 405, method
                    assert "read-only" in (await r.json())["error"]
        status, missing = await get(url + "api/sweeps/nope")
        assert status == 404 and "no sweep 'nope'" in missing["error"]
        # A page of another site whose name resolves to 127.0.0.1 (DNS rebinding).
        status, refused = await get(url + "api/summary", headers={"Host": "evil.example:80"})
        assert status == 403 and "evil.example" in refused["error"]


async def test_a_busy_port_is_an_error_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"127.0.0.1:{port}: the port is in use"):
            async with actorrt.Runtime(num_cpus=1, dashboard={"port": port}):
                pass


def test_bad_settings_are_refused_where_given() -> None:
    with pytest.raises(ValueError, match="0..65535, got 70000"):
        actorrt.Runtime(dashboard={"port": 70000})
    with pytest.raises(TypeError, match="unknown keys"):
        actorrt.Runtime(dashboard={"prot": 1})
    with pytest.raises(TypeError, match="must be True, False"):
        actorrt.Runtime(dashboard="yes")
    args, _ = ray_init_args("local", {"include_dashboard": True, "dashboard_port": 0})
    assert args["dashboard"] == {"port": 0}
    args, _ = ray_init_args("local", {"dashboard_host": "127.0.0.1"})
    assert args["dashboard"] == {"host": "127.0.0.1"}
    args, _ = ray_init_args("local", {"include_dashboard": False, "dashboard_port": 1})
    assert "dashboard" not in args


async def test_a_non_loopback_bind_refuses_requests_without_its_token() -> None:
    ip = non_loopback_address()
    if ip is None:
        pytest.skip("this machine has no non-loopback IPv4 address to connect through")
    async with actorrt.Runtime(num_cpus=1, dashboard={"host": "0.0.0.0", "port": 0}) as rt:
        url = rt.dashboard_url
        assert url is not None
        token = re.search(r"\?token=([\w-]+)$", url)
        assert token is not None, url
        port = url.split(":")[2].split("/")[0]
        base = f"http://{ip}:{port}/"
        status, body = await get(base + "api/summary")
        assert status == 401 and "needs its token" in body["error"]
        status, body = await get(base + "api/summary?token=wrong-token-0")
        assert status == 403
        status, body = await get(base + "api/summary",
                                 headers={"Authorization": "Bearer nope-nope"})
        assert status == 403
        status, body = await get(base + "api/waits", headers={"Host": "evil.example"})
        assert status == 401  # the Host check gives way to the token, never to nothing
        status, body = await get(base + f"api/summary?token={token.group(1)}")
        assert status == 200 and body["runtime"]["runtime_id"] == rt.runtime_id
        status, _ = await get(base + "api/summary",
                              headers={"Authorization": f"Bearer {token.group(1)}"})
        assert status == 200


async def test_a_sweep_shows_its_trials_curves_logs_and_errors(tmp_path: Any) -> None:
    async with actorrt.Runtime(num_cpus=2, dashboard={"port": 0}) as rt:
        url = rt.dashboard_url
        assert url is not None
        grid = await tune.Tuner(
            trainable,
            param_space={"x": tune.grid_search([1, 2, 3]), "iters": 3,
                         "fail": tune.sample_from(lambda spec: spec.config["x"] == 3)},
            tune_config=tune.TuneConfig(metric="score", mode="max"),
            run_config=tune.RunConfig(storage_path=str(tmp_path), name="dash", verbose=0),
        ).fit_async()
        assert len(grid) == 3
        status, summary = await get(url + "api/summary")
        key = next(s["key"] for s in summary["sweeps"] if s["name"] == "dash")
        status, sweep = await get(url + f"api/sweeps/{key}")
        assert status == 200 and not sweep["running"]
        assert sweep["metric"] == "score" and sweep["mode"] == "max"
        by_x = {t["config"]["x"]: t for t in sweep["trials"]}
        assert by_x[2]["status"] == "terminated" and by_x[2]["latest"] == 6.0
        assert by_x[2]["best"] == 6.0 and by_x[2]["iterations"] == 3
        assert by_x[3]["status"] == "error" and "cannot go on" in by_x[3]["error"]
        assert sweep["best_trial"] == by_x[2]["name"]
        status, curves = await get(url + f"api/sweeps/{key}/curves")
        assert curves["curves"][by_x[1]["name"]] == [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
        status, one = await get(url + f"api/sweeps/{key}/trials/{by_x[3]['name']}")
        assert "ValueError: x=3 cannot go on" in one["traceback"]
        assert one["columns"][:2] == ["training_iteration", "score"]
        assert one["history"] == [[1.0, 3.0]]
        status, log = await get(url + f"api/sweeps/{key}/trials/{by_x[1]['name']}/log?offset=0")
        assert "step 2 of trial with x=1" in log["text"]
        assert log["next"] == log["size"] > 0
        status, bad = await get(url + f"api/sweeps/{key}/trials/{by_x[1]['name']}/log?offset=x")
        assert status == 400 and "offset must be an integer" in bad["error"]


async def test_the_command_serves_an_experiment_folder(tmp_path: Any) -> None:
    async with actorrt.Runtime(num_cpus=2):
        await tune.Tuner(
            trainable,
            param_space={"x": tune.grid_search([1, 2]), "iters": 2},
            run_config=tune.RunConfig(storage_path=str(tmp_path), name="folder", verbose=0),
        ).fit_async()
    folder = tmp_path / "folder"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "actorrt", "dashboard", str(folder), "--port", "0",
        stderr=subprocess.PIPE, cwd=os.getcwd(),
    )
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        found = re.search(r"dashboard at (http://\S+)", line)
        assert found, line
        url = found.group(1)
        status, summary = await get(url + "api/summary")
        assert summary["view"] == "folder" and summary["runtime"] is None
        status, sweep = await get(url + "api/sweeps/folder")
        assert sorted(t["latest"] for t in sweep["trials"]) == [2.0, 4.0]
        assert sweep["metric"] == "score" and sweep["best_trial"] is not None
        status, body = await get(url + "api/waits")
        assert status == 404 and "experiment folder" in body["error"]
    finally:
        proc.terminate()
        await proc.wait()
    missing = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "actorrt", "dashboard", str(tmp_path / "nope")],
        capture_output=True, text=True, timeout=60,
    )
    assert missing.returncode == 2 and "does not exist" in missing.stderr


async def test_the_default_port_taken_moves_to_the_next_free_one() -> None:
    with socket.socket() as taken:
        try:
            taken.bind(("127.0.0.1", 8265))
            taken.listen()
        except OSError:
            pass  # 8265 is in use already: the same case
        async with actorrt.Runtime(num_cpus=1, dashboard=True) as rt:
            url = rt.dashboard_url
            assert url is not None
            port = int(url.rsplit(":", 1)[1].rstrip("/"))
            assert 8265 < port < 8265 + 100, url
            status, _ = await get(url + "api/summary")
            assert status == 200
