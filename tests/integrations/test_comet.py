"""Comet, offline: one experiment per trial (name, tags, config as parameters, each
metric by iteration, the checkpoint as an artifact, its end), read back from the archives
comet_ml's OfflineExperiment writes, complete when ``fit()`` returns."""

from __future__ import annotations

import json
import os
import zipfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

# Imported before CometLoggerCallback sets it, comet_ml would hook its auto-logging into the
# other libraries of this test process (an offline experiment per MLflow test, in the cwd).
os.environ.setdefault("COMET_DISABLE_AUTO_LOGGING", "1")
comet_ml = pytest.importorskip("comet_ml")

from sweep_trainables import steps  # noqa: E402

import actorrt  # noqa: E402
from actorrt import tune  # noqa: E402
from actorrt.air.integrations.comet import CometLoggerCallback  # noqa: E402


def read_archive(path: Path) -> dict[str, Any]:
    """An offline archive: its experiment record and its messages by type."""
    with zipfile.ZipFile(path) as archive:
        experiment = json.loads(archive.read("experiment.json"))
        lines = archive.read("messages.json").decode().splitlines()
    messages: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        message = json.loads(line)
        messages[message["type"]].append(message["payload"])
    return {"experiment": experiment, "messages": messages}


def others(archive: dict[str, Any]) -> dict[str, Any]:
    return {m["key"]: m["value"] for m in archive["messages"]["log_other"]}


@pytest.mark.actorrt(num_cpus=2)
async def test_one_offline_experiment_per_trial_with_params_metrics_and_artifact(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    offline = tmp_path / "comet"
    callback = CometLoggerCallback(
        online=False, tags=["sweep", "a"],
        project_name="p", offline_directory=str(offline), display_summary_level=0,
    )
    grid = await tune.Tuner(
        steps,
        param_space={"lr": tune.grid_search([0.1, 0.2, 0.3]), "model": {"depth": 2}},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="cm", verbose=0,
                                  callbacks=[callback]),
    ).fit_async()
    assert len(grid) == 3 and len(grid.errors) == 1
    archives = [read_archive(p) for p in sorted(offline.glob("*.zip"))]
    assert len(archives) == 3  # every trial's archive is written by the time fit() returns
    names = {str(r.metrics["trial_id"]) for r in grid}
    seen = set()
    for archive in archives:
        assert archive["experiment"]["project_name"] == "p"
        assert sorted(archive["experiment"]["tags"]) == ["a", "sweep"]
        other = others(archive)
        seen.add(other["trial_id"])
        assert other["Name"].endswith(other["trial_id"])
        assert other["Created from"] == "actorrt"
        params = [m["param"] for m in archive["messages"]["parameter_msg"]]
        first = {p["paramName"]: p["paramValue"] for p in params if p["step"] is None}
        lr = first["lr"]
        assert lr in (0.1, 0.2, 0.3) and first["model/depth"] == 2
        assert other["trial_status"] == ("ERROR" if lr > 0.25 else "TERMINATED")
        metrics = [m["metric"] for m in archive["messages"]["metric_msg"]]
        loss = [(m["step"], m["metricValue"]) for m in metrics if m["metricName"] == "loss"]
        assert loss == [(1, pytest.approx(lr * 3)), (2, pytest.approx(lr * 2)),
                        (3, pytest.approx(lr))]
        acc = [m["metricValue"] for m in metrics if m["metricName"] == "nested/acc"]
        assert acc == [0.0, 0.5, 1.0]
        logged = {m["metricName"] for m in metrics}
        assert not logged & {"done", "trial_id", "pid", "hostname", "config/lr"}
        assert all(isinstance(m["metricValue"], int | float) for m in metrics)
        assert other["checkpoint_dir_name"] == "checkpoint_000000"
    assert seen == names


def test_tags_must_be_a_list_of_strings() -> None:
    with pytest.raises(TypeError, match=r"list of strings, got 'a'"):
        CometLoggerCallback(online=False, tags="a")  # type: ignore[arg-type]
