"""The coordinator's record of reported checkpoints, pruned per ``CheckpointConfig``.

A checkpoint folder is named by its report: ``checkpoint_<index>``, where rank ``r``'s
``k``-th report of an attempt has index ``base + k`` on every rank, so the ranks'
checkpoints of one report merge into one folder. The book records a folder when rank 0's
report of it arrives; after an attempt that finished, folders only other ranks wrote are
recorded too (with rank 0's metrics of that report), so no rank's checkpoint is lost. The
kept set is written to ``checkpoints.json`` in the run's folder after each change, which
``Result.from_path`` reads, and which a new run with the same ``RunConfig(name,
storage_path)`` loads: as in Ray Train V2, its ``train.get_checkpoint()`` is then that
run's latest checkpoint (job driver fault tolerance).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._shared._checkpoint import Checkpoint
from ._checkpoint_store import checkpoint_index
from ._run_config import CheckpointConfig

logger = logging.getLogger("actorrt.train")

SNAPSHOT_FILE = "checkpoints.json"


@dataclass
class _Entry:
    checkpoint: Checkpoint
    metrics: dict[str, Any]
    order: int  # the report index; later is newer


class CheckpointBook:
    """Every recorded checkpoint still on disk, oldest first.

    ``add`` registers one and deletes those the config no longer keeps: beyond
    ``num_to_keep``, the oldest (or the worst by ``checkpoint_score_attribute``) go, but
    never the latest, which a restart resumes from.
    """

    def __init__(self, config: CheckpointConfig, run_dir: Path | None = None) -> None:
        self.config = config
        self.run_dir = run_dir
        self._entries: list[_Entry] = []
        self._next = 0
        self._attempt_base = 0
        self._load_snapshot()
        self.skip_used()

    @property
    def latest(self) -> Checkpoint | None:
        return self._entries[-1].checkpoint if self._entries else None

    @property
    def next_index(self) -> int:
        """The index of the next attempt's first report (past every folder on disk)."""
        return self._next

    def start_attempt(self) -> int:
        """Mark where an attempt's report indices begin; returns that base."""
        self.skip_used()
        self._attempt_base = self._next
        return self._next

    def skip_used(self) -> None:
        """Move ``next_index`` past every checkpoint folder in the run's folder."""
        for index in self._on_disk():
            self._next = max(self._next, index + 1)

    def add(self, checkpoint: Checkpoint, metrics: dict[str, Any]) -> None:
        index = checkpoint_index(Path(checkpoint.path).name)
        order = index if index is not None else self._next
        self._entries.append(_Entry(checkpoint, dict(metrics), order))
        self._entries.sort(key=lambda e: e.order)
        self._next = max(self._next, order + 1)
        self._prune()
        self._snapshot()

    def adopt_unrecorded(self, metrics_by_index: dict[int, dict[str, Any]]) -> None:
        """After an attempt that finished: record the folders of its reports that rank 0
        did not report a checkpoint for (other ranks did), with rank 0's metrics."""
        known = {e.order for e in self._entries}
        for index in sorted(self._on_disk()):
            if index >= self._attempt_base and index not in known:
                assert self.run_dir is not None
                path = self.run_dir / f"checkpoint_{index:06d}"
                self.add(Checkpoint(path), metrics_by_index.get(index, {}))

    def discard_unrecorded(self) -> None:
        """After an attempt that failed (every worker ended): delete the folders of its
        reports that were never recorded. ``train.report`` is a barrier, so such a
        folder is a report some rank never made: it may lack that rank's files."""
        known = {e.order for e in self._entries}
        for index in self._on_disk():
            if index >= self._attempt_base and index not in known:
                assert self.run_dir is not None
                shutil.rmtree(self.run_dir / f"checkpoint_{index:06d}", ignore_errors=True)

    def best(self) -> list[tuple[Checkpoint, dict[str, Any]]]:
        """The kept checkpoints with their metrics, best first (newest first unscored)."""
        ranked = sorted(self._entries, key=self._rank, reverse=True)
        return [(e.checkpoint, dict(e.metrics)) for e in ranked]

    def _load_snapshot(self) -> None:
        """Take over the kept checkpoints of an earlier run in this folder, if any.

        Raises:
            RuntimeError: the snapshot names a checkpoint folder that no longer exists.
        """
        if self.run_dir is None or not (self.run_dir / SNAPSHOT_FILE).is_file():
            return
        for entry in json.loads((self.run_dir / SNAPSHOT_FILE).read_text()):
            path = self.run_dir / entry["path"]
            if not path.is_dir():
                raise RuntimeError(
                    f"{self.run_dir / SNAPSHOT_FILE} lists the checkpoint {path}, which no "
                    "longer exists: this run's folder is damaged. Give the run a new "
                    "RunConfig(name=...), or delete the folder to start over"
                )
            index = checkpoint_index(path.name)
            order = index if index is not None else len(self._entries)
            self._entries.append(_Entry(Checkpoint(path), dict(entry["metrics"]), order))
        self._entries.sort(key=lambda e: e.order)
        if self._entries:
            logger.info(
                "%s holds an earlier run with this name: train.get_checkpoint() starts from "
                "its latest checkpoint, %s (give RunConfig a new name to start over)",
                self.run_dir, self._entries[-1].checkpoint.path,
            )

    def _on_disk(self) -> list[int]:
        if self.run_dir is None or not self.run_dir.is_dir():
            return []
        found = (checkpoint_index(p.name) for p in self.run_dir.iterdir() if p.is_dir())
        return [i for i in found if i is not None]

    def _rank(self, entry: _Entry) -> tuple[float, int]:
        attr = self.config.checkpoint_score_attribute
        if attr is None:
            return (0.0, entry.order)
        value = entry.metrics.get(attr)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return (-math.inf, entry.order)  # no score (another rank's checkpoint): worst
        score = float(value)
        return (score if self.config.checkpoint_score_order == "max" else -score, entry.order)

    def _prune(self) -> None:
        keep_n = self.config.num_to_keep
        if keep_n is None or len(self._entries) <= keep_n:
            return
        keep = {id(e) for e in sorted(self._entries, key=self._rank, reverse=True)[:keep_n]}
        keep.add(id(self._entries[-1]))
        dropped = [e for e in self._entries if id(e) not in keep]
        self._entries = [e for e in self._entries if id(e) in keep]
        for entry in dropped:
            try:
                shutil.rmtree(entry.checkpoint.path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                logger.warning("could not delete %s: %s", entry.checkpoint.path, exc)

    def _snapshot(self) -> None:
        if self.run_dir is None:
            return
        data = [
            {"path": os.path.basename(e.checkpoint.path), "metrics": e.metrics}
            for e in self._entries
        ]
        tmp = self.run_dir / f".{SNAPSHOT_FILE}.tmp"
        tmp.write_text(json.dumps(data, default=repr))
        os.replace(tmp, self.run_dir / SNAPSHOT_FILE)
