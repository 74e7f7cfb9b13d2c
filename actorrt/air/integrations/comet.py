"""Ray's ``ray.air.integrations.comet``: not provided here.

``CometLoggerCallback`` exists so a ported script fails where it builds one, with what to
use instead, rather than at its import.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CometLoggerCallback"]


class CometLoggerCallback:
    """Ray's Comet logger: not provided (building one raises ``NotImplementedError``).

    Raises:
        NotImplementedError: always; use ``MLflowLoggerCallback`` or
            ``WandbLoggerCallback`` (``actorrt.air.integrations``), or write a
            ``tune.logger.LoggerCallback`` that calls ``comet_ml`` (docs/porting.md).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "actorrt does not have Ray's CometLoggerCallback (ray.air.integrations.comet): "
            "use actorrt.air.integrations.mlflow.MLflowLoggerCallback or "
            "actorrt.air.integrations.wandb.WandbLoggerCallback, or write a "
            "tune.logger.LoggerCallback that calls comet_ml; see docs/porting.md"
        )
