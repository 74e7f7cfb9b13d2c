"""Reading a Tune experiment folder back: what ``actorrt results`` summarises.

The folder is the one ``actorrt.tune`` writes (``storage_path/name/``): one sub-folder per
trial with ``params.json`` (the config), ``result.json`` (one JSON object per result),
``progress.csv``, ``error.txt`` for a trial that failed, and ``checkpoint_*`` folders. This
module only reads; it imports nothing from ``actorrt.tune`` (it works on a machine without
the trainables' code, and on folders still being written).

Experiments written since ``Tuner.restore`` exists also hold a journal,
``experiment_state.jsonl`` (one JSON object per line: a ``trial`` event when a trial is
created, an ``end`` event with its final status, ``start``/``finished``/``interrupted`` per
run of ``fit()``). Only its plain JSON fields are read; nothing is unpickled, so summarising
a folder never runs code from it.

A trial's status is inferred, most certain evidence first:

==============  ==========================================================================
status          evidence
==============  ==========================================================================
``terminated``  the journal's ``end`` event says ``TERMINATED`` (it ran to its end, or a
                scheduler or stop criterion stopped it)
``error``       the journal's ``end`` event says ``ERROR``; without a journal: it has
                ``error.txt`` (written when a trial fails for good)
``running``     a live process of this user has its ``result.json`` or ``progress.csv``
                open: the experiment runs now and has not closed this trial
``pending``     no result yet while the experiment runs (it waits for its resources)
``unfinished``  it never ended and nothing runs it: the experiment was stopped (Ctrl-C,
                SIGKILL, a crash) before this trial ended; ``Tuner.restore`` resumes it.
                Without a journal, only a trial with no result at all can be told to be
                unfinished
``terminated``  without a journal: it has results, no error, and nothing has its files open
==============  ==========================================================================

So, without a journal, a trial interrupted after its first result looks ``terminated``: the
trial files alone cannot tell it from one that ended.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .._errors import ActorrtError
from .._shared._storage_path import check_experiment_dir
from ..dashboard._sources import AUTO_FIELDS
from ..tune._controller._storage import flatten
from ._error_summary import ErrorSummary, summarise_error

__all__ = [
    "AUTO_FIELDS",
    "Experiment",
    "NotAnExperimentError",
    "TrialSummary",
    "best_trial",
    "flatten",
    "metric_candidates",
    "read_experiment",
]

JOURNAL_FILE = "experiment_state.jsonl"
_JOURNAL_STATUS = {"TERMINATED": "terminated", "ERROR": "error"}


class NotAnExperimentError(ActorrtError, ValueError):
    """The path is missing, or is not an experiment folder; the message says which."""


@dataclass
class TrialSummary:
    """One trial as its folder shows it."""

    name: str
    path: str
    status: str
    config: dict[str, Any] | None
    num_results: int
    last_result: dict[str, Any]
    error: ErrorSummary | None
    problems: list[str] = field(default_factory=list)

    @property
    def iterations(self) -> int:
        """``training_iteration`` of the last result (else the number of results)."""
        value = self.last_result.get("training_iteration")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        return self.num_results

    def metric(self, name: str) -> float | None:
        """The last result's value of ``name`` (``a/b`` for nested), when it is a number."""
        value = flatten(self.last_result).get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return None


@dataclass
class Experiment:
    """An experiment folder, read.

    Attributes:
        path: the folder.
        trials: its trials, in folder-name order.
        running: whether a live process writes it now.
        journal: whether it has a journal (``experiment_state.jsonl``).
        metric, mode: the objective the journal records for the experiment, if any.
    """

    path: str
    trials: list[TrialSummary]
    running: bool
    journal: bool
    metric: str | None = None
    mode: str | None = None


