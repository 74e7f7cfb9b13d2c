"""``actorrt dashboard [EXPERIMENT_FOLDER]``: the dashboard of an experiment folder.

It serves the folder's sweep, read from its files (``actorrt._cli._experiment``, in a thread,
each request), while the experiment runs or after it ended; no runtime is started, so the
runtime pages (resources, waits, actors, nodes) are empty: those come from the program's
own dashboard (``actorrt.init(include_dashboard=True)``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from .._errors import ActorrtError
from ..dashboard import DashboardConfig, register_sweep
from ._experiment import NotAnExperimentError, TrialSummary, read_experiment

__all__ = ["DashboardArgumentError", "FolderSweep", "add_dashboard_command", "dashboard"]


class DashboardArgumentError(ActorrtError, ValueError):
    """A folder that is not an experiment, or a bad host or port: the message says which."""


class FolderSweep:
    """An experiment folder as the dashboard reads it (``actorrt.dashboard.SweepSource``)."""

    def __init__(self, path: str) -> None:
        experiment = read_experiment(path)  # raises at once for what is not an experiment
        self.path = experiment.path
        self.name = os.path.basename(experiment.path.rstrip(os.sep))
        self.metric = experiment.metric
        self.mode = experiment.mode
        self.running = experiment.running

    async def trials(self) -> list[dict[str, Any]]:
        experiment = await asyncio.to_thread(read_experiment, self.path)
        self.running = experiment.running
        return [_row(t) for t in experiment.trials]


def _row(trial: TrialSummary) -> dict[str, Any]:
    return {
        "name": trial.name,
        "id": trial.name.rsplit("_", 1)[-1],
        "status": trial.status,
        "config": trial.config or {},
        "path": trial.path,
        "last_result": trial.last_result,
        "num_results": trial.num_results,
        "error": trial.error.headline if trial.error is not None else None,
    }


def add_dashboard_command(commands: Any) -> None:
    parser = commands.add_parser(
        "dashboard",
        help="serve the dashboard of a Tune experiment folder",
        description="Serve a read-only dashboard (docs/dashboard.md) of an experiment folder "
        "written by actorrt.tune, while it runs or after it ended: its trials, learning "
        "curves, logs and errors. Ctrl-C stops it.",
    )
    parser.add_argument("path", metavar="EXPERIMENT_FOLDER", nargs="?", default=None,
                        help="the experiment folder (storage_path/name); left out: the "
                        "newest under ~/actorrt_results")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1; any other needs the token "
                        "it prints)")
    parser.add_argument("--port", type=int, default=None,
                        help="port (default 8265 or the next free one; 0: any free port)")


def dashboard(args: argparse.Namespace) -> int:
    path = args.path or _newest_experiment()
    try:
        config = DashboardConfig(host=args.host, port=args.port)
        register_sweep(FolderSweep(path))
    except (NotAnExperimentError, PermissionError, ValueError, TypeError) as exc:
        raise DashboardArgumentError(str(exc)) from None
    asyncio.run(_serve(config))
    return 0


async def _serve(config: DashboardConfig) -> None:
    from ..dashboard._server import DashboardServer

    server = DashboardServer(config, None)
    await server.start()
    try:
        await asyncio.Event().wait()  # until Ctrl-C
    finally:
        await server.close()


def _newest_experiment() -> str:
    root = os.path.expanduser(os.path.join("~", "actorrt_results"))  # Tune's default
    try:
        folders = [os.path.join(root, n) for n in os.listdir(root)]
    except FileNotFoundError:
        raise DashboardArgumentError(f"give an experiment folder: {root} does not exist") from None
    folders = [f for f in folders if os.path.isdir(f)]
    if not folders:
        raise DashboardArgumentError(f"give an experiment folder: {root} holds none")
    return max(folders, key=os.path.getmtime)
