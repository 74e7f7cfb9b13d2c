"""Seed points 3 and 9: fractional CPUs for light trials; resources schedule, not enforce.

    python examples/tune_fractional_cpus.py

``{"cpu": 0.5}`` on 4 CPUs runs 8 trials at a time: right for light or I/O-bound trials.
A CPU amount is a scheduling promise, not a cgroup: a trial can still start as many threads
as it likes. What actorrt does about it is set ``OMP_NUM_THREADS`` and its MKL/OpenBLAS
cousins in each trial's process to the whole CPUs it was granted (at least 1), unless you
set them yourself, so numpy and torch do not start one thread per core in every trial.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from _meter import Meter  # counts trials running at once (examples/_meter.py)

import actorrt
from actorrt import tune


def light_trial(config: dict[str, Any]) -> None:
    meter = config["meter"]
    actorrt.get(meter.enter())
    time.sleep(0.1)  # waiting on I/O, say: half a CPU is plenty
    actorrt.get(meter.leave())
    tune.report({
        "threads": os.environ.get("OMP_NUM_THREADS"),
        "granted": tune.get_context().get_trial_resources().required_resources,
    })


def main() -> None:
    actorrt.init(num_cpus=4)
    meter = actorrt.get(Meter.spawn(hold=8, total=16))
    with tempfile.TemporaryDirectory() as storage:
        results = tune.Tuner(
            tune.with_resources(light_trial, {"cpu": 0.5}),
            param_space={"meter": meter},
            tune_config=tune.TuneConfig(num_samples=16),
            run_config=tune.RunConfig(storage_path=storage, verbose=0),
        ).fit()
    peak, waiting = actorrt.get(meter.report())
    print(f"{{'cpu': 0.5}} on 4 CPUs: {len(results)} trials, {peak} at once, "
          f"{waiting} waiting for resources then")
    first = results[0].metrics
    print(f"each trial was granted {first['granted']} and saw "
          f"OMP_NUM_THREADS={first['threads']}")
    actorrt.shutdown()


if __name__ == "__main__":
    main()
