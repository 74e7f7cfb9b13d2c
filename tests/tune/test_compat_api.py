"""Ray's everyday Tune API, run as Ray scripts with only the imports changed: search
spaces, ``ray.init`` arguments, Ray names actorrt lacks, progress reporters, and the Ray
2.7-2.40 spellings (``train.report`` in a Tune trainable, ``ray.air``, ``train.RunConfig``
given to ``Tuner``, search domains inside a ``ScalingConfig``)."""

from __future__ import annotations

import os
import tempfile
import warnings
from typing import Any

import pytest

import actorrt as ray
from actorrt import air, train, tune
from actorrt.air import session
from actorrt.train import DataParallelTrainer, ScalingConfig
from actorrt.tune.search.sample import Categorical, Float

RAY_SEARCH_FUNCTIONS = [
    "uniform", "quniform", "loguniform", "qloguniform", "choice", "randint", "qrandint",
    "lograndint", "qlograndint", "randn", "qrandn", "sample_from", "grid_search",
]


# ------------------------------------------------------------------ search spaces

def test_every_search_space_function_of_ray() -> None:
    for name in RAY_SEARCH_FUNCTIONS:
        assert callable(getattr(tune, name)), name
    draws = {
        "uniform": tune.uniform(1, 2).sample(size=50, random_state=1),
        "quniform": tune.quniform(0, 1, 0.25).sample(size=50, random_state=1),
        "loguniform": tune.loguniform(1e-4, 1e-1).sample(size=50, random_state=1),
        "qloguniform": tune.qloguniform(5, 100, 5).sample(size=50, random_state=1),
        "randint": tune.randint(0, 3).sample(size=50, random_state=1),
        "qrandint": tune.qrandint(0, 10, 5).sample(size=50, random_state=1),
        "lograndint": tune.lograndint(1, 100).sample(size=50, random_state=1),
        "qlograndint": tune.qlograndint(1, 100, 10).sample(size=50, random_state=1),
        "qrandn": tune.qrandn(0, 1, 0.5).sample(size=50, random_state=1),
    }
    assert all(1 <= v < 2 for v in draws["uniform"])
    assert set(draws["quniform"]) <= {0.0, 0.25, 0.5, 0.75, 1.0}
    assert all(1e-4 <= v < 1e-1 for v in draws["loguniform"])
    assert all(v % 5 == 0 and 5 <= v <= 100 for v in draws["qloguniform"])
    assert set(draws["randint"]) == {0, 1, 2}  # upper excluded, as in Ray
    assert set(draws["qrandint"]) == {0, 5, 10}  # upper included, as in Ray
    assert all(1 <= v < 100 and isinstance(v, int) for v in draws["lograndint"])
    assert all(v % 10 == 0 and 10 <= v <= 100 for v in draws["qlograndint"])
    assert all(v * 2 == int(v * 2) for v in draws["qrandn"])
    # One value for size=1, a list otherwise; the same seed, the same values.
    assert isinstance(tune.randn().sample(), float)
    assert tune.choice(["a", "b"]).sample(size=5, random_state=7) == tune.choice(
        ["a", "b"]
    ).sample(size=5, random_state=7)
    assert tune.sample_from(lambda config: config["x"] * 2).sample(config={"x": 3}) == 6


def test_domain_methods_users_call() -> None:
    domain = tune.uniform(1, 10)
    assert Float(1, 10).loguniform().sample(random_state=0) >= 1
    assert domain.quantized(0.5).sample(size=3, random_state=0) == [
        v for v in domain.quantized(0.5).sample(size=3, random_state=0) if v * 2 == int(v * 2)
    ]
    assert tune.randint(0, 5).quantized(2).sample(size=20, random_state=0)
    categorical = tune.choice([1, 2, 3])
    assert len(categorical) == 3 and categorical[1] == 2
    assert categorical.is_valid(2) and not categorical.is_valid(4)
    assert Categorical([1, 2, 3]).grid().is_grid()
    assert tune.randint(0, 5).is_valid(5) and not tune.randint(0, 5).is_valid(6)  # Ray's rule
    assert tune.qrandint(0, 10, 5).is_valid(10)
    assert tune.qrandint(0, 10, 5).domain_str == "(0, 10)"
    assert not domain.is_grid() and tune.sample_from(lambda: 1).is_function()
    assert domain.domain_str == "(1.0, 10.0)"  # as Ray writes it
    with pytest.raises(ValueError, match="size"):
        domain.sample(size=0)
    with pytest.warns(DeprecationWarning, match="base"):
        tune.loguniform(1, 10, base=2)  # deprecated in Ray too: it changes nothing


