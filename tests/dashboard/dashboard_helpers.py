"""Shared by the dashboard's tests: a small sweep, HTTP reads, this machine's address."""

from __future__ import annotations

import socket
import sys
from typing import Any

import aiohttp

import actorrt


def trainable(config: dict[str, Any]) -> None:
    """Reports ``score`` ``config["iters"]`` times; prints a line each step; fails when
    ``config["fail"]``."""
    import time

    from actorrt import tune

    for i in range(config["iters"]):
        print(f"step {i} of trial with x={config['x']}", flush=True)
        sys.stdout.flush()
        if config.get("fail") and i == 1:
            raise ValueError(f"x={config['x']} cannot go on")
        tune.report({"score": config["x"] * (i + 1)})
        time.sleep(config.get("pause", 0.0))


async def get(url: str, **kwargs: Any) -> tuple[int, Any]:
    """GET ``url``: the status and the decoded JSON (or the text)."""
    async with aiohttp.ClientSession() as session, session.get(url, **kwargs) as r:
        body = await r.text()
        if r.content_type == "application/json":
            import json

            return r.status, json.loads(body)
        return r.status, body


def non_loopback_address() -> str | None:
    """An address of this machine that is not a loopback one, or ``None``."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.254", 9))  # no packet is sent: this only picks a route
        except OSError:
            return None
        ip = str(s.getsockname()[0])
    return None if ip.startswith("127.") or ip == "0.0.0.0" else ip


@actorrt.actor
class Worker:
    """A worker actor a trial starts without declaring its CPU (as Modin's pool does)."""

    def ping(self) -> str:
        return "pong"


def modin_style(config: dict[str, Any]) -> None:
    """Holds its trial's CPU, meets the other trial, then asks the cluster for a CPU more:
    with every CPU held by a trial, the two requests deadlock."""
    from actorrt import tune

    actorrt.get(config["gate"].meet.options(timeout=60)())
    worker = actorrt.get(Worker.options(num_cpus=1, placement="cluster").spawn())
    tune.report({"worker": actorrt.get(worker.ping())})
