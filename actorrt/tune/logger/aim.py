"""Ray's ``ray.tune.logger.aim``: not provided here.

``AimLoggerCallback`` exists so a ported script fails where it builds one, with what to use
instead, rather than at its import.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AimLoggerCallback"]


class AimLoggerCallback:
    """Ray's Aim logger: not provided (building one raises ``NotImplementedError``).

    Raises:
        NotImplementedError: always; use ``TBXLoggerCallback`` (Aim reads TensorBoard
            logs with ``aim convert tensorboard``), ``actorrt.air.integrations``'
            MLflow or W&B callbacks, or write a ``LoggerCallback`` that calls ``aim``
            (docs/porting.md).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "actorrt does not have Ray's AimLoggerCallback (ray.tune.logger.aim): use "
            "tune.logger.TBXLoggerCallback (aim converts TensorBoard logs: `aim convert "
            "tensorboard`), actorrt.air.integrations.mlflow / .wandb, or write a "
            "tune.logger.LoggerCallback that calls aim; see docs/porting.md"
        )