# ------------------------------------------------------------------ ray.init

def reads_env(config: dict[str, Any]) -> None:
    tune.report({"flag": os.environ.get("COMPAT_FLAG", "")})


def test_init_takes_rays_arguments(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.warns(UserWarning) as caught:
        ray.init(
            num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="ns",
            configure_logging=False, local_mode=False, logging_level="INFO",
            runtime_env={"env_vars": {"COMPAT_FLAG": "on"}},
        )
    try:
        [warning] = [w for w in caught if "ignores these Ray arguments" in str(w.message)]
        text = str(warning.message)
        for name in ("log_to_driver", "namespace", "local_mode", "configure_logging"):
            assert name in text
        assert "include_dashboard" not in text  # used: False asks for no dashboard
        assert ray.init(ignore_reinit_error=True) is not None  # the running one, no error
        with pytest.raises(ray.RuntimeAlreadyRunningError):
            ray.init()
        assert ray.cluster_resources()["CPU"] == 2
        grid = tune.Tuner(
            reads_env, run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0)
        ).fit()
        assert grid[0].metrics["flag"] == "on"  # runtime_env's env_vars reach the workers
    finally:
        ray.shutdown()
    # No head was started under this cluster directory: "auto" says so.
    monkeypatch.setenv("ACTORRT_CLUSTER_DIR", str(tmp_path / "no-cluster"))
    with pytest.raises(ValueError, match="no cluster head was started on this machine"):
        ray.init(address="auto")
    with pytest.raises(ValueError, match="Ray Client addresses do not apply"):
        ray.init(address="ray://10.0.0.1:10001")
    with pytest.raises(TypeError, match="no_such_option"):
        ray.init(no_such_option=1)


# ------------------------------------------------------------------ missing Ray names

@pytest.mark.parametrize(
    ("module", "name", "hint"),
    [
        (ray, "remote", "@actorrt.actor"),
        (ray, "timeline", "no timeline"),
        (train, "DataConfig", "Ray Data"),
        (ray, "no_such_ray_name", "does not have it"),
        (tune, "no_such_tune_name", "does not have it"),
    ],
)
def test_a_ray_name_actorrt_lacks_says_so(module: Any, name: str, hint: str) -> None:
    with pytest.raises(AttributeError) as caught:
        getattr(module, name)
    text = str(caught.value)
    assert hint in text and "docs/porting.md" in text
    assert "._" not in text  # never a private module


def test_ray_style_submodule_access() -> None:
    assert ray.tune.Tuner is tune.Tuner and ray.train.report is train.report
    assert ray.air.RunConfig is train.RunConfig
    assert set(air.__all__) == {
        "Checkpoint", "CheckpointConfig", "FailureConfig", "Result", "RunConfig",
        "ScalingConfig", "session",
    }
    assert {"report", "get_checkpoint", "get_trial_id", "get_world_rank"} <= set(session.__all__)


# ------------------------------------------------------------------ reporters

def quadratic(config: dict[str, Any]) -> None:
    for step in range(3):
        tune.report({"loss": (config["x"] - 1) ** 2 + step, "extra": {"acc": 0.5}})


