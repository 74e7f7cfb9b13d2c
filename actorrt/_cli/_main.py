"""The ``actorrt`` command line (the console script, or ``python -m actorrt``).

::

    actorrt status [--pid PID] [--json] [--timeout S]   a running runtime, from another shell
    actorrt results PATH [--metric M] [--mode min|max] [--json]   an experiment folder
    actorrt demo [ARGS ...]                             the demo job (actorrt.examples.digits)
    actorrt start --head | --address HOST:PORT [...]    a cluster's head, or a node joining it
    actorrt stop                                        the head and nodes started here
    actorrt status --address HOST:PORT|auto             a cluster: its nodes and resources

Exit status: 0 when the command did its job; 1 when it could not (no runtime is running,
the runtime did not answer, the demo cannot be loaded); 2 for bad input (an unknown option,
a path that is not an experiment folder, a metric no trial reported, several runtimes
running and no ``--pid``). ``demo`` exits with the demo's own status. Errors go to stderr as
one line naming the command, the value and what is allowed.

How ``status`` finds and reaches a runtime: ``actorrt._control._discovery`` (the per-user entry
files) and ``actorrt._control._server`` (the status socket and its handshake).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import shutil
import sys
from collections.abc import Sequence
from typing import Any

from .._control import _discovery
from .._control._server import fetch_status
from .._errors import ActorrtError
from .._wire._auth import AuthenticationError
from .._wire._codec import RemoteError
from . import _cluster, _dashboard
from ._experiment import (
    Experiment,
    NotAnExperimentError,
    best_trial,
    metric_candidates,
    read_experiment,
)
from ._format import render_results, render_status, results_json

__all__ = ["DEMO_MODULE", "CliError", "main"]

DEMO_MODULE = "actorrt.examples.digits"
_DEFAULT_TIMEOUT = 5.0


class CliError(ActorrtError):
    """A failure the command reports as one line, with its exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``actorrt`` command; return its exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    if args_list[:1] == ["demo"]:
        # Everything after `demo` belongs to the demo, options included.
        command, rest = "demo", args_list[1:]
    else:
        namespace = parser.parse_args(args_list)
        command, rest = namespace.command, []
    try:
        if command == "demo":
            return _demo(rest)
        if command == "start":
            return _cluster.start(namespace, args_list)
        if command == "stop":
            return _cluster.stop(namespace)
        if command == "status":
            return _status(namespace)
        if command == "dashboard":
            try:
                return _dashboard.dashboard(namespace)
            except _dashboard.DashboardArgumentError as exc:
                raise CliError(str(exc), code=2) from None
            except OSError as exc:  # the port is in use, say
                raise CliError(str(exc)) from None
        return _results(namespace)
    except CliError as exc:
        print(f"actorrt {command}: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="actorrt",
        description="Inspect running actorrt runtimes and Tune experiment folders, or run "
        "the demo job.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_status(commands)
    _add_results(commands)
    _cluster.add_cluster_commands(commands)
    _dashboard.add_dashboard_command(commands)
    commands.add_parser(
        "demo",
        add_help=False,
        usage="actorrt demo [ARGS ...]",
        help=f"run the demo job ({DEMO_MODULE}); `actorrt demo --help` shows its options",
        description=f"Run the demo job, {DEMO_MODULE}. Every argument after `demo` is "
        "passed to it.",
    )
    return parser


def _add_status(commands: Any) -> None:
    status = commands.add_parser(
        "status",
        help="resources, placement groups, pending requests and actors of a running runtime",
        description="Show a runtime that runs on this machine under your user (started by "
        "actorrt.run, `async with actorrt.Runtime()` or actorrt.init() in another process): "
        "resources total/used/available, placement groups, pending resource requests with "
        "the reason each waits, and actors by state.",
    )
    status.add_argument(
        "--pid",
        type=_positive_int,
        metavar="PID",
        help="the process of the runtime to show (needed when several run)",
    )
    status.add_argument(
        "--address",
        metavar="HOST:PORT",
        help="show the cluster whose head is there ('auto': the head started on this "
        "machine): its nodes, drivers and resources",
    )
    status.add_argument("--json", action="store_true", help="print the status as JSON")
    status.add_argument(
        "--timeout",
        type=_positive_float,
        default=_DEFAULT_TIMEOUT,
        metavar="S",
        help=f"seconds to wait for the runtime's answer (default {_DEFAULT_TIMEOUT:g})",
    )


def _add_results(commands: Any) -> None:
    results = commands.add_parser(
        "results",
        help="summarise a Tune experiment folder",
        description="Summarise an experiment folder written by actorrt.tune: each trial's "
        "status (terminated, error, running, pending, unfinished: inferred from its files "
        "and the experiment's journal), "
        "iterations, last metric and config; the best trial; and each error's first lines, "
        "with the fix for resource configuration errors.",
    )
    results.add_argument(
        "path",
        metavar="PATH",
        help="the experiment folder "
        "(storage_path/name, e.g. ~/actorrt_results/train_2026-11-30_...)",
    )
    results.add_argument(
        "--metric",
        metavar="M",
        help="rank trials by the last value of M (default: the experiment's metric when its "
        "journal records one, else the only metric the trials report)",
    )
    results.add_argument(
        "--mode", choices=("min", "max"), help="whether the best trial has the lowest or highest M"
    )
    results.add_argument("--json", action="store_true", help="print the summary as JSON")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("actorrt")
    except PackageNotFoundError:
        return "(not installed)"


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a process id (a positive integer), got {text!r}"
        ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a process id (a positive integer), got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds (a number > 0), got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds (a number > 0), got {text}")
    return value


def _width() -> int:
    return max(shutil.get_terminal_size((100, 24)).columns, 60)


# ------------------------------------------------------------------------------------- status


def _cluster_status(args: argparse.Namespace) -> int:
    try:
        data = _cluster.cluster_status(args.address, args.timeout)
    except (ActorrtError, OSError, TimeoutError) as exc:
        raise CliError(f"cannot read the cluster's status at {args.address}: {exc}") from None
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print(_cluster.render_cluster(data))
    return 0


def _status(args: argparse.Namespace) -> int:
    if args.address is not None:
        return _cluster_status(args)
    try:
        entries = _discovery.list_runtimes()
    except PermissionError as exc:
        raise CliError(str(exc)) from None
    if not entries and args.pid is None and _cluster.head_started_here():
        args.address = "auto"  # no program runs here, but a cluster's head does: show it
        return _cluster_status(args)
    entry = _choose(entries, args.pid)
    try:
        data = asyncio.run(_fetch(entry, args.timeout))
    except TimeoutError:
        raise CliError(
            f"the runtime in process {entry.pid} did not answer within {args.timeout:g} s: its "
            "event loop may be blocked (synchronous code in an inline actor or in a coroutine); "
            "try again, or pass a longer --timeout"
        ) from None
    except AuthenticationError as exc:
        raise CliError(
            f"the runtime in process {entry.pid} refused the connection: {exc}"
        ) from None
    except (FileNotFoundError, ConnectionRefusedError):
        # Nothing listens: it shut down just now, or died without removing its entry.
        _discovery.forget(entry)
        raise CliError(f"the runtime in process {entry.pid} has shut down") from None
    except (OSError, RemoteError, ValueError) as exc:
        raise CliError(
            f"could not read the status of the runtime in process {entry.pid}: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    if args.json:
        data["argv"] = list(entry.argv)
        print(json.dumps(data, indent=2, default=repr))
    else:
        sys.stdout.write(render_status(data, entry.command(_width() - 12), _width()))
    return 0


async def _fetch(entry: _discovery.RuntimeEntry, seconds: float) -> dict[str, Any]:
    async with asyncio.timeout(seconds):
        return await fetch_status(entry)


def _choose(entries: list[_discovery.RuntimeEntry], pid: int | None) -> _discovery.RuntimeEntry:
    where = _discovery.discovery_dir()
    if pid is not None:
        matching = [e for e in entries if e.pid == pid]
        if matching:
            return matching[-1]
        running = ", ".join(str(e.pid) for e in entries) or "none"
        raise CliError(
            f"no actorrt runtime runs in process {pid} (runtimes running: {running}; looked "
            f"in {where})"
        )
    if not entries:
        raise CliError(
            "no actorrt runtime is running under your user on this machine (looked in "
            f"{where}). Start one in a program with actorrt.run(main), `async with "
            "actorrt.Runtime():` or actorrt.init(); set ACTORRT_DISCOVERY_DIR if that program "
            "uses another discovery directory."
        )
    if len(entries) > 1:
        listing = "\n".join(f"  --pid {e.pid:<8} {e.command(70)}" for e in entries)
        raise CliError(
            f"{len(entries)} actorrt runtimes are running; choose one with --pid:\n{listing}",
            code=2,
        )
    return entries[0]


# ------------------------------------------------------------------------------------ results


def _results(args: argparse.Namespace) -> int:
    try:
        experiment = read_experiment(args.path)
    except (NotAnExperimentError, PermissionError) as exc:
        raise CliError(str(exc), code=2) from None
    trials = experiment.trials
    metric, mode, note = _objective(experiment, args.metric, args.mode)
    best = best_trial(trials, metric, mode) if metric and mode else None
    if metric and mode and best is None:
        note = f"No trial reported {metric} as a finite number, so there is no best trial."
    if args.json:
        data = results_json(experiment, metric, mode, best, note)
        print(json.dumps(data, indent=2, default=repr))
    else:
        sys.stdout.write(render_results(experiment, metric, mode, best, note, _width()))
    return 0


def _objective(
    experiment: Experiment, metric: str | None, mode: str | None
) -> tuple[str | None, str | None, str | None]:
    """Which metric and mode rank the trials, and a note when they cannot be ranked.

    ``--metric`` wins; else the experiment's own metric, when its journal records one; else
    the only metric the trials report. The mode is never guessed from a metric's name.
    """
    trials = experiment.trials
    candidates = metric_candidates(trials)
    shown = ", ".join(candidates) or "none"
    if metric is not None:
        if not any(t.metric(metric) is not None for t in trials):
            raise CliError(
                f"no trial reported the metric {metric!r}; the trials report: {shown}", code=2
            )
    elif experiment.metric is not None:
        metric = experiment.metric
    elif len(candidates) == 1:
        metric = candidates[0]
    elif mode is not None:
        raise CliError(
            f"--mode {mode} needs --metric: the trials report several metrics ({shown})"
            if candidates
            else f"--mode {mode} needs a metric, and the trials report none",
            code=2,
        )
    elif candidates:
        return (
            None,
            None,
            (f"To pick the best trial, pass --metric (one of: {shown}) and --mode min|max."),
        )
    else:
        return None, None, None
    if mode is None and metric == experiment.metric:
        mode = experiment.mode
    if mode is None:
        return metric, None, f"To pick the best trial by {metric}, pass --mode min or --mode max."
    return metric, mode, None


# --------------------------------------------------------------------------------------- demo


def _demo(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(
            f"usage: actorrt demo [ARGS ...]\n\nRuns the demo job, {DEMO_MODULE}; every "
            "argument after `demo` is passed to it. Its own options:\n",
            flush=True,
        )
        try:
            module = _load_demo()
        except CliError as exc:
            print(f"  (not available: {exc})")
            return 0
        try:
            module.main(["--help"])
        except SystemExit as exit_:  # argparse's --help exits 0
            return int(exit_.code or 0) if isinstance(exit_.code, int) else 0
        return 0
    module = _load_demo()
    status = module.main(argv)
    return int(status or 0)


def _load_demo() -> Any:
    try:
        module = importlib.import_module(DEMO_MODULE)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing == DEMO_MODULE or DEMO_MODULE.startswith(missing + "."):
            raise CliError(
                f"the demo job {DEMO_MODULE} is not part of this installation of actorrt "
                "(module not found); reinstall actorrt"
            ) from None
        raise CliError(
            f"the demo job {DEMO_MODULE} needs the package {exc.name!r}, which is not "
            "installed: pip install 'actorrt[train,tune]'"
        ) from None
    if not callable(getattr(module, "main", None)):
        raise CliError(f"the demo module {DEMO_MODULE} has no main(argv) function")
    return module


if __name__ == "__main__":
    sys.exit(main())
