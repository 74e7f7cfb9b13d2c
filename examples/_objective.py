"""The objective of Ray Tune's search-algorithm examples, as the examples here use it.

A loss that falls with more steps and a wider ``width``, and grows with ``height``; the
activation adds a small offset. Ray's examples sleep 0.1 s per step; these take 0.01 s.
"""

from __future__ import annotations

import time
from typing import Any

from actorrt import tune


def evaluate(step: int, width: float, height: float, activation: str = "relu") -> float:
    offset = 0.0 if activation == "relu" else 1.0
    return 1.0 / (0.1 + width * step / 100) + height * 0.1 + offset


def easy_objective(config: dict[str, Any]) -> None:
    for step in range(config["steps"]):
        loss = evaluate(step, config["width"], config["height"], config.get("activation", "relu"))
        tune.report({"iterations": step, "mean_loss": loss})
        time.sleep(0.01)


def random_best(space: dict[str, Any], samples: int, seed: int = 0) -> float:
    """The best final loss random search finds with the same number of trials (computed
    directly: the objective is deterministic)."""
    import random

    rng = random.Random(seed)
    best = float("inf")
    for _ in range(samples):
        config = {k: v.sample(rng) if hasattr(v, "sample") else v for k, v in space.items()}
        best = min(best, evaluate(config["steps"] - 1, config["width"], config["height"],
                                  config.get("activation", "relu")))
    return best