def test_cli_reporter_columns_feed_the_view(tmp_path: Any, capsys: Any) -> None:
    reporter = tune.CLIReporter(
        metric_columns={"loss": "Loss", "extra/acc": "Acc"},
        parameter_columns=["x"],
        max_report_frequency=1,
    )
    ray.init(num_cpus=2)
    try:
        tune.Tuner(
            quadratic,
            param_space={"x": tune.grid_search([0, 1, 2]), "unshown": 5},
            tune_config=tune.TuneConfig(metric="loss", mode="min"),
            run_config=tune.RunConfig(storage_path=str(tmp_path), progress_reporter=reporter),
        ).fit()
    finally:
        ray.shutdown()
    out = capsys.readouterr().out
    [header] = [line for line in out.splitlines() if line.startswith("trial ")]
    assert header.split() == ["trial", "status", "Loss", "Acc", "x"]  # not "unshown"
    assert "best loss=2" in out


class CountingReporter(tune.ProgressReporter):
    def __init__(self) -> None:
        self.calls: list[tuple[int, bool, list[int]]] = []

    def should_report(self, trials: list[Any], done: bool = False) -> bool:
        return True

    def report(self, trials: list[Any], done: bool, *sys_info: Any) -> None:
        iterations = [t.last_result.get("training_iteration", 0) for t in trials]
        self.calls.append((len(trials), done, iterations))


def test_a_custom_progress_reporter_is_called_as_ray_calls_it(tmp_path: Any) -> None:
    reporter = CountingReporter()
    ray.init(num_cpus=2)
    try:
        tune.Tuner(
            quadratic,
            param_space={"x": tune.grid_search([0, 1])},
            run_config=tune.RunConfig(storage_path=str(tmp_path), progress_reporter=reporter),
        ).fit()
    finally:
        ray.shutdown()
    assert reporter.calls[-1] == (2, True, [3, 3])  # the last call: done, every trial ended
    assert all(not done for _, done, _ in reporter.calls[:-1])


def test_reporter_and_config_arguments_ray_accepts() -> None:
    with pytest.raises(ValueError, match="metric_columns"):
        tune.CLIReporter(metric_columns="loss")
    with pytest.raises(ValueError, match="progress_reporter"):
        tune.RunConfig(progress_reporter="cli")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="overwrite.*True or False, got 'yes'"):
        tune.JupyterNotebookReporter(overwrite="yes")  # type: ignore[arg-type]
    with pytest.warns(UserWarning, match="reuse_actors"):
        tune.TuneConfig(reuse_actors=True)
    with pytest.warns(UserWarning, match="local storage only"):
        tune.RunConfig(sync_config=tune.SyncConfig())
    with pytest.warns(UserWarning, match="output.log"):
        tune.RunConfig(log_to_file="out.log")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tune.RunConfig(log_to_file=True)  # what actorrt does anyway: no warning
        tune.TuneConfig(reuse_actors=None)
        tune.JupyterNotebookReporter(metric_columns=["loss"])  # it redraws in place
    with pytest.raises(ValueError, match="storage_filesystem"):
        tune.RunConfig(storage_filesystem=object())
    # Ray 2.7-2.40 passed Train's configs to Tune: they are taken as Tune's.
    converted = tune.RunConfig(
        checkpoint_config=train.CheckpointConfig(num_to_keep=2, checkpoint_score_order="min"),
        failure_config=air.FailureConfig(max_failures=3),
    )
    assert converted.checkpoint_config == tune.CheckpointConfig(
        num_to_keep=2, checkpoint_score_order="min"
    )
    assert converted.failure_config == tune.FailureConfig(max_failures=3)
    with pytest.raises(ValueError, match="checkpoint_config"):
        tune.RunConfig(checkpoint_config={"num_to_keep": 2})  # type: ignore[arg-type]


# ------------------------------------------------------------------ Ray 2.7-2.40 spellings

def old_style(config: dict[str, Any]) -> None:
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "i")) as f:
            start = int(f.read())
    for i in range(start + 1, 100):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "i"), "w") as f:
                f.write(str(i))
            metrics = {"i": i, "trial": train.get_context().get_trial_name(),
                       "id": session.get_trial_id(), "rank": session.get_world_rank()}
            if i % 2:
                train.report(metrics, checkpoint=train.Checkpoint.from_directory(d))
            else:
                session.report(metrics, checkpoint=air.Checkpoint.from_directory(d))


