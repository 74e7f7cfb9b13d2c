"""Seed point 7: a trial that starts its own workers declares them as bundles.

    python examples/tune_placement_group_factory.py

``PlacementGroupFactory([{"CPU": 1, "GPU": 0}, {"CPU": 2, "GPU": 1}, {"CPU": 2, "GPU": 1}])``
is a driver bundle (bundle 0, where the trial's own code runs) and two worker bundles. The
broker reserves all three at once or not at all, so a trial starts only when its whole gang
fits, and the workers it spawns land in its own bundles: they never queue behind other
trials. On 10 CPUs and 4 GPUs, two such gangs fit (5 CPUs and 2 GPUs each); the third trial
waits as one request, though its driver bundle alone would fit.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from _meter import Meter  # counts trials running at once (examples/_meter.py)

import actorrt
from actorrt import tune


@actorrt.actor
class Worker:
    """A remote worker of a trial: a process of its own (it asks for CPUs)."""

    def where(self) -> str:
        placement = actorrt.get_context().placement
        assert placement is not None
        devices = os.environ.get("CUDA_VISIBLE_DEVICES")
        return f"bundle {placement.bundle_index} (GPU {devices})"


def trial_with_workers(config: dict[str, Any]) -> None:
    # Asks for what one worker bundle holds; "auto" placement puts each actor spawned
    # inside the trial into the trial's own placement group, in a bundle with room.
    workers = [actorrt.get(Worker.options(num_cpus=2, num_gpus=1).spawn()) for _ in range(2)]
    actorrt.get(config["meter"].enter())
    places = actorrt.get([w.where() for w in workers])
    actorrt.get(config["meter"].leave())
    tune.report({"workers": ", ".join(places)})


def main() -> None:
    actorrt.init(num_cpus=10, num_gpus=4)
    factory = tune.PlacementGroupFactory(
        [{"CPU": 1, "GPU": 0}, {"CPU": 2, "GPU": 1}, {"CPU": 2, "GPU": 1}]
    )
    print("each trial reserves", factory.required_resources, "as one gang:", factory.bundles)
    meter = actorrt.get(Meter.spawn(hold=2, total=3))
    with tempfile.TemporaryDirectory() as storage:
        results = tune.Tuner(
            tune.with_resources(trial_with_workers, factory),
            param_space={"meter": meter, "i": tune.grid_search([0, 1, 2])},
            run_config=tune.RunConfig(storage_path=storage, verbose=0),
        ).fit()
    for result in results:
        print(f"trial {result.config['i']}: workers in {result.metrics['workers']}")
    peak, waiting = actorrt.get(meter.report())
    print(f"{peak} gangs at once on 10 CPUs and 4 GPUs ({waiting} waiting for resources then)")
    print("after the sweep, available == cluster:",
          actorrt.available_resources() == actorrt.cluster_resources())
    actorrt.shutdown()


if __name__ == "__main__":
    main()
