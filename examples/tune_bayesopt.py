"""Ray Tune's BayesOpt example, ported by changing its imports.

    python examples/tune_bayesopt.py      (needs pip install 'actorrt[bayesopt]')

A Gaussian process searches width and height (floats only, as bayesian-optimization
requires), one trial at a time, after a few random ones.
"""

from __future__ import annotations

import os
import tempfile

from _objective import easy_objective, random_best

import actorrt as ray
from actorrt import tune
from actorrt.tune.search import ConcurrencyLimiter
from actorrt.tune.search.bayesopt import BayesOptSearch

SAMPLES = 12


def main() -> None:
    ray.init(num_cpus=2)
    space = {"steps": 10, "width": tune.uniform(0, 20), "height": tune.uniform(-100, 100)}
    algo = BayesOptSearch(utility_kwargs={"kind": "ucb", "kappa": 2.5, "xi": 0.0},
                          random_search_steps=4, random_state=1)
    algo = ConcurrencyLimiter(algo, max_concurrent=1)
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
    print(f"{len(results)} trials, {len(results.errors)} errors")
    print(f"best mean_loss {best.metrics['mean_loss']:.3f} with width="
          f"{best.config['width']:.2f}, height={best.config['height']:.2f}")
    print(f"random search's best with {SAMPLES} trials: {random_best(space, SAMPLES):.3f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
