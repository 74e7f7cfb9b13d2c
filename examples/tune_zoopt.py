"""Ray Tune's ZOOpt example, ported by changing its imports.

    python examples/tune_zoopt.py         (needs pip install 'actorrt[zoopt]')

ZOOpt's sequential RACOS searches width, height and the activation with a budget of 20
trials, two at a time. ZOOpt ends the search early when it cannot find a point it has not
tried (its suggest() says "FINISHED"), so a sweep may run fewer trials than its budget, as
under Ray.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
from _objective import easy_objective, random_best

import actorrt as ray
from actorrt import tune
from actorrt.tune.search.zoopt import ZOOptSearch

SAMPLES = 20


def main() -> None:
    ray.init(num_cpus=2)
    np.random.seed(0)  # ZOOpt draws from numpy's global random state
    space = {
        "steps": 10,
        "width": tune.uniform(0, 20),
        "height": tune.uniform(-100, 100),
        "activation": tune.choice(["relu", "tanh"]),
    }
    zoopt_search = ZOOptSearch(algo="Asracos", budget=SAMPLES, parallel_num=2)
    results = tune.Tuner(
        easy_objective,
        tune_config=tune.TuneConfig(
            metric="mean_loss", mode="min", search_alg=zoopt_search, num_samples=SAMPLES
        ),
        run_config=tune.RunConfig(
            storage_path=os.path.join(tempfile.gettempdir(), "actorrt_examples"), verbose=0
        ),
        param_space=space,
    ).fit()
    best = results.get_best_result()
    print(f"{len(results)} trials of a budget of {SAMPLES}, {len(results.errors)} errors")
    print(f"best mean_loss {best.metrics['mean_loss']:.3f} with width="
          f"{best.config['width']:.2f}, height={best.config['height']:.2f}, "
          f"activation={best.config['activation']}")
    print(f"random search's best with {SAMPLES} trials: {random_best(space, SAMPLES):.3f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
