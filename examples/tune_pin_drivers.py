"""Seed points 13 and 16: pin trial drivers with a custom resource; too big is an error.

    python examples/tune_pin_drivers.py

In a cluster with preemptible nodes you want trial drivers on the safe ones. Ray's recipe:
the safe nodes declare a custom resource (``TRAIN_DRIVER_RESOURCE``) and each driver asks
for a unit of it. Here the runtime declares 2 units, so at most 2 drivers run at once even
though the 8 CPUs would allow 8. A Train driver asks for it through
``ScalingConfig(trainer_resources={"CPU": 1, "TRAIN_DRIVER_RESOURCE": 1})``.

A request no node can ever hold (3 units when only 2 exist) fails the trial at once with
``InfeasibleResourceError``, naming what was asked and what exists; it does not wait
forever for a node that will not come (there is no autoscaler here).
"""

from __future__ import annotations

import tempfile
import time
from typing import Any

from _meter import Meter  # counts trials running at once (examples/_meter.py)

import actorrt
from actorrt import train, tune


def trainable(config: dict[str, Any]) -> None:
    if "meter" in config:
        actorrt.get(config["meter"].enter())
        time.sleep(0.1)
        actorrt.get(config["meter"].leave())
    tune.report({"score": 1.0})


def main() -> None:
    actorrt.init(num_cpus=8, resources={"TRAIN_DRIVER_RESOURCE": 2})
    print("cluster_resources():", {k: v for k, v in actorrt.cluster_resources().items()
                                   if k != "memory"})
    with tempfile.TemporaryDirectory() as storage:
        meter = actorrt.get(Meter.spawn(hold=2, total=6))
        tune.Tuner(
            tune.with_resources(trainable, {"cpu": 1, "TRAIN_DRIVER_RESOURCE": 1}),
            param_space={"meter": meter},
            tune_config=tune.TuneConfig(num_samples=6),
            run_config=tune.RunConfig(storage_path=storage, verbose=0),
        ).fit()
        peak, waiting = actorrt.get(meter.report())
        print(f"{{'cpu': 1, 'TRAIN_DRIVER_RESOURCE': 1}}: {peak} at once "
              f"({waiting} waiting for resources then)")

        pinned = train.ScalingConfig(
            num_workers=2, trainer_resources={"CPU": 1, "TRAIN_DRIVER_RESOURCE": 1}
        )
        print("a Train trial pinned the same way reserves",
              pinned.as_placement_group_factory().bundles)

        results = tune.Tuner(
            tune.with_resources(trainable, {"cpu": 1, "TRAIN_DRIVER_RESOURCE": 3}),
            run_config=tune.RunConfig(storage_path=storage, verbose=0),
        ).fit()
        [error] = results.errors
        print(f"3 units when 2 exist: {type(error).__name__}: {error}")
    actorrt.shutdown()


if __name__ == "__main__":
    main()
