"""Seed points 1 and 2: how many trials run at once is a division.

    python examples/tune_default_resources.py

Each trial reserves 1 CPU unless told otherwise, so on 4 CPUs a sweep of 8 trials runs 4 at
a time; the others wait in the broker's queue as resource requests. Ask for more per trial
with ``tune.with_resources`` and fewer run at once: ``{"cpu": 2}`` gives 2, ``{"cpu": 4}``
gives 1.
"""

from __future__ import annotations

import tempfile
import time
from typing import Any

from _meter import Meter  # counts trials running at once (examples/_meter.py)

import actorrt
from actorrt import tune


def trainable(config: dict[str, Any]) -> None:
    """A stand-in for training: a little work between the meter's two calls."""
    meter = config["meter"]
    actorrt.get(meter.enter())
    time.sleep(0.1)
    actorrt.get(meter.leave())
    tune.report({"loss": (config["lr"] - 0.01) ** 2})


def sweep(trainable: Any, per_trial_cpus: float, num_samples: int, storage: str) -> None:
    cpus = actorrt.cluster_resources()["CPU"]
    expected = int(cpus // per_trial_cpus)  # the division of seed point 1
    meter = actorrt.get(Meter.spawn(hold=expected, total=num_samples))
    results = tune.Tuner(
        trainable,
        param_space={"lr": tune.loguniform(1e-4, 1e-1), "meter": meter},
        tune_config=tune.TuneConfig(num_samples=num_samples),
        run_config=tune.RunConfig(storage_path=storage, verbose=0),
    ).fit()
    peak, waiting = actorrt.get(meter.report())
    print(f"{per_trial_cpus:g} CPU per trial on {cpus:g} CPUs: {len(results)} trials, "
          f"{peak} at once (expected {expected}), {waiting} waiting for resources then")


def main() -> None:
    actorrt.init(num_cpus=4)  # declare 4 CPUs, whatever this machine has
    print("cluster_resources():", actorrt.cluster_resources())
    with tempfile.TemporaryDirectory() as storage:
        sweep(trainable, 1, 8, storage)  # no with_resources: the default, {"CPU": 1}
        sweep(tune.with_resources(trainable, {"cpu": 2}), 2, 4, storage)
        sweep(tune.with_resources(trainable, {"cpu": 4}), 4, 2, storage)
    actorrt.shutdown()


if __name__ == "__main__":
    main()
