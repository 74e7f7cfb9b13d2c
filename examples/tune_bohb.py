"""Ray Tune's BOHB example, ported by changing its imports.

    python examples/tune_bohb.py          (needs pip install 'actorrt[bohb]')

TuneBOHB proposes configs from its model; HyperBandForBOHB runs them in brackets, pausing
each trial at its bracket's milestone (its actor stops; it resumes from its checkpoint) and
keeping the best third at each halving. The trainable saves and loads its step in checkpoints.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

from _objective import evaluate

import actorrt as ray
from actorrt import tune
from actorrt.tune.schedulers import HyperBandForBOHB
from actorrt.tune.search.bohb import TuneBOHB


def trainable(config: dict[str, Any]) -> None:
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "step.json")) as f:
            start = json.load(f)["step"] + 1
    for step in range(start, 100):
        loss = evaluate(step, config["width"], config["height"], config["activation"])
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step.json"), "w") as f:
                json.dump({"step": step}, f)
            tune.report({"mean_loss": loss}, checkpoint=tune.Checkpoint.from_directory(d))
        time.sleep(0.01)


def main() -> None:
    ray.init(num_cpus=2)
    space = {
        "width": tune.uniform(0, 20),
        "height": tune.uniform(-100, 100),
        "activation": tune.choice(["relu", "tanh"]),
    }
    bohb_hyperband = HyperBandForBOHB(time_attr="training_iteration", max_t=9,
                                      reduction_factor=3)
    bohb_search = TuneBOHB(seed=1)
    results = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            metric="mean_loss", mode="min", scheduler=bohb_hyperband,
            search_alg=bohb_search, num_samples=12,
        ),
        run_config=tune.RunConfig(
            storage_path=os.path.join(tempfile.gettempdir(), "actorrt_examples"), verbose=0
        ),
        param_space=space,
    ).fit()
    iterations = sorted(r.metrics["training_iteration"] for r in results)
    best = results.get_best_result()
    print(f"{len(results)} trials, {len(results.errors)} errors")
    print(f"iterations each trial ran: {iterations}")
    print(f"best mean_loss {best.metrics['mean_loss']:.3f} with width="
          f"{best.config['width']:.2f}, height={best.config['height']:.2f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
