"""The coordinator's record of reported checkpoints, pruned per ``CheckpointConfig``."""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from typing import Any

from ._checkpoint import Checkpoint
from ._run_config import CheckpointConfig

logger = logging.getLogger("actorrt.train")


@dataclass
class _Entry:
    checkpoint: Checkpoint
    metrics: dict[str, Any]
    order: int  # report order; later is newer


class CheckpointBook:
    """Every checkpoint rank 0 reported that is still on disk, oldest first.

    ``add`` registers one and deletes those the config no longer keeps: beyond
    ``num_to_keep``, the oldest (or the worst by ``checkpoint_score_attribute``) go, but
    never the latest, which a restart resumes from.
    """

    def __init__(self, config: CheckpointConfig) -> None:
        self.config = config
        self._entries: list[_Entry] = []
        self._count = 0

    @property
    def latest(self) -> Checkpoint | None:
        return self._entries[-1].checkpoint if self._entries else None

    @property
    def next_index(self) -> int:
        """The index the next stored checkpoint gets (``checkpoint_<index>``)."""
        return self._count

    def add(self, checkpoint: Checkpoint, metrics: dict[str, Any]) -> None:
        self._entries.append(_Entry(checkpoint, dict(metrics), self._count))
        self._count += 1
        self._prune()

    def best(self) -> list[tuple[Checkpoint, dict[str, Any]]]:
        """The kept checkpoints with their metrics, best first (newest first unscored)."""
        ranked = sorted(self._entries, key=self._rank, reverse=True)
        return [(e.checkpoint, dict(e.metrics)) for e in ranked]

    def _rank(self, entry: _Entry) -> tuple[float, int]:
        attr = self.config.checkpoint_score_attribute
        if attr is None:
            return (0.0, entry.order)
        score = float(entry.metrics[attr])
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
