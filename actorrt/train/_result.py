"""What ``fit()`` returns (Ray Train V2's ``Result``), also rebuilt from a run's folder."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._shared._checkpoint import Checkpoint, local_filesystem
from ._checkpoint_book import SNAPSHOT_FILE
from ._extras import require
from .error import TrainingFailedError

RESULTS_FILE = "result.json"  # one JSON line per report of rank 0


@dataclass
class Result:
    """The outcome of a run.

    Attributes:
        metrics: the last metrics rank 0 reported (``{}`` if none).
        checkpoint: the latest checkpoint reported (by any rank), or ``None``.
        path: the run's folder, a string (checkpoints, ``result.json`` with every report,
            ``checkpoints.json`` with the kept checkpoints).
        error: ``None`` in what ``fit()`` returns: a failed run raises instead (Ray Train
            V2). Kept for the shape of Ray's ``Result``.
        metrics_history: every report of rank 0, in order.
        best_checkpoints: the kept checkpoints with their metrics, best first (by
            ``checkpoint_score_attribute``; newest first without one).
        num_failures: how many times the gang failed and was restarted.
        failures: a one-line description of each failure, in order.
    """

    metrics: dict[str, Any]
    checkpoint: Checkpoint | None
    path: str
    error: TrainingFailedError | None = None
    metrics_history: list[dict[str, Any]] = field(default_factory=list)
    best_checkpoints: list[tuple[Checkpoint, dict[str, Any]]] = field(default_factory=list)
    num_failures: int = 0
    failures: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.path = os.fspath(self.path)

    @property
    def filesystem(self) -> Any:
        """``pyarrow.fs.LocalFileSystem()``, the file system of ``path`` (runs are local
        files here; needs pyarrow, as Ray's does)."""
        return local_filesystem("Result")

    @property
    def metrics_dataframe(self) -> Any:
        """Every report of rank 0 as a ``pandas.DataFrame``, one row per report (needs
        pandas: ``pip install 'actorrt[train]'``)."""
        pd = require("pandas", "train", "Result.metrics_dataframe")
        return pd.DataFrame(self.metrics_history)

    def get_best_checkpoint(self, metric: str, mode: str) -> Checkpoint | None:
        """The kept checkpoint whose reported ``metric`` is highest (``mode="max"``) or
        lowest (``"min"``); among equals, the newest.

        Raises:
            ValueError: ``mode`` is not ``"max"`` or ``"min"``.
            RuntimeError: no checkpoint was kept, or none was reported with ``metric``
                (the message lists the metrics there are).
        """
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        if not self.best_checkpoints:
            raise RuntimeError(f"the run in {self.path} kept no checkpoint")
        scored = [
            (checkpoint, metrics[metric])
            for checkpoint, metrics in self.best_checkpoints
            if isinstance(metrics.get(metric), int | float)
            and not isinstance(metrics.get(metric), bool)
        ]
        if not scored:
            names = sorted({k for _, m in self.best_checkpoints for k in m})
            raise RuntimeError(
                f"no kept checkpoint was reported with a numeric {metric!r}; their metrics "
                f"are {names}"
            )
        newest_first = sorted(scored, key=lambda cm: cm[0].path, reverse=True)
        pick = max if mode == "max" else min
        return pick(newest_first, key=lambda cm: cm[1])[0]

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> Result:
        """The ``Result`` of a finished (or failed) run, read from its folder: the kept
        checkpoints with their metrics, and every report of rank 0. As in Ray, the error
        of a failed run is not restored (``error`` is ``None``).

        Raises:
            RuntimeError: ``path`` is not a folder, or holds no run (no ``result.json``).
        """
        folder = Path(path).expanduser().resolve()
        if not folder.is_dir():
            raise RuntimeError(f"no run folder at {os.fspath(path)!r}")
        results = folder / RESULTS_FILE
        if not results.is_file():
            raise RuntimeError(f"{folder} is not a Train run's folder: it has no {RESULTS_FILE}")
        history = [
            json.loads(line) for line in results.read_text().splitlines() if line.strip()
        ]
        snapshot = folder / SNAPSHOT_FILE
        kept: list[tuple[Checkpoint, dict[str, Any]]] = []
        if snapshot.is_file():
            for entry in json.loads(snapshot.read_text()):
                if (folder / entry["path"]).is_dir():
                    kept.append((Checkpoint(folder / entry["path"]), dict(entry["metrics"])))
        return cls(
            metrics=dict(history[-1]) if history else {},
            checkpoint=kept[-1][0] if kept else None,
            path=str(folder),
            metrics_history=history,
            best_checkpoints=list(reversed(kept)),
        )

    def __repr__(self) -> str:
        error = f", error={self.error!r}" if self.error is not None else ""
        return (
            f"Result(metrics={self.metrics!r}, checkpoint={self.checkpoint!r}, "
            f"path={self.path!r}, num_failures={self.num_failures}{error})"
        )