def read_experiment(path: str) -> Experiment:
    """Read the experiment folder ``path``: its trials and whether it runs now.

    Raises:
        NotAnExperimentError: ``path`` does not exist, is a file, or holds no trial folders
            (the message says what it is instead: a trial folder, a folder of experiments).
        PermissionError: the folder, or a trial folder in it, is a link, another user's,
            or writable by others (a folder that another user could have planted).
    """
    given, path = path, os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(path):
        raise NotAnExperimentError(
            f"{given!r} does not exist; pass an experiment folder (storage_path/name, as "
            "Tuner.fit() printed it or ResultGrid.experiment_path gives it)"
        )
    if not os.path.isdir(path):
        raise NotAnExperimentError(f"{given!r} is a file, not an experiment folder")
    # The folder Tuner.restore would load: refused here too when it is not this user's alone.
    check_experiment_dir(path)
    try:
        names = sorted(os.listdir(path))
    except PermissionError as exc:
        raise NotAnExperimentError(f"{given!r} cannot be read: {exc.strerror}") from None
    trial_dirs = [os.path.join(path, n) for n in names if _is_trial_dir(os.path.join(path, n))]
    for trial_dir in trial_dirs:
        check_experiment_dir(trial_dir, "the trial folder")
    # A trial folder may hold folders that look like trials (a trainer's run folder):
    # its own params.json says what it is.
    if not trial_dirs or os.path.isfile(os.path.join(path, "params.json")):
        raise NotAnExperimentError(_not_experiment(given, path, names))
    journal_path = os.path.join(path, JOURNAL_FILE)
    live = _open_by_live_processes(
        [journal_path]
        + [os.path.join(d, f) for d in trial_dirs for f in ("result.json", "progress.csv")]
    )
    running = bool(live)
    journal = _read_journal(journal_path)
    trials = [_read_trial(d, live, running, journal) for d in trial_dirs]
    return Experiment(
        path=path,
        trials=trials,
        running=running,
        journal=journal is not None,
        metric=journal.metric if journal is not None else None,
        mode=journal.mode if journal is not None else None,
    )


@dataclass
class _Journal:
    ended: dict[str, str]  # trial folder name -> TERMINATED or ERROR
    errors: dict[str, str]  # trial folder name -> the traceback of its final error
    metric: str | None
    mode: str | None


