"""MLflow: one run per trial (params, metric history, final state, artifacts) and
setup_mlflow in a trial and in Train workers, read back with MLflow's own client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402
from sweep_trainables import steps  # noqa: E402

import actorrt  # noqa: E402
from actorrt import train, tune  # noqa: E402
from actorrt.air.integrations.mlflow import MLflowLoggerCallback, setup_mlflow  # noqa: E402
from actorrt.train import DataParallelTrainer, ScalingConfig  # noqa: E402


@pytest.fixture(autouse=True)
def _file_store(monkeypatch: pytest.MonkeyPatch) -> None:
    # MLflow 3 keeps its file store only when asked; in the trials' processes too.
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    for name in ("MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)


def read(path: str) -> str:
    return Path(path).read_text()


@pytest.mark.actorrt(num_cpus=2)
async def test_one_run_per_trial_with_params_metrics_artifacts_and_state(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    uri = (tmp_path / "mlruns").as_uri()
    callback = MLflowLoggerCallback(
        tracking_uri=uri, experiment_name="sweep", tags={"team": "a"}, save_artifact=True
    )
    grid = await tune.Tuner(
        steps,
        param_space={"lr": tune.grid_search([0.1, 0.2, 0.3])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="ml", verbose=0,
                                  callbacks=[callback]),
    ).fit_async()
    assert len(grid) == 3 and len(grid.errors) == 1
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("sweep")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 3
    by_name = {run.info.run_name: run for run in runs}
    assert len(by_name) == 3
    for run in runs:
        lr = float(run.data.params["lr"])
        assert run.data.tags["team"] == "a"
        assert run.data.tags["trial_name"] == run.info.run_name
        assert run.info.status == ("FAILED" if lr > 0.25 else "FINISHED")
        history = client.get_metric_history(run.info.run_id, "loss")
        assert [(m.step, m.value) for m in history] == [
            (1, pytest.approx(lr * 3)), (2, pytest.approx(lr * 2)), (3, pytest.approx(lr))
        ]
        assert run.data.metrics["nested/acc"] == 1.0
        assert run.data.metrics["training_iteration"] == 3
        assert "config/lr" not in run.data.metrics
        files = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert "result.json" in files
        checkpoints = [f for f in files if f.startswith("checkpoint_")]
        assert len(checkpoints) == 1
        local = client.download_artifacts(
            run.info.run_id, f"{checkpoints[0]}/weights.txt", str(tmp_path / run.info.run_id)
        )
        assert float(read(local)) == lr


def logs_with_setup(config: dict[str, Any]) -> None:
    # As in Ray: the experiment and the run are named after the trial by default.
    ml = setup_mlflow(config, tracking_uri=config["uri"], create_experiment_if_not_exists=True)
    for i in range(2):
        ml.log_metric("score", config["x"] + i, step=i)
    tune.report({"done_steps": 2})


@pytest.mark.actorrt(num_cpus=2)
async def test_setup_mlflow_in_trials_starts_a_run_named_after_each(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    uri = (tmp_path / "mlruns").as_uri()
    grid = await tune.Tuner(
        logs_with_setup,
        param_space={"x": tune.grid_search([1, 5]), "uri": uri},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="su", verbose=0),
    ).fit_async()
    assert not grid.errors
    client = MlflowClient(tracking_uri=uri)
    names = [e.name for e in client.search_experiments() if e.name != "Default"]
    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=names, output_format="list")
    assert len(runs) == 2
    for run in runs:
        experiment = client.get_experiment(run.info.experiment_id)
        assert run.info.run_name == experiment.name
        assert experiment.name.startswith("logs_with_setup_")
    for run in runs:
        x = int(run.data.params["x"])
        history = client.get_metric_history(run.info.run_id, "score")
        assert [(m.step, m.value) for m in history] == [(0, x), (1, x + 1)]


def worker_logs(config: dict[str, Any]) -> None:
    ml = setup_mlflow(config, tracking_uri=config["uri"], experiment_name="train",
                      create_experiment_if_not_exists=True, run_name="fit")
    ml.log_metric("rank", train.get_context().get_world_rank())
    train.report({"ok": 1})


@pytest.mark.timeout(120)
@pytest.mark.actorrt(num_cpus=2)
async def test_setup_mlflow_in_a_train_gang_logs_from_rank_zero_only(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    uri = (tmp_path / "mlruns").as_uri()
    result = await DataParallelTrainer(
        worker_logs,
        train_loop_config={"uri": uri},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=train.RunConfig(storage_path=str(tmp_path), name="gang"),
    ).fit_async()
    assert result.error is None
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("train").experiment_id])
    assert [run.info.run_name for run in runs] == ["fit"]
    assert runs[0].data.metrics == {"rank": 0.0}


def test_a_missing_experiment_is_refused_unless_created(tmp_path: Path) -> None:
    uri = (tmp_path / "mlruns").as_uri()
    with pytest.raises(ValueError, match=r"no experiment named 'nope'.*create_experiment"):
        setup_mlflow(tracking_uri=uri, experiment_name="nope")
    ml = setup_mlflow({"a": 1}, tracking_uri=uri, experiment_name="nope",
                      create_experiment_if_not_exists=True)
    run = ml.active_run()
    ml.end_run()
    assert MlflowClient(uri).get_run(run.info.run_id).data.params == {"a": "1"}


def test_the_experiment_given_wins_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = (tmp_path / "mlruns").as_uri()
    client = MlflowClient(uri)
    from_env = client.create_experiment("from_env")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "from_env")
    ml = setup_mlflow(tracking_uri=uri, experiment_name="given",
                      create_experiment_if_not_exists=True)
    given = ml.active_run().info.experiment_id
    ml.end_run()
    assert client.get_experiment(given).name == "given"
    ml = setup_mlflow(tracking_uri=uri)  # nothing given: the environment's
    assert ml.active_run().info.experiment_id == from_env
    ml.end_run()
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", from_env)
    ml = setup_mlflow(tracking_uri=uri, experiment_id=given)
    assert ml.active_run().info.experiment_id == given
    ml.end_run()
