"""Ray Tune's multi-objective Optuna example, ported by changing its imports.

    python examples/tune_optuna_multi_objective.py     (needs pip install 'actorrt[optuna]')

Two objectives at once: minimise ``loss`` and maximise ``gain``; Optuna keeps the Pareto
front of the trials (``searcher.study.best_trials``).
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import actorrt as ray
from actorrt import tune
from actorrt.tune.search import ConcurrencyLimiter
from actorrt.tune.search.optuna import OptunaSearch


def evaluate(step: int, width: float, height: float) -> float:
    return 1.0 / (0.1 + width * step / 100) + height * 0.1


def objective(config: dict[str, Any]) -> None:
    for step in range(config["steps"]):
        loss = evaluate(step, config["width"], config["height"])
        gain = config["width"] * step / 100  # grows with width, as the loss falls
        tune.report({"iterations": step, "loss": loss, "gain": gain})
        time.sleep(0.01)


def main() -> None:
    ray.init(num_cpus=2)
    searcher = OptunaSearch(metric=["loss", "gain"], mode=["min", "max"], seed=0)
    results = tune.Tuner(
        objective,
        tune_config=tune.TuneConfig(
            search_alg=ConcurrencyLimiter(searcher, max_concurrent=2), num_samples=12
        ),
        run_config=tune.RunConfig(
            storage_path=os.path.join(tempfile.gettempdir(), "actorrt_examples"), verbose=0
        ),
        param_space={"steps": 10, "width": tune.uniform(0, 20),
                     "height": tune.uniform(-100, 100)},
    ).fit()
    front = searcher.study.best_trials
    print(f"{len(results)} trials, {len(results.errors)} errors")
    print(f"Pareto front: {len(front)} trial(s), e.g. loss={front[0].values[0]:.3f} "
          f"gain={front[0].values[1]:.3f}")
    best = results.get_best_result(metric="loss", mode="min")
    print(f"lowest loss {best.metrics['loss']:.3f} with width={best.config['width']:.2f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
