"""AxSearch (ax-platform): beats random search on a quadratic, continues after save/restore,
runs points_to_evaluate first, takes metric/mode from TuneConfig in a real sweep, and works
with an AxClient the user made. Ax's GP fits take seconds on a loaded machine: the budgets
are small, and most trials are Ax's Sobol start.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import eventually

pytest.importorskip("ax", reason="AxSearch needs ax-platform: pip install 'actorrt[ax]'")

from ax.service.ax_client import AxClient, ObjectiveProperties

import actorrt
from actorrt import tune
from actorrt.tune.search.ax import AxSearch

logging.getLogger("ax").setLevel(logging.WARNING)

# Ax fits a Gaussian process per suggestion: on a loaded 2-core machine a sweep of these
# takes well over the suite's default minute.
pytestmark = pytest.mark.timeout(240)

SPACE = {"x": tune.uniform(-10, 10), "y": tune.uniform(-10, 10), "tag": "bowl"}


def bowl(config: dict[str, Any]) -> float:
    """A 2-D quadratic, minimum 0 at (3, -2)."""
    return float((config["x"] - 3) ** 2 + (config["y"] + 2) ** 2)


def seeded(seed: int, **kwargs: Any) -> AxSearch:
    return AxSearch(random_seed=seed, verbose_logging=False, **kwargs)


def drive(searcher: AxSearch, steps: int, start: int = 0) -> list[dict[str, Any]]:
    """Suggest and complete ``steps`` trials one at a time; the configs, in order."""
    configs = []
    for i in range(start, start + steps):
        config = searcher.suggest(f"t{i}")
        assert isinstance(config, dict), config
        configs.append(config)
        searcher.on_trial_complete(f"t{i}", {"loss": bowl(config), "training_iteration": 1})
    return configs


def test_ax_beats_random_search_on_a_quadratic() -> None:
    # Ax's default strategy: 5 Sobol points, then BoTorch's GP (3 fits here). The best
    # loss: about 1.8 against random search's 10.5.
    budget = 8
    searcher = seeded(1)
    searcher.set_search_properties("loss", "min", SPACE)
    configs = drive(searcher, budget)
    assert all(c["tag"] == "bowl" for c in configs)  # the param space's constant
    found = min(bowl(c) for c in configs)
    rng = random.Random(1)
    baseline = min(
        bowl({"x": rng.uniform(-10, 10), "y": rng.uniform(-10, 10)}) for _ in range(budget)
    )
    assert found < baseline / 3, (found, baseline)


def test_save_and_restore_mid_sweep_continue_the_same_search(tmp_path: Path) -> None:
    # Four Sobol trials, a fifth running at the save, then a GP suggestion made from them.
    before, after = 4, 1
    whole = seeded(3)
    whole.set_search_properties("loss", "min", SPACE)
    expected = drive(whole, before + 1 + after)

    first = seeded(3)
    first.set_search_properties("loss", "min", SPACE)
    got = drive(first, before)
    live = first.suggest(f"t{before}")
    path = str(tmp_path / "searcher.pkl")
    first.save(path)

    again = seeded(3)  # built as Tuner.restore builds it, then given the state
    again.set_search_properties("loss", "min", SPACE)
    again.restore(path)
    assert isinstance(live, dict)
    again.on_trial_complete(f"t{before}", {"loss": bowl(live), "training_iteration": 1})
    got += [live, *drive(again, after, start=before + 1)]
    assert got == expected


def test_spaces_convert_as_rays_do() -> None:
    params = AxSearch.convert_search_space({
        "lr": tune.loguniform(1e-4, 1e-1),
        "layers": tune.randint(1, 5),
        "width": tune.qrandint(32, 128, 32),
        "model": {"act": tune.choice(["relu", "tanh"])},
        "epochs": 3,
    })
    assert params == [
        {"name": "epochs", "type": "fixed", "value": 3},
        {"name": "lr", "type": "range", "value_type": "float", "bounds": [1e-4, 1e-1],
         "log_scale": True},
        {"name": "layers", "type": "range", "value_type": "int", "bounds": [1, 4],
         "log_scale": False},
        {"name": "width", "type": "range", "value_type": "int", "bounds": [32, 127],
         "log_scale": False},
        {"name": "model/act", "type": "choice", "values": ["relu", "tanh"]},
    ]
    with pytest.raises(ValueError, match="AxSearch cannot search z="):
        AxSearch.convert_search_space({"z": tune.randn(0, 1)})
    with pytest.raises(ValueError, match="cannot take grid_search"):
        AxSearch.convert_search_space({"z": tune.grid_search([1, 2])})
    with pytest.raises(ValueError, match="is not an Ax parameter"):
        AxSearch(space=[{"name": "x", "type": "range"}])


def test_points_to_evaluate_run_first_and_are_checked() -> None:
    points = [{"x": 3.0, "y": -2.0}, {"x": 1.0, "y": 1.0}]
    searcher = seeded(0, points_to_evaluate=points)
    searcher.set_search_properties("loss", "min", SPACE)
    got = drive(searcher, 3)
    assert [(c["x"], c["y"]) for c in got[:2]] == [(3.0, -2.0), (1.0, 1.0)]
    assert got[2]["x"] != 1.0 and got[2]["tag"] == "bowl"
    with pytest.raises(ValueError, match=r"points_to_evaluate\[0\] .* not in the search space"):
        seeded(0, points_to_evaluate=[{"x": 30.0, "y": 0.0}]).set_search_properties(
            "loss", "min", SPACE
        )


def test_metric_mode_rules_as_rays() -> None:
    only_mode = seeded(0, mode="max")
    only_mode.set_search_properties(None, None, SPACE)
    assert (only_mode.metric, only_mode.mode) == ("_metric", "max")  # Ray's anonymous metric
    with pytest.raises(ValueError, match="needs a metric and a mode"):
        seeded(0).set_search_properties(None, None, SPACE)
    with pytest.raises(ValueError, match="mode must be 'min', 'max' or None, got 'up'"):
        AxSearch(mode="up")
    with pytest.raises(ValueError, match="give the search space in one place"):
        own = [{"name": "x", "type": "range", "bounds": [0.0, 1.0]}]
        AxSearch(space=own).set_search_properties("loss", "min", SPACE)


def users_client() -> AxClient:
    client = AxClient(random_seed=0, verbose_logging=False)
    client.create_experiment(
        parameters=[{"name": "x", "type": "range", "bounds": [-10.0, 10.0]},
                    {"name": "y", "type": "range", "bounds": [-10.0, 10.0]}],
        objectives={"loss": ObjectiveProperties(minimize=True)},
    )
    return client


def test_an_ax_client_with_its_experiment_gives_space_metric_and_mode() -> None:
    searcher = AxSearch(ax_client=users_client())
    searcher.set_search_properties("loss", "min", {"tag": "bowl"})
    assert (searcher.metric, searcher.mode) == ("loss", "min")
    assert all(c["tag"] == "bowl" for c in drive(searcher, 2))
    with pytest.raises(ValueError, match=r"do not also pass \['metric', 'space'\]"):
        AxSearch(space=[{"name": "x", "type": "fixed", "value": 1}], metric="loss",
                 ax_client=users_client())
    with pytest.raises(ValueError, match="TuneConfig's mode='max' differs"):
        AxSearch(ax_client=users_client()).set_search_properties("loss", "max", {})
    with pytest.raises(ValueError, match=r"ax_kwargs \['random_seed'\]"):
        AxSearch(ax_client=AxClient(verbose_logging=False), random_seed=1)


def test_without_ax_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ax", "ax.service", "ax.service.ax_client"):
        monkeypatch.setitem(sys.modules, name, None)  # importing it now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'actorrt\[ax\]'"):
        AxSearch()


def report_bowl(config: dict[str, Any]) -> None:
    tune.report({"loss": bowl(config), "l2": config["x"] ** 2 + config["y"] ** 2})


@pytest.mark.actorrt(num_cpus=2)
async def test_a_sweep_takes_metric_and_mode_from_tune_config(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    # Sobol trials only (Ax's first five), two at a time, the first one a given point;
    # the outcome constraint's metric reaches Ax with each result.
    searcher = seeded(2, points_to_evaluate=[{"x": 2.5, "y": -1.5}],
                      outcome_constraints=["l2 <= 150"])
    grid = await tune.Tuner(
        report_bowl, param_space=SPACE,
        tune_config=tune.TuneConfig(
            metric="loss", mode="min", num_samples=5, max_concurrent_trials=2,
            search_alg=searcher,
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="ax", verbose=0),
    ).fit_async()
    assert len(grid) == 5 and not grid.errors
    assert (searcher.metric, searcher.mode) == ("loss", "min")
    best = grid.get_best_result()
    assert (best.config["x"], best.config["y"]) == (2.5, -1.5)  # the point: loss 0.5
    data = searcher._ax.experiment.fetch_data().df
    assert set(data["metric_name"]) == {"loss", "l2"} and len(data) == 10


def marked_bowl(config: dict[str, Any]) -> None:
    marks = config["marks"]
    index = len(os.listdir(marks))
    with open(os.path.join(marks, f"{index:03d}"), "w") as f:
        f.write(tune.get_context().get_trial_id())
    if index == 4:  # the fifth trial waits, so the sweep is cut off with it running
        while not os.path.exists(os.path.join(marks, "..", "release")):
            time.sleep(0.02)
    tune.report({"loss": bowl(config)})


@pytest.mark.actorrt(num_cpus=2)
async def test_a_killed_ax_sweep_restores_and_continues_the_same_search(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    # Six trials one at a time: four Sobol ones end, the fifth is cut off running; the
    # restored run finishes it and asks Ax's GP for the last one.
    marks = tmp_path / "marks"
    marks.mkdir()
    space = {**SPACE, "marks": str(marks)}
    tuner = tune.Tuner(
        marked_bowl, param_space=space,
        tune_config=tune.TuneConfig(
            metric="loss", mode="min", num_samples=6, max_concurrent_trials=1,
            search_alg=seeded(5),
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="ax", verbose=0),
    )
    run = asyncio.ensure_future(tuner.fit_async())
    assert await eventually(lambda: len(os.listdir(marks)) == 5, within=45)
    run.cancel()  # as Ctrl-C does
    await asyncio.gather(run, return_exceptions=True)
    (tmp_path / "release").touch()
    grid = await tune.Tuner.restore(str(tmp_path / "ax"), marked_bowl).fit_async()
    assert len(grid) == 6 and not grid.errors
    fresh = seeded(5)
    fresh.set_search_properties("loss", "min", space)
    expected = drive(fresh, 6)
    by_id = {r.metrics["trial_id"]: r.config for r in grid}
    got = [by_id[k] for k in sorted(by_id)]
    assert [(c["x"], c["y"]) for c in got] == [(c["x"], c["y"]) for c in expected]
