"""The errors of ``actorrt.tune`` itself, at the bottom of the package: every tune module
may raise them, and this module imports nothing of tune."""

from __future__ import annotations

import actorrt

__all__ = ["TuneError"]


class TuneError(actorrt.ActorrtError):
    """An experiment run by ``tune.run`` did not complete (Ray Tune's ``TuneError``).

    An ``Exception``, as Ray's is, and a branch of ``actorrt.ActorrtError``, the root of
    the package's one exception tree."""
