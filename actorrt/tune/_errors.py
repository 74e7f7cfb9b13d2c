"""The errors of ``actorrt.tune`` itself, at the bottom of the package: every tune module
may raise them, and this module imports nothing of tune."""

from __future__ import annotations

__all__ = ["TuneError"]


class TuneError(Exception):
    """An experiment run by ``tune.run`` did not complete (Ray Tune's ``TuneError``)."""
