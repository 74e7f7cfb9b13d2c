"""``CSVLoggerCallback``: each trial's results as ``progress.csv`` (written by the storage)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

from .logger import LoggerCallback

__all__ = ["CSVLoggerCallback"]


class CSVLoggerCallback(LoggerCallback):
    """Each trial's results as ``progress.csv`` in its folder (Ray Tune's
    ``CSVLoggerCallback``). The experiment's storage writes that file for every trial, with
    or without this callback, so passing it changes nothing and writes nothing twice: it
    exists so that ``RunConfig(callbacks=[CSVLoggerCallback()])`` runs as in Ray."""
