"""Ray Tune's HyperOpt example, ported by changing its imports.

    python examples/tune_hyperopt.py      (needs pip install 'actorrt[hyperopt]')

TPE searches width, height and the activation, with two known-good points tried first and at
most two trials at once; the best config is compared with random search's on the same budget.
"""

from __future__ import annotations

import os
import tempfile

from _objective import easy_objective, random_best

import actorrt as ray
from actorrt import tune
from actorrt.tune.search import ConcurrencyLimiter
from actorrt.tune.search.hyperopt import HyperOptSearch

SAMPLES = 24


def main() -> None:
    ray.init(num_cpus=2)
    space = {
        "steps": 10,
        "width": tune.uniform(0, 20),
        "height": tune.uniform(-100, 100),
        "activation": tune.choice(["relu", "tanh"]),
    }
    current_best_params = [
        {"width": 1, "height": 2, "activation": "relu"},
        {"width": 4, "height": 2, "activation": "relu"},
    ]
    algo = HyperOptSearch(
        points_to_evaluate=current_best_params, n_initial_points=8, random_state_seed=1
    )
    algo = ConcurrencyLimiter(algo, max_concurrent=2)
    results = tune.Tuner(
        easy_objective,
        tune_config=tune.TuneConfig(
            metric="mean_loss", mode="min", search_alg=algo, num_samples=SAMPLES
        ),
        run_config=tune.RunConfig(
            storage_path=os.path.join(tempfile.gettempdir(), "actorrt_examples"), verbose=0
        ),
        param_space=space,
    ).fit()
    best = results.get_best_result()
    first = sorted(results, key=lambda r: r.metrics["trial_id"])[:2]
    print(f"{len(results)} trials, {len(results.errors)} errors")
    print("first trials ran the given points: "
          f"{[(r.config['width'], r.config['height']) for r in first]}")
    print(f"best mean_loss {best.metrics['mean_loss']:.3f} with width="
          f"{best.config['width']:.2f}, height={best.config['height']:.2f}, "
          f"activation={best.config['activation']}")
    print(f"random search's best with {SAMPLES} trials: {random_best(space, SAMPLES):.3f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
