"""What an open dashboard costs a sweep: Tune 100 x 10 with the dashboard served and polled
every second, against the same sweep without it, in the same run (docs/dashboard.md).

    python -m benchmarks.dashboard [--check] [--trials N] [--reports R] [--sweeps S]
                                   [--reps K]

Each turn is a fresh runtime (``actorrt.run(num_cpus=4)``) running ``--sweeps`` sweeps one
after another (the first on cold worker processes, the others warm), each the sweep of
``benchmarks.tune_overhead`` (``--trials`` trials of a trivial trainable reporting
``--reports`` times, ``{"cpu": 0.5}`` each). The figure is their total wall time in seconds.

With the dashboard: the runtime serves it (``dashboard={"port": 0}``), and a client in
another process (as a browser is) keeps its event stream open and, every second, reads what
the sweep page reads: ``/api/summary``, the newest sweep's ``/api/sweeps/KEY`` and its
``/curves``. The clock starts once the client has read the page once. Without: no
dashboard, no client. The two kinds of turn alternate (with, without; then without, with),
so a slow moment of a shared machine falls on both.

Two figures: the sweeps' time with the dashboard beside the time without (medians over the
turns), and, per repetition, the time without over the time with in its two adjacent turns
(1.0: no cost), whose median is the one checked: a machine whose load drifts between
repetitions moves both turns of a pair alike. ``--check`` fails when the dashboard costs
more than 5% (that median below 0.95).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import urllib.request
from typing import Any

import actorrt
from actorrt._runtime._root import current_runtime

from ._common import Figure, exit_for, report
from .tune_overhead import sweep

TARGET_RATIO = 0.95  # at most 5% slower with the dashboard open
POLL_S = 1.0
FIGURE = "sweeps with the dashboard polled 1/s"
PAIRED = "time without / time with the dashboard, per pair of turns"


def client(url: str) -> None:
    """Poll ``url``'s sweep page every second until killed; one line on stdout once the
    first read succeeded."""
    import threading

    def stream() -> None:
        with urllib.request.urlopen(url + "api/events") as events:
            for _ in events:  # the summaries, once a second
                pass

    threading.Thread(target=stream, daemon=True).start()
    said = False
    while True:
        summary = json.load(urllib.request.urlopen(url + "api/summary"))
        if summary["sweeps"]:
            key = summary["sweeps"][-1]["key"]
            for path in (f"api/sweeps/{key}", f"api/sweeps/{key}/curves"):
                urllib.request.urlopen(url + path).read()
        if not said:
            print("polling", flush=True)
            said = True
        time.sleep(POLL_S)


async def _sweeps(trials: int, reports: int, count: int, dashboard: bool) -> float:
    poller: asyncio.subprocess.Process | None = None
    if dashboard:
        url = current_runtime().dashboard_url
        assert url is not None
        poller = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmarks.dashboard", "--client", url,
            stdout=asyncio.subprocess.PIPE,
        )
        assert poller.stdout is not None
        line = await asyncio.wait_for(poller.stdout.readline(), 60)
        assert line.strip() == b"polling", f"the polling client did not start: {line!r}"
    try:
        return sum([await sweep(trials, reports) for _ in range(count)])
    finally:
        if poller is not None:
            poller.kill()
            await poller.wait()


def turn(trials: int, reports: int, count: int, dashboard: bool) -> float:
    extra: dict[str, Any] = {"dashboard": {"port": 0}} if dashboard else {}
    seconds: float = actorrt.run(
        lambda: _sweeps(trials, reports, count, dashboard), num_cpus=4, **extra
    )
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--reports", type=int, default=10)
    parser.add_argument("--sweeps", type=int, default=3, help="sweeps per turn")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args.client)
        return
    os.environ.setdefault("ACTORRT_TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    with_dash: list[float] = []
    without: list[float] = []
    for rep in range(args.reps):
        for dashboard in ((True, False) if rep % 2 == 0 else (False, True)):
            seconds = turn(args.trials, args.reports, args.sweeps, dashboard)
            (with_dash if dashboard else without).append(seconds)
    paired = [b / a for a, b in zip(with_dash, without, strict=True)]
    figures = [
        Figure(FIGURE, "s", with_dash, without, lower_is_better=True),
        Figure(PAIRED, "x", paired, target_value=TARGET_RATIO),
    ]
    ok = report("benchmarks.dashboard: Tune with the dashboard open vs without", figures,
                "dashboard", {"loop": "uvloop", "reps": args.reps, "poll_s": POLL_S,
                              "trials": args.trials, "reports": args.reports,
                              "sweeps": args.sweeps})
    exit_for(ok, args.check)


if __name__ == "__main__":
    main()
