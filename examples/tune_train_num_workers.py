"""Seed point 12 (and 15): a Tune sweep whose trials each run a Train job, over num_workers.

    python examples/tune_train_num_workers.py

In Ray, a trial is only the Train driver: Tune's per-trial resources do not count the Train
workers, so trials start, hold a CPU, and pile up waiting for workers that other trials hold
(hence the seed's advice to compute ``max_concurrent_trials`` by hand). Here the trial is
declared with ``tune.with_resources(driver, scaling)``, where ``scaling(config)`` returns
the trial's ``ScalingConfig`` (any callable ``config -> ScalingConfig`` works, a lambda
too): each trial reserves ``[driver bundle] + [worker bundle] * num_workers`` as one gang, the
``TorchTrainer`` it runs places its workers in those bundles, and a trial starts only when
its whole gang fits. No arithmetic, no idle drivers.

The training itself is tiny on purpose: a linear model fitted with DDP (gloo, on CPU).
"""

from __future__ import annotations

import tempfile
from typing import Any

import torch

import actorrt
from actorrt import train, tune
from actorrt.train.torch import TorchTrainer, prepare_model


def train_loop(config: dict[str, Any]) -> None:
    """Runs on every Train worker; rank 0's reports are the run's results."""
    torch.manual_seed(0)
    x = torch.randn(256, 4)
    y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0]) + 0.1
    rank = train.get_context().get_world_rank()
    size = train.get_context().get_world_size()
    x, y = x[rank::size], y[rank::size]  # this worker's shard of the data
    model = prepare_model(torch.nn.Linear(4, 1))  # DDP when there is more than one worker
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for epoch in range(20):
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        optimizer.zero_grad()
        loss.backward()  # DDP averages the gradients across workers here
        optimizer.step()
        train.report({"epoch": epoch, "loss": loss.item(), "world_size": size})


def scaling(config: dict[str, Any]) -> train.ScalingConfig:
    """One place that says what a trial needs: used to reserve, and to run."""
    return train.ScalingConfig(num_workers=config["num_workers"])


def driver(config: dict[str, Any]) -> None:
    """The trial: runs one Train job in the gang the trial reserved.

    Each of rank 0's ``train.report`` calls is also a result of this trial, so schedulers
    (ASHA, say) and stop criteria see every epoch and can stop the trial mid-run.
    """
    TorchTrainer(
        train_loop,
        train_loop_config={"lr": config["lr"]},
        scaling_config=scaling(config),
    ).fit()  # a failed run raises, and the trial errors


def main() -> None:
    actorrt.init(num_cpus=5)  # a trial reserves its workers' CPUs (1 or 2): both fit
    print("a trial with num_workers=2 reserves",
          scaling({"num_workers": 2}).as_placement_group_factory().bundles)
    with tempfile.TemporaryDirectory() as storage:
        results = tune.Tuner(
            tune.with_resources(driver, scaling),  # a callable: config -> ScalingConfig
            param_space={
                "num_workers": tune.grid_search([1, 2]),
                "lr": 0.1,
            },
            run_config=tune.RunConfig(storage_path=storage, verbose=0),
        ).fit()
        for result in results:
            if result.error is not None:
                print(f"num_workers={result.config['num_workers']}: {result.error!r}")
                continue
            print(f"num_workers={result.config['num_workers']}: "
                  f"world_size={result.metrics['world_size']}, "
                  f"{result.metrics['training_iteration']} results, "
                  f"final loss {result.metrics['loss']:.3f}")
        print(f"{results.num_terminated} trials finished, {results.num_errors} errored")
    actorrt.shutdown()


if __name__ == "__main__":
    main()
