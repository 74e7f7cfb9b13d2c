"""A toy class trainable for examples and tests (Ray's ``ray.tune.utils.mock_trainable``)."""

from __future__ import annotations

import json
import math
import os
from typing import Any

from ..registry import register_trainable
from ..trainable.trainable import Trainable

__all__ = ["MOCK_TRAINABLE_NAME", "MyTrainableClass", "register_mock_trainable"]

MOCK_TRAINABLE_NAME = "mock_trainable"


class MyTrainableClass(Trainable):
    """A trainable whose reward follows ``height * tanh(step / width)``, as Ray's.

    Config: ``width`` (how slowly it rises, default 1) and ``height`` (where it levels
    off, default 1). Each ``step`` reports ``episode_reward_mean``; a checkpoint is a
    JSON file holding the step count, restored by ``load_checkpoint``.
    """

    def setup(self, config: dict[str, Any]) -> None:
        self.timestep = 0

    def step(self) -> dict[str, Any]:
        self.timestep += 1
        value = math.tanh(float(self.timestep) / self.config.get("width", 1))
        return {"episode_reward_mean": value * self.config.get("height", 1)}

    def save_checkpoint(self, checkpoint_dir: str) -> str:
        path = os.path.join(checkpoint_dir, "checkpoint")
        with open(path, "w") as f:
            json.dump({"timestep": self.timestep}, f)
        return path

    def load_checkpoint(self, checkpoint: dict[str, Any] | str) -> None:
        if not isinstance(checkpoint, str):
            raise TypeError(f"MyTrainableClass restores from a file path, got {checkpoint!r}")
        with open(checkpoint) as f:
            self.timestep = int(json.load(f)["timestep"])


def register_mock_trainable() -> None:
    """Register :class:`MyTrainableClass` as ``"mock_trainable"`` (Ray's helper)."""
    register_trainable(MOCK_TRAINABLE_NAME, MyTrainableClass)
