"""The Tune trial a trainer's ``fit()`` runs in, if any: where rank 0's results also go.

``train`` does not import ``tune`` (the layering in actorrt/__init__.py), and ``tune`` knows
trainers only by the shape of ``ScalingConfig.as_placement_group_factory()``. The two meet
by module name: when the process has imported Tune's trial side and a trial is running in it
(the trial's driver called ``fit()``), the trainer forwards each of rank 0's reports to that
trial's session through the small protocol below, and stops the whole gang when Tune's
answer is "stop". A process that never imported Tune has no trial, and the lookup costs a
dict read.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Protocol, cast

TUNE_SESSION_MODULE = "actorrt.tune._session"


class TuneTrial(Protocol):
    """What a trainer uses of the running Tune trial (its session object)."""

    @property
    def trial_dir(self) -> str:
        """The trial's folder (the default home of the trainer's own run folder)."""
        ...

    @property
    def restore_checkpoint(self) -> str | None:
        """The checkpoint the trial's attempt started from (a retry's, or PBT's)."""
        ...

    async def report_async(self, metrics: dict[str, Any], checkpoint_dir: str | None) -> bool:
        """Record one result as the trial's; ``False`` when Tune says stop. Runs on the
        process's event loop without blocking it."""
        ...

    def report(self, metrics: Mapping[str, Any], checkpoint: Any) -> None:
        """``train.report`` called by a Tune function trainable (Ray 2.7-2.40's spelling):
        report on the trial's thread as ``tune.report`` does (raises when told to stop)."""
        ...

    @property
    def checkpoint(self) -> Any:
        """The trial's latest checkpoint (an object with ``path``), or ``None``."""
        ...

    @property
    def context(self) -> Any:
        """The trial's ``tune.get_context()``."""
        ...

    def stop_signal(self) -> BaseException:
        """What ``fit()`` raises, after ending the gang, once Tune said stop."""
        ...


def current_trial() -> TuneTrial | None:
    """The Tune trial running in this process, or ``None`` (standalone, or no trial now)."""
    module = sys.modules.get(TUNE_SESSION_MODULE)
    if module is None:
        return None
    active = getattr(module, "active_session", None)
    if active is None:
        return None
    return cast("TuneTrial | None", active())
