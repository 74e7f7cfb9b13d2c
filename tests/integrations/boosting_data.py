"""What the gradient-boosting tests share: scikit-learn's breast-cancer set (shuffled
once, split 400 / 169), a worker's whole shard as arrays, and the ASHA sweep of
two-worker gangs that both libraries' trainers go through."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.datasets import load_breast_cancer

from actorrt import train, tune
from actorrt.tune.schedulers import ASHAScheduler

ROUNDS = 16  # each sweep trial's boosting rounds: ASHA's max_t


def frame() -> dict[str, Any]:
    x, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    return {"x": x[order], "y": y[order].astype(float)}


def split() -> dict[str, dict[str, Any]]:
    data = frame()
    return {"train": {"x": data["x"][:400], "y": data["y"][:400]},
            "valid": {"x": data["x"][400:], "y": data["y"][400:]}}


def whole_shard(name: str) -> tuple[np.ndarray, np.ndarray]:
    """This worker's shard of dataset ``name`` as (features, labels)."""
    shard = train.get_dataset_shard(name)
    batch = next(shard.iter_batches(batch_size=len(shard)))
    return np.asarray(batch["x"]), np.asarray(batch["y"])


async def sweep_gangs(trainer: Any, knob: str, metric: str, storage: Path) -> Any:
    """Sweep ``trainer``'s learning rate ``knob`` over one strong and two weak values with
    ASHA; check that the weak gangs stopped early and the strong one won; return its
    result (whose checkpoint the caller loads)."""
    grid = await tune.Tuner(
        trainer,
        # One gang at a time fits in 2 CPUs: the strong trial runs first and sets the rungs.
        param_space={"train_loop_config": {knob: tune.grid_search([0.5, 0.001, 0.003])}},
        tune_config=tune.TuneConfig(
            metric=metric, mode="min",
            scheduler=ASHAScheduler(max_t=ROUNDS, grace_period=2, reduction_factor=2),
        ),
        run_config=tune.RunConfig(storage_path=str(storage), name="gangs", verbose=0),
    ).fit_async()
    assert not grid.errors
    rounds = {r.config["train_loop_config"][knob]: r.metrics["training_iteration"]
              for r in grid}
    assert rounds[0.5] == ROUNDS and rounds[0.001] < ROUNDS and rounds[0.003] < ROUNDS, rounds
    best = grid.get_best_result()
    assert best.config["train_loop_config"][knob] == 0.5
    return best


def assert_predicts(predict: Callable[[np.ndarray], np.ndarray]) -> None:
    """``predict`` (features -> probabilities) gets nine in ten held-out rows right."""
    valid = split()["valid"]
    assert ((predict(valid["x"]) > 0.5) == valid["y"]).mean() > 0.9
