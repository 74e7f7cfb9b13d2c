"""Ray Tune's Nevergrad example, ported by changing its imports.

    python examples/tune_nevergrad.py     (needs pip install 'actorrt[nevergrad]')

Nevergrad's (1+1) evolution strategy searches width, height and the activation.
"""

from __future__ import annotations

import os
import tempfile

import nevergrad as ng
from _objective import easy_objective, random_best

import actorrt as ray
from actorrt import tune
from actorrt.tune.search import ConcurrencyLimiter
from actorrt.tune.search.nevergrad import NevergradSearch

SAMPLES = 24


def main() -> None:
    ray.init(num_cpus=2)
    space = {
        "steps": 10,
        "width": tune.uniform(0, 20),
        "height": tune.uniform(-100, 100),
        "activation": tune.choice(["relu", "tanh"]),
    }
    algo = NevergradSearch(
        optimizer=ng.optimizers.OnePlusOne,
        points_to_evaluate=[{"width": 10.0, "height": 0.0, "activation": "relu"}],
    )
    algo = ConcurrencyLimiter(algo, max_concurrent=2)
    results = tune.Tuner(
        easy_objective,
        tune_config=tune.TuneConfig(
            metric="mean_loss", mode="min", search_alg=algo, num_samples=SAMPLES, seed=3
        ),
        run_config=tune.RunConfig(
            storage_path=os.path.join(tempfile.gettempdir(), "actorrt_examples"), verbose=0
        ),
        param_space=space,
    ).fit()
    best = results.get_best_result()
    print(f"{len(results)} trials, {len(results.errors)} errors")
    print(f"best mean_loss {best.metrics['mean_loss']:.3f} with width="
          f"{best.config['width']:.2f}, height={best.config['height']:.2f}, "
          f"activation={best.config['activation']}")
    print(f"random search's best with {SAMPLES} trials: {random_best(space, SAMPLES):.3f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
