"""``XGBoostConfig`` and the backend that joins every worker to XGBoost's collective.

Before the training function runs, rank 0 starts XGBoost's ``RabitTracker`` on its node's
address and sends the tracker's address to the other ranks (a ``broadcast_from_rank_zero``);
each rank then enters ``xgboost.collective`` with its rank as task id, so ``xgboost.train``
in the function trains one model over every worker's shard. Afterwards each rank leaves the
collective and rank 0 waits for the tracker to end.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from ..backend import BackendConfig, WorkerBackend, WorkerSetup
from ..collective import broadcast_from_rank_zero

__all__ = ["XGBoostConfig"]

logger = logging.getLogger("actorrt.train")


@dataclass(frozen=True)
class XGBoostConfig(BackendConfig):
    """How ``XGBoostTrainer`` sets up XGBoost's collective (Ray's ``XGBoostConfig``).

    Args:
        xgboost_communicator: ``"rabit"`` (XGBoost's tracker; the only one on CPU).
        timeout_s: how long the tracker waits for every worker to join and finish.
    """

    xgboost_communicator: str = "rabit"
    timeout_s: int = 1800

    def __post_init__(self) -> None:
        if self.xgboost_communicator != "rabit":
            raise ValueError(
                f"xgboost_communicator must be 'rabit', got {self.xgboost_communicator!r}"
            )
        t = self.timeout_s
        if isinstance(t, bool) or not isinstance(t, int) or t <= 0:
            raise ValueError(f"timeout_s must be a positive whole number of seconds, got {t!r}")


class XGBoostBackend(WorkerBackend):
    """Joins the gang to one XGBoost collective around the training function."""

    def __init__(self, config: XGBoostConfig) -> None:
        self.config = config
        self._tracker: Any = None
        self._joined = False

    def on_start(self, setup: WorkerSetup) -> None:
        from xgboost import collective
        from xgboost.tracker import RabitTracker

        args: dict[str, Any] | None = None
        if setup.world_rank == 0:
            tracker = RabitTracker(
                n_workers=setup.world_size, host_ip=setup.master_addr or "127.0.0.1",
                sortby="task", timeout=self.config.timeout_s,
            )
            tracker.start()
            self._tracker = tracker
            args = dict(tracker.worker_args())
        args = broadcast_from_rank_zero(args)
        assert args is not None
        collective.init(**args, dmlc_task_id=str(setup.world_rank))
        self._joined = True

    def on_shutdown(self) -> None:
        from xgboost import collective

        if self._joined:
            self._joined = False
            collective.finalize()
        tracker, self._tracker = self._tracker, None
        if tracker is not None:
            # After a rank failed, the tracker waits for ranks that will never say
            # goodbye: it ends on a thread of its own, so the failure is reported at once.
            threading.Thread(target=_end_tracker, args=(tracker, self.config.timeout_s),
                             name="actorrt-xgboost-tracker", daemon=True).start()


def _end_tracker(tracker: Any, timeout_s: int) -> None:
    try:
        tracker.wait_for(timeout_s)
    except Exception as exc:  # the tracker timed out: the run already ended
        logger.debug("xgboost: the tracker ended with %s", exc)
    finally:
        tracker.free()
