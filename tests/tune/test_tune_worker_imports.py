"""A trial's worker process imports only the trial side of Tune, never the controller's."""

from __future__ import annotations

import os
import sys
from typing import Any

from actorrt import tune


def report_modules(config: dict[str, Any]) -> None:
    loaded = sorted(name for name in sys.modules if name.startswith("actorrt.tune"))
    tune.report({"pid": os.getpid(), "tune_modules": " ".join(loaded)})


def test_a_trials_process_imports_nothing_from_the_controller_side(tmp_path: Any) -> None:
    grid = tune.Tuner(
        report_modules,
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit()
    assert not grid.errors
    metrics = grid[0].metrics
    assert metrics["pid"] != os.getpid()  # the trial ran in a worker process
    loaded = metrics["tune_modules"].split()
    assert "actorrt.tune._worker._trial_actor" in loaded  # the trial side is there
    controller = [name for name in loaded if name.startswith("actorrt.tune._controller")]
    assert not controller, f"a trial's process imported the controller side: {controller}"
    # Nor the search, schedulers, loggers or the entry points a driver uses.
    driver_side = ("actorrt.tune.search", "actorrt.tune.schedulers", "actorrt.tune.tuner",
                   "actorrt.tune.logger", "actorrt.tune.tune_config")
    assert not [name for name in loaded if name.startswith(driver_side)], loaded
