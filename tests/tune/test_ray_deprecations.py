"""The deprecation warnings Ray raises for older spellings that actorrt still accepts:
each is a ``RayDeprecationWarning`` (``actorrt.util.annotations``, a
``DeprecationWarning``), and where Ray raises instead of warning, so does actorrt."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from actorrt import train, tune
from actorrt.air import session
from actorrt.util.annotations import RayDeprecationWarning


def test_the_category_is_rays_and_a_deprecation_warning() -> None:
    assert issubclass(RayDeprecationWarning, DeprecationWarning)
    with pytest.warns(RayDeprecationWarning, match="`base` argument is deprecated"):
        tune.loguniform(1, 10, base=2)
    with pytest.warns(RayDeprecationWarning, match="chdir_to_trial_dir"):
        tune.TuneConfig(chdir_to_trial_dir=True)


def test_local_dir_is_refused_as_ray_refuses_it() -> None:
    for config in (tune.RunConfig, train.RunConfig):
        with pytest.raises(DeprecationWarning, match=r"The `RunConfig\(local_dir\)` argument "
                           r"is deprecated. You should set the `RunConfig\(storage_path\)`"):
            config(local_dir="/tmp/x")


def test_tune_settings_in_a_train_run_config_warn_as_ray_train_v2_refuses_them() -> None:
    with pytest.warns(RayDeprecationWarning, match="is deprecated") as got:
        train.RunConfig(stop={"training_iteration": 2}, verbose=0)
    assert sorted(str(w.message).split("`")[1] for w in got) == [
        "RunConfig(stop)", "RunConfig(verbose)"
    ]
    with pytest.warns(RayDeprecationWarning, match=r"`RunConfig\(callbacks\)` is deprecated"):
        train.RunConfig(callbacks=[tune.Callback()])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train.RunConfig(callbacks=[train.UserCallback()])  # Train V2's own: no warning


def old_spellings(config: dict[str, Any]) -> None:
    session.report({"a": 1})
    train.report({"a": 2})
    assert train.get_context().get_trial_name()


def test_train_and_air_session_calls_in_a_tune_trial_still_report_and_warn(
    tmp_path: Path,
) -> None:
    grid = tune.Tuner(
        old_spellings,
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit()
    assert grid.num_errors == 0, grid.errors
    assert [r["a"] for r in grid[0].metrics_dataframe.to_dict("records")] == [1, 2]
    log = (Path(grid[0].path) / "output.log").read_text()
    assert "RayDeprecationWarning: `ray.air.session.report` is deprecated" in log
    assert "RayDeprecationWarning: `ray.train.report` is deprecated when running in a " \
        "function passed to Ray Tune" in log
    assert "`ray.train.get_context` is deprecated when running" in log
    assert "`ray.tune.get_context`" in log


def test_train_configs_given_to_tune_say_update_your_imports() -> None:
    with pytest.warns(RayDeprecationWarning, match="update your imports") as got:
        tune.Tuner(lambda c: None, run_config=train.RunConfig())
    assert len(got) == 1
    with pytest.warns(RayDeprecationWarning, match="update your imports"):
        tune.RunConfig(failure_config=train.FailureConfig())
    with pytest.warns(RayDeprecationWarning, match="update your imports"):
        tune.RunConfig(checkpoint_config=train.CheckpointConfig())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tune.Tuner(lambda c: None, run_config=tune.RunConfig(
            failure_config=tune.FailureConfig(), checkpoint_config=tune.CheckpointConfig()
        ))


def test_rays_switch_turns_the_train_v2_migration_warnings_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from actorrt.train.constants import ENABLE_V2_MIGRATION_WARNINGS_ENV_VAR

    assert ENABLE_V2_MIGRATION_WARNINGS_ENV_VAR == "RAY_TRAIN_ENABLE_V2_MIGRATION_WARNINGS"
    monkeypatch.setenv(ENABLE_V2_MIGRATION_WARNINGS_ENV_VAR, "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tune.Tuner(lambda c: None, run_config=train.RunConfig())
        tune.RunConfig(failure_config=train.FailureConfig())
    monkeypatch.setenv(ENABLE_V2_MIGRATION_WARNINGS_ENV_VAR, "1")
    with pytest.warns(RayDeprecationWarning, match="update your imports"):
        tune.RunConfig(failure_config=train.FailureConfig())


def test_fail_fast_in_trains_failure_config_warns_and_still_reaches_tune() -> None:
    with pytest.warns(RayDeprecationWarning, match=r"FailureConfig\(fail_fast\)` is deprecated"):
        config = train.FailureConfig(fail_fast=True)
    with pytest.warns(RayDeprecationWarning, match="update your imports"):
        run = tune.RunConfig(failure_config=config)
    assert run.failure_config is not None and run.failure_config.fail_fast is True