class Seen(tune.Callback):
    def __init__(self) -> None:
        self.results = 0

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any,
                        result: dict[str, Any], **info: Any) -> None:
        self.results += 1


def test_train_report_and_air_session_inside_a_tune_trainable(tmp_path: Any) -> None:
    seen = Seen()
    ray.init(num_cpus=2)
    try:
        grid = tune.Tuner(
            old_style,
            param_space={"x": tune.grid_search([1, 2])},
            run_config=train.RunConfig(
                storage_path=str(tmp_path), name="old", stop={"training_iteration": 5},
                callbacks=[seen], verbose=0,
                checkpoint_config=train.CheckpointConfig(num_to_keep=1),
            ),
        ).fit()
    finally:
        ray.shutdown()
    assert not grid.errors, grid.errors
    assert [r.metrics["i"] for r in grid] == [5, 5]
    assert grid[0].metrics["trial"] == os.path.basename(grid[0].path)
    assert grid[0].metrics["id"] == grid[0].trial_id and grid[0].metrics["rank"] == 0
    assert seen.results == 10  # train.RunConfig(callbacks=) reached Tune
    for result in grid:
        kept = [n for n in os.listdir(result.path) if n.startswith("checkpoint_")]
        assert len(kept) == 1  # train.CheckpointConfig(num_to_keep=1) reached Tune


def train_loop(config: dict[str, Any]) -> None:
    context = train.get_context()
    train.report({"world_size": context.get_world_size(), "lr": config["lr"]})


def test_search_domains_inside_a_scaling_config(tmp_path: Any) -> None:
    trainer = DataParallelTrainer(
        train_loop, train_loop_config={"lr": 0.0}, scaling_config=ScalingConfig(num_workers=1)
    )
    ray.init(num_cpus=3)
    try:
        grid = tune.Tuner(
            trainer,
            param_space={
                "scaling_config": air.ScalingConfig(num_workers=tune.grid_search([1, 2])),
                "train_loop_config": {"lr": tune.choice([0.5])},
            },
            tune_config=tune.TuneConfig(max_concurrent_trials=1),
            run_config=air.RunConfig(storage_path=str(tmp_path), verbose=0),
        ).fit()
    finally:
        ray.shutdown()
    assert not grid.errors, grid.errors
    assert sorted(r.metrics["world_size"] for r in grid) == [1, 2]
    assert {r.metrics["lr"] for r in grid} == {0.5}
    with pytest.raises(ValueError, match="param_space"):
        ScalingConfig(num_workers=tune.grid_search([1, 2])).as_placement_group_factory()


def test_train_report_outside_any_trial_or_trainer_is_still_an_error() -> None:
    with pytest.raises(RuntimeError, match="Tune trial"):
        train.report({"x": 1})


def test_reporter_column_rules_follow_ray() -> None:
    reporter = tune.CLIReporter(metric_columns=["loss"], parameter_columns=[])
    assert reporter.parameter_columns is None  # empty: every parameter, as in Ray
    reporter.add_metric_column("acc")
    with pytest.raises(ValueError, match="already exists"):
        reporter.add_metric_column("acc")
    with pytest.raises(ValueError, match="given as a list"):
        reporter.add_metric_column("f1", "F1")
    default = tune.CLIReporter()
    default.add_metric_column("acc")  # joins the default columns, as in Ray
    assert default.metric_columns == {
        "training_iteration": "iter", "time_total_s": "total time (s)", "acc": "acc"
    }
    named = tune.CLIReporter(metric_columns={"loss": "Loss"}, metric="loss", mode="min")
    named.add_metric_column("f1", "F1")
    assert named.metric_columns == {"loss": "Loss", "f1": "F1"}
    with pytest.raises(ValueError, match="own metric and mode"):
        named.set_search_properties("acc", "max")


def test_train_integrations_load_on_attribute_access() -> None:
    import subprocess
    import sys

    code = (
        "from actorrt import train\n"
        "assert train.lightning.RayTrainReportCallback\n"
        "assert train.huggingface.transformers.RayTrainReportCallback\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
