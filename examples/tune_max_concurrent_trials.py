"""Seed point 14: ``max_concurrent_trials`` caps a sweep below what resources allow.

    python examples/tune_max_concurrent_trials.py

``{"cpu": 0.5}`` on 4 CPUs would run 8 trials at once; ``max_concurrent_trials=2`` runs 2.
The limit works as in Ray, by wrapping the search algorithm in a ``ConcurrencyLimiter``, so
giving both a limiter and a different ``max_concurrent_trials`` is an error. And it only
ever lowers concurrency: resources still decide first (``{"cpu": 2}`` trials with a limit
of 10 still run 2 at a time on 4 CPUs). ``None`` or ``0`` means no limit.

With a Train job per trial you do not need this setting to keep drivers from piling up
(seed point 15): declare the workers with the trial, see ``tune_train_num_workers.py``.
"""

from __future__ import annotations

import tempfile
import time
from typing import Any

from _meter import Meter  # counts trials running at once (examples/_meter.py)

import actorrt
from actorrt import tune
from actorrt.tune.search import BasicVariantGenerator, ConcurrencyLimiter


def trainable(config: dict[str, Any]) -> None:
    actorrt.get(config["meter"].enter())
    time.sleep(0.1)
    actorrt.get(config["meter"].leave())
    tune.report({"score": 1.0})


def at_once(resources: dict[str, float], limit: int | None, hold: int, storage: str) -> int:
    meter = actorrt.get(Meter.spawn(hold=hold, total=6))
    tune.Tuner(
        tune.with_resources(trainable, resources),
        param_space={"meter": meter},
        tune_config=tune.TuneConfig(num_samples=6, max_concurrent_trials=limit),
        run_config=tune.RunConfig(storage_path=storage, verbose=0),
    ).fit()
    peak, _ = actorrt.get(meter.report())
    return int(peak)


def main() -> None:
    actorrt.init(num_cpus=4)
    with tempfile.TemporaryDirectory() as storage:
        peak = at_once({"cpu": 0.5}, limit=2, hold=2, storage=storage)
        print(f"{{'cpu': 0.5}} on 4 CPUs, max_concurrent_trials=2:  {peak} at once")
        peak = at_once({"cpu": 2}, limit=10, hold=2, storage=storage)
        print(f"{{'cpu': 2}} on 4 CPUs, max_concurrent_trials=10:  {peak} at once "
              "(resources decide first)")
    try:
        tune.TuneConfig(
            search_alg=ConcurrencyLimiter(BasicVariantGenerator(), max_concurrent=3),
            max_concurrent_trials=2,
        )
    except ValueError as exc:
        print(f"a limiter and a different max_concurrent_trials: ValueError: {exc}")
    actorrt.shutdown()


if __name__ == "__main__":
    main()
