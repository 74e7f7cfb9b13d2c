"""Ray's ``ray.tune.examples.async_hyperband_example``: ``MyTrainableClass`` under ASHA.

Run it as a script (``--smoke-test`` for a short run) to tune the toy trainable with
``AsyncHyperBandScheduler``; programs import ``MyTrainableClass`` from here.
"""

from __future__ import annotations

import argparse

from ..utils.mock_trainable import MyTrainableClass

__all__ = ["MyTrainableClass"]


def main(smoke_test: bool = False) -> None:
    """Tune ``MyTrainableClass``'s width and height with ASHA and print the best config."""
    from ... import tune
    from ..schedulers import AsyncHyperBandScheduler

    scheduler = AsyncHyperBandScheduler(grace_period=5, max_t=100)
    tuner = tune.Tuner(
        MyTrainableClass,
        param_space={"width": tune.randint(10, 100), "height": tune.uniform(10, 100)},
        tune_config=tune.TuneConfig(
            metric="episode_reward_mean", mode="max", scheduler=scheduler,
            num_samples=4 if smoke_test else 20,
        ),
        run_config=tune.RunConfig(stop={"training_iteration": 1 if smoke_test else 100}),
    )
    print("Best hyperparameters found were: ", tuner.fit().get_best_result().config)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke-test", action="store_true", help="Finish quickly")
    main(parser.parse_args().smoke_test)
