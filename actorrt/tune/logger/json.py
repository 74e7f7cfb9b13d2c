"""``JsonLoggerCallback``: each trial's results as JSON lines (written by the storage)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

from .logger import LoggerCallback

__all__ = ["JsonLoggerCallback"]


class JsonLoggerCallback(LoggerCallback):
    """Each trial's results as JSON lines in ``result.json`` in its folder (Ray Tune's
    ``JsonLoggerCallback``). As with :class:`CSVLoggerCallback`, the experiment's storage
    writes that file for every trial; passing this callback writes nothing twice."""