def _read_journal(path: str) -> _Journal | None:
    """The plain JSON fields of the journal this module uses; ``None`` without one."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    dirs: dict[str, str] = {}  # trial id -> folder name
    ended: dict[str, str] = {}
    errors: dict[str, str] = {}
    metric = mode = None
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        if not isinstance(event, dict):
            continue
        kind, trial_id = event.get("event"), str(event.get("id", ""))
        if kind == "trial" and isinstance(event.get("dir"), str):
            dirs[trial_id] = os.path.basename(event["dir"].rstrip("/"))
        elif kind == "end" and trial_id in dirs:
            ended[dirs[trial_id]] = str(event.get("status", ""))
            if isinstance(event.get("error_text"), str) and event["error_text"]:
                errors[dirs[trial_id]] = event["error_text"]
        elif kind == "start":
            if isinstance(event.get("metric"), str):
                metric = event["metric"]
            if event.get("mode") in ("min", "max"):
                mode = event["mode"]
    return _Journal(ended, errors, metric, mode)


def _is_trial_dir(path: str) -> bool:
    # Tune writes a trial's params.json when it creates the trial, before any result.
    return os.path.isfile(os.path.join(path, "params.json"))


def _not_experiment(given: str, path: str, names: list[str]) -> str:
    if any(os.path.isfile(os.path.join(path, f)) for f in ("params.json", "result.json")):
        parent = os.path.dirname(os.path.abspath(path))
        return (
            f"{given!r} is a trial folder, not an experiment folder; pass the experiment "
            f"folder that holds it: {parent!r}"
        )
    experiments = [
        n for n in names
        if os.path.isdir(os.path.join(path, n))
        and any(_is_trial_dir(os.path.join(path, n, m)) for m in _listdir(os.path.join(path, n)))
    ]  # fmt: skip
    if experiments:
        shown = ", ".join(experiments[:10]) + (", ..." if len(experiments) > 10 else "")
        return f"{given!r} holds experiments, not trials; pass one of them: {shown}"
    return (
        f"{given!r} is not an experiment folder: none of its sub-folders is a trial folder "
        "(one holding params.json or result.json, as actorrt.tune writes them)"
    )


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _read_trial(path: str, live: set[str], running: bool, journal: _Journal | None) -> TrialSummary:
    problems: list[str] = []
    name = os.path.basename(path)
    config = _read_params(os.path.join(path, "params.json"), problems)
    num_results, last = _read_results(os.path.join(path, "result.json"), problems)
    error = _read_error(os.path.join(path, "error.txt"), problems)
    if error is None and journal is not None and name in journal.errors:
        error = summarise_error(journal.errors[name])
        error.source = os.path.join(os.path.dirname(path), JOURNAL_FILE)
    # Its logs are open from the moment its folder is made, so open logs with no result in
    # them are a trial waiting for resources or for its first report: pending, below.
    is_live = num_results > 0 and any(
        os.path.realpath(os.path.join(path, f)) in live for f in ("result.json", "progress.csv")
    )
    final = _JOURNAL_STATUS.get(journal.ended.get(name, "")) if journal is not None else None
    if final is not None:
        status = final
    elif is_live:
        status = "running"  # a trial retried after an error is running again
    elif error is not None:
        status = "error"
    elif running and num_results == 0:
        status = "pending"
    elif journal is not None or num_results == 0:
        status = "unfinished"
    else:
        status = "terminated"
    return TrialSummary(
        name=name,
        path=path,
        status=status,
        config=config,
        num_results=num_results,
        last_result=last,
        error=error,
        problems=problems,
    )


def _read_params(path: str, problems: list[str]) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        problems.append(f"params.json cannot be read: {exc}")
        return None
    return data if isinstance(data, dict) else {"": data}


def _read_results(path: str, problems: list[str]) -> tuple[int, dict[str, Any]]:
    count, bad = 0, 0
    last: dict[str, Any] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    result = json.loads(line)
                except ValueError:
                    bad += 1  # a line cut short by a crash, most likely
                    continue
                if isinstance(result, dict):
                    count += 1
                    last = result
    except FileNotFoundError:
        return 0, {}
    except OSError as exc:
        problems.append(f"result.json cannot be read: {exc}")
    if bad:
        problems.append(f"{bad} line(s) of result.json are not JSON and were skipped")
    return count, last


def _read_error(path: str, problems: list[str]) -> ErrorSummary | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        problems.append(f"error.txt cannot be read: {exc}")
        return ErrorSummary(kind="?", headline="(error.txt cannot be read)")
    error = summarise_error(text)
    error.source = path
    return error


def metric_candidates(trials: Iterable[TrialSummary]) -> list[str]:
    """Numeric fields of the trials' last results that Tune did not add, sorted."""
    names: set[str] = set()
    for trial in trials:
        for key, value in flatten(trial.last_result).items():
            if key.split("/", 1)[0] in AUTO_FIELDS or key.startswith("config/"):
                continue
            if isinstance(value, int | float) and not isinstance(value, bool):
                names.add(key)
    return sorted(names)


def best_trial(trials: Iterable[TrialSummary], metric: str, mode: str) -> TrialSummary | None:
    """The trial whose last ``metric`` is lowest (``min``) or highest (``max``); the first on
    ties; ``None`` when no trial reported it as a finite number."""
    if mode not in ("min", "max"):
        raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
    best: TrialSummary | None = None
    best_value = math.nan
    for trial in trials:
        value = trial.metric(metric)
        if value is None or not math.isfinite(value):
            continue
        better = value < best_value if mode == "min" else value > best_value
        if best is None or better:
            best, best_value = trial, value
    return best


def _open_by_live_processes(paths: Iterable[str]) -> set[str]:
    """Which of ``paths`` a running process of this user has open (Linux ``/proc``)."""
    wanted = {os.path.realpath(p) for p in paths if os.path.exists(p)}
    found: set[str] = set()
    if not wanted:
        return found
    uid = os.getuid()
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found  # no /proc: nothing can be told to be running
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # exited meanwhile, or not ours to look at
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if target in wanted:
                found.add(target)
    return found
