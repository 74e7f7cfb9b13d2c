"""Ray's ``ray.tune.examples.pbt_function``: a toy problem whose best learning rate changes
as training goes (a triangle wave over accuracy), so only PBT's schedule converges.

``pbt_function(config)`` is a function trainable: it reads ``config["lr"]`` (and
``checkpoint_interval``, default 1), resumes from ``tune.get_checkpoint()``, and reports
``mean_accuracy``, ``cur_lr``, ``optimal_lr``, ``q_err`` and ``done`` (accuracy over 200).
Run the module as a script (``--smoke-test``) for Ray's PBT sweep over it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
from typing import Any

__all__ = ["pbt_function", "run_tune_pbt"]

_MIDPOINT = 100  # the best lr rises until accuracy reaches this, then falls
_Q_TOLERANCE = 3  # an lr more than this factor off the best one loses accuracy
_NOISE = 2  # the standard deviation of the noise on each step's accuracy


def _optimal_lr(accuracy: float) -> float:
    if accuracy < _MIDPOINT:
        best = 0.01 * accuracy / _MIDPOINT
    else:
        best = 0.01 - 0.01 * (accuracy - _MIDPOINT) / _MIDPOINT
    return min(0.01, max(0.001, best))


def pbt_function(config: dict[str, Any]) -> None:
    """The toy trainable: accuracy grows fastest at the current best lr."""
    from ... import tune

    lr = config["lr"]
    interval = int(config.get("checkpoint_interval", 1))
    accuracy, step = 0.0, 1
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder, open(os.path.join(folder, "state.json")) as f:
            state = json.load(f)
        accuracy, step = state["acc"], state["step"] + 1
    while True:
        optimal = _optimal_lr(accuracy)
        q_err = max(lr, optimal) / min(lr, optimal)
        if q_err < _Q_TOLERANCE:
            accuracy += (1.0 / q_err) * random.random()
        elif lr > optimal:
            accuracy -= (q_err - _Q_TOLERANCE) * random.random()
        accuracy = max(0.0, accuracy + random.gauss(0, _NOISE))
        metrics = {
            "mean_accuracy": accuracy, "cur_lr": lr, "optimal_lr": optimal,
            "q_err": q_err, "done": accuracy > _MIDPOINT * 2,
        }
        if step % interval == 0:
            with tempfile.TemporaryDirectory() as folder:
                with open(os.path.join(folder, "state.json"), "w") as f:
                    json.dump({"acc": accuracy, "step": step}, f)
                tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(folder))
        else:
            tune.report(metrics)
        step += 1


def run_tune_pbt(smoke_test: bool = False) -> Any:
    """Ray's sweep: 8 trials (4 in a smoke test) under PBT, perturbing ``lr``."""
    from ... import tune
    from ..schedulers import PopulationBasedTraining

    perturbation_interval = 4
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=perturbation_interval,
        hyperparam_mutations={
            "lr": tune.uniform(0.0001, 0.02),
            "some_other_factor": [1, 2],
        },
    )
    tuner = tune.Tuner(
        pbt_function,
        param_space={
            "lr": 0.0001, "some_other_factor": 1,
            "checkpoint_interval": perturbation_interval,
        },
        tune_config=tune.TuneConfig(
            scheduler=pbt, metric="mean_accuracy", mode="max",
            num_samples=4 if smoke_test else 8,
        ),
        run_config=tune.RunConfig(
            name="pbt_function_example",
            stop={"training_iteration": 10 if smoke_test else 30},
            failure_config=tune.FailureConfig(fail_fast=True),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=4),
        ),
    )
    results = tuner.fit()
    print("Best hyperparameters found were: ", results.get_best_result().config)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke-test", action="store_true", help="Finish quickly")
    run_tune_pbt(parser.parse_known_args()[0].smoke_test)
