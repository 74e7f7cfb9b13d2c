"""Ray Tune's Ax example, ported by changing its imports.

    python examples/tune_ax.py [--smoke-test]      (needs pip install 'actorrt[ax]')

Ax searches the six inputs of the Hartmann6 function, with a parameter constraint and an
outcome constraint on the inputs' L2 norm, up to four trials at a time, while an
AsyncHyperBandScheduler stops weak trials early. With --smoke-test (10 trials) every trial is
one of Ax's Sobol start; the full run (50) goes on to BoTorch's Gaussian process.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

import numpy as np

import actorrt as ray
from actorrt import tune
from actorrt.tune.schedulers import AsyncHyperBandScheduler
from actorrt.tune.search import ConcurrencyLimiter
from actorrt.tune.search.ax import AxSearch

ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
A = np.array([
    [10, 3, 17, 3.5, 1.7, 8],
    [0.05, 10, 17, 0.1, 8, 14],
    [3, 3.5, 1.7, 10, 17, 8],
    [17, 8, 0.05, 10, 0.1, 14],
])
P = 1e-4 * np.array([
    [1312, 1696, 5569, 124, 8283, 5886],
    [2329, 4135, 8307, 3736, 1004, 9991],
    [2348, 1451, 3522, 2883, 3047, 6650],
    [4047, 8828, 8732, 5743, 1091, 381],
])


def hartmann6(x: np.ndarray) -> float:
    """The 6-D Hartmann function: minimum about -3.32 in the unit cube."""
    return float(-(ALPHA * np.exp(-(A * (x - P) ** 2).sum(axis=1))).sum())


def easy_objective(config: dict[str, Any]) -> None:
    x = np.array([config[f"x{i + 1}"] for i in range(6)])
    for i in range(config["iterations"]):
        tune.report({
            "timesteps_total": i, "hartmann6": hartmann6(x),
            "l2norm": float(np.sqrt((x**2).sum())),
        })
        time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke-test", action="store_true", help="Finish quickly for testing")
    args = parser.parse_args()
    ray.init(num_cpus=2)
    algo = AxSearch(
        parameter_constraints=["x1 + x2 <= 2.0"],  # optional
        outcome_constraints=["l2norm <= 1.25"],  # optional
    )
    algo = ConcurrencyLimiter(algo, max_concurrent=4)
    space = {"iterations": 100, **{f"x{i + 1}": tune.uniform(0.0, 1.0) for i in range(6)}}
    results = tune.Tuner(
        easy_objective,
        tune_config=tune.TuneConfig(
            metric="hartmann6", mode="min", search_alg=algo,
            scheduler=AsyncHyperBandScheduler(),
            num_samples=10 if args.smoke_test else 50,
        ),
        run_config=tune.RunConfig(
            name="ax", stop={"timesteps_total": 100}, verbose=0,
            storage_path=os.path.join(tempfile.gettempdir(), "actorrt_examples"),
        ),
        param_space=space,
    ).fit()
    best = results.get_best_result()
    print(f"{len(results)} trials, {len(results.errors)} errors")
    print(f"best hartmann6 {best.metrics['hartmann6']:.3f} (the minimum is -3.322)")
    print("Best hyperparameters found were: ",
          {k: round(v, 3) for k, v in best.config.items() if k.startswith("x")})
    ray.shutdown()


if __name__ == "__main__":
    main()
