"""``prepare_trainer``: checks a ``pl.Trainer`` is set up to run in a Train worker gang."""

from __future__ import annotations

from ._pl import pl
from ._strategies import (
    RayDDPStrategy,
    RayDeepSpeedStrategy,
    RayFSDPStrategy,
    RayLightningEnvironment,
)

_STRATEGIES = (RayDDPStrategy, RayFSDPStrategy, RayDeepSpeedStrategy)


def prepare_trainer(trainer: pl.Trainer) -> pl.Trainer:
    """Check that ``trainer`` runs in the gang, and return it (Ray's ``prepare_trainer``).

    Call it in the training function on the ``pl.Trainer`` built with
    ``strategy=RayDDPStrategy()`` (or ``RayFSDPStrategy()``, ``RayDeepSpeedStrategy()``) and
    ``plugins=[RayLightningEnvironment()]``.

    Raises:
        TypeError: ``trainer`` is not a ``pl.Trainer``.
        RuntimeError: its strategy is not one of the Ray strategies (or a subclass), or
            its cluster environment is not ``RayLightningEnvironment``; without them
            Lightning would train alone on each worker, or try to launch processes.
    """
    if not isinstance(trainer, pl.Trainer):
        raise TypeError(
            f"prepare_trainer takes a {pl.__name__}.Trainer, got {trainer!r}; build the "
            f"Trainer and LightningModule from {pl.__name__}, which actorrt.train.lightning "
            "uses"
        )
    strategy = trainer.strategy
    if not isinstance(strategy, _STRATEGIES):
        raise RuntimeError(
            f"the Trainer's strategy is {type(strategy).__name__}; to train on the workers "
            "of a TorchTrainer it must be one of "
            f"{[cls.__name__ for cls in _STRATEGIES]} (or a subclass): "
            "pl.Trainer(strategy=RayDDPStrategy(), plugins=[RayLightningEnvironment()], ...)"
        )
    environment = getattr(strategy, "cluster_environment", None)
    if environment is not None and not isinstance(environment, RayLightningEnvironment):
        raise RuntimeError(
            f"the Trainer's cluster environment is {type(environment).__name__}; it must be "
            "actorrt.train.lightning.RayLightningEnvironment: "
            "pl.Trainer(..., plugins=[RayLightningEnvironment()])"
        )
    return trainer
