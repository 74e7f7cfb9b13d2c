"""The sweep pages' data: trial rows with their latest and best metric, learning curves,
one trial's details. Trial files are read in a thread (``asyncio.to_thread``)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any

from . import _files
from ._sources import AUTO_FIELDS, SweepSource

__all__ = ["sweep_curves", "sweep_view", "trial_view"]


def metric_value(result: Mapping[str, Any], name: str) -> float | None:
    """``result``'s number at ``name`` (``a/b`` for nested), or ``None``."""
    value: Any = result
    for part in name.split("/"):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _first_metric(trials: list[dict[str, Any]]) -> str | None:
    for trial in trials:
        for key, value in trial["last_result"].items():
            if key not in AUTO_FIELDS and metric_value({key: value}, key) is not None:
                return str(key)
    return None


def _best(values: list[float], mode: str | None) -> float | None:
    if not values:
        return None
    return min(values) if mode == "min" else max(values)


def _histories(trials: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    return {t["name"]: _files.read_history(t["path"]) for t in trials}


async def sweep_view(key: str, source: SweepSource) -> dict[str, Any]:
    """The sweep page: every trial's row and the best trial."""
    trials = await source.trials()
    metric = source.metric or _first_metric(trials)
    histories = await asyncio.to_thread(_histories, trials)
    rows = []
    for trial in trials:
        latest = metric_value(trial["last_result"], metric) if metric else None
        values = [
            v for r in histories[trial["name"]]
            if metric and (v := metric_value(r, metric)) is not None
        ]
        rows.append({
            "name": trial["name"],
            "id": trial["id"],
            "status": trial["status"],
            "config": trial["config"],
            "iterations": trial["last_result"].get("training_iteration", trial["num_results"]),
            "latest": latest,
            "best": _best(values, source.mode),
            "error": trial["error"],
        })
    scored = [r for r in rows if r["latest"] is not None]
    best = None
    if scored:
        pick = min if source.mode == "min" else max
        best = pick(scored, key=lambda r: r["latest"])["name"]
    return {
        "key": key,
        "name": source.name,
        "path": source.path,
        "metric": metric,
        "mode": source.mode or ("max" if metric else None),
        "running": source.running,
        "best_trial": best,
        "counts": _counts(rows),
        "trials": rows,
    }


def _counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    return counts


async def sweep_curves(source: SweepSource, metric: str | None) -> dict[str, Any]:
    """Each trial's learning curve: ``training_iteration`` against ``metric``."""
    trials = await source.trials()
    metric = metric or source.metric or _first_metric(trials)
    histories = await asyncio.to_thread(_histories, trials)
    curves: dict[str, list[list[float]]] = {}
    for name, rows in histories.items():
        xs: list[float] = []
        ys: list[float] = []
        for i, row in enumerate(rows):
            y = metric_value(row, metric) if metric else None
            if y is None:
                continue
            x = metric_value(row, "training_iteration")
            xs.append(x if x is not None else float(i + 1))
            ys.append(y)
        curves[name] = [xs, ys]
    return {"metric": metric, "curves": curves}


async def trial_view(source: SweepSource, name: str) -> dict[str, Any] | None:
    """One trial: config, last result, metric history, checkpoints, error traceback."""
    trial = next((t for t in await source.trials() if t["name"] == name), None)
    if trial is None:
        return None
    path = trial["path"]
    history, error, checkpoints = await asyncio.to_thread(
        lambda: (_files.read_history(path), _files.read_error(path), _files.checkpoints(path))
    )
    numeric = sorted({
        k for row in history for k, v in row.items()
        if k not in AUTO_FIELDS and metric_value({k: v}, k) is not None
    })
    return {
        **trial,
        "metric": source.metric,
        "mode": source.mode,
        "columns": ["training_iteration", *numeric],
        "history": [
            [metric_value(row, "training_iteration") or float(i + 1)]
            + [metric_value(row, k) for k in numeric]
            for i, row in enumerate(history)
        ],
        "checkpoints": checkpoints,
        "traceback": error,
    }
