"""Ray Tune's PB2 example, ported by changing its imports.

    python examples/tune_pb2.py           (needs pip install 'actorrt[pb2]')

A toy with a known best schedule: the score grows fastest when ``lr`` is close to an optimum
that moves during training. PB2 restarts the weakest trials from the best ones' checkpoints,
with an ``lr`` its Gaussian-process bandit picks within ``hyperparam_bounds``.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

import actorrt as ray
from actorrt import tune
from actorrt.tune.schedulers.pb2 import PB2


def gain(step: int, lr: float) -> float:
    optimal_lr = 0.6 if step < 10 else 0.2  # the best lr moves
    return max(0.0, 1.0 - abs(lr - optimal_lr) * 2) * 0.1


def pbt_function(config: dict[str, Any]) -> None:
    lr = config["lr"]
    accuracy, start = 0.0, 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            accuracy, start = json.load(f)
    for step in range(start + 1, 1000):
        accuracy += gain(step, lr)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump([accuracy, step], f)
            tune.report({"mean_accuracy": accuracy, "lr": lr},
                        checkpoint=tune.Checkpoint.from_directory(d))
        time.sleep(0.01)


def main() -> None:
    ray.init(num_cpus=2)
    lrs = [0.0001, 0.01, 0.95, 1.0]
    pb2 = PB2(
        time_attr="training_iteration",
        perturbation_interval=4,
        hyperparam_bounds={"lr": [0.0001, 1.0]},
        seed=0,
    )
    results = tune.Tuner(
        pbt_function,
        param_space={"lr": tune.grid_search(lrs)},
        tune_config=tune.TuneConfig(metric="mean_accuracy", mode="max", scheduler=pb2),
        run_config=tune.RunConfig(
            storage_path=os.path.join(tempfile.gettempdir(), "actorrt_examples"), verbose=0,
            stop={"training_iteration": 20},
        ),
    ).fit()
    best = results.get_best_result()
    print(f"{len(results)} trials, {len(results.errors)} errors, {pb2.num_exploits} exploits")
    fixed = max(sum(gain(step, lr) for step in range(1, 21)) for lr in lrs)
    print(f"best mean_accuracy {best.metrics['mean_accuracy']:.2f} (lr now "
          f"{best.config['lr']:.3f}); the best starting lr, kept, reaches {fixed:.2f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
