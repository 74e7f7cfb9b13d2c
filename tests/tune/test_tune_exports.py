"""actorrt.tune's public surface is exactly its ``__all__``, shown under its public module."""

from __future__ import annotations

from actorrt import tune

EXPECTED = {
    "Callback", "Checkpoint", "CheckpointConfig", "Domain", "FailureConfig",
    "PlacementGroupFactory", "Result", "ResultGrid", "RunConfig", "StopTrial", "Trainable",
    "TrialScheduler",
    "TuneConfig", "TuneContext", "Tuner", "choice", "get_checkpoint", "get_context",
    "grid_search", "lograndint", "loguniform", "qloguniform", "qrandint", "qrandn",
    "quniform", "randint", "randn", "report", "sample_from", "uniform", "with_resources",
    # Ray's everyday names added for ported scripts
    "CLIReporter", "ExperimentAnalysis", "JupyterNotebookReporter", "ProgressReporter",
    "Stopper", "SyncConfig", "TuneError", "qlograndint", "run", "with_parameters",
    "Experiment", "register_env", "register_trainable", "run_experiments",
}
# Ray's submodules (the layout is Ray's: tests/tune/test_ray_surface.py lists every path).
SUBMODULES = {
    "analysis", "callback", "context", "error", "examples", "execution", "experiment",
    "integration", "logger", "progress_reporter", "registry", "result", "result_grid", "schedulers",
    "search", "stopper", "trainable", "tune", "tune_config", "tuner", "utils",
}


def test_all_is_exactly_the_public_surface() -> None:
    assert set(tune.__all__) == EXPECTED
    public = {name for name in dir(tune) if not name.startswith("_")}
    assert public - SUBMODULES == EXPECTED


def test_public_classes_name_their_public_module() -> None:
    assert repr(tune.Tuner) == "<class 'actorrt.tune.Tuner'>"
    for name in tune.__all__:
        obj = getattr(tune, name)
        if isinstance(obj, type):
            # Checkpoint is train's class too (one class, as in Ray): its home is train's.
            home = "actorrt.train" if name == "Checkpoint" else "actorrt.tune"
            assert obj.__module__ == home, name


def test_ray_style_submodules() -> None:
    from actorrt.tune.schedulers import ASHAScheduler, AsyncHyperBandScheduler
    from actorrt.tune.search import BasicVariantGenerator, ConcurrencyLimiter
    from actorrt.tune.stopper import (
        CombinedStopper,
        ExperimentPlateauStopper,
        FunctionStopper,
        MaximumIterationStopper,
        NoopStopper,
        Stopper,
        TimeoutStopper,
        TrialPlateauStopper,
    )
    from actorrt.tune.utils import diagnose_serialization, validate_save_restore, wait_for_gpu

    assert ASHAScheduler is AsyncHyperBandScheduler
    assert callable(diagnose_serialization) and callable(validate_save_restore)
    assert callable(wait_for_gpu) and Stopper and BasicVariantGenerator and ConcurrencyLimiter
    assert Stopper is tune.Stopper
    for stopper in (CombinedStopper, ExperimentPlateauStopper, FunctionStopper,
                    MaximumIterationStopper, NoopStopper, TimeoutStopper, TrialPlateauStopper):
        assert issubclass(stopper, Stopper)


def test_logger_and_optuna_modules_show_where_their_classes_are_imported_from() -> None:
    from actorrt.tune import logger
    from actorrt.tune.search import optuna

    assert logger.__all__ == [
        "CSVLoggerCallback", "JsonLoggerCallback", "LoggerCallback", "TBXLoggerCallback"
    ]
    assert optuna.__all__ == ["OptunaSearch"]
    assert repr(logger.TBXLoggerCallback) == "<class 'actorrt.tune.logger.TBXLoggerCallback'>"
    assert repr(optuna.OptunaSearch) == "<class 'actorrt.tune.search.optuna.OptunaSearch'>"
    assert issubclass(logger.TBXLoggerCallback, tune.Callback)


def test_searcher_modules_are_rays() -> None:
    import importlib

    from actorrt.tune import search

    assert search.__all__ == ["BasicVariantGenerator", "ConcurrencyLimiter", "Repeater", "Searcher"]
    for module, name in [("hyperopt", "HyperOptSearch"), ("bayesopt", "BayesOptSearch"),
                         ("nevergrad", "NevergradSearch"), ("bohb", "TuneBOHB"),
                         ("zoopt", "ZOOptSearch")]:
        mod = importlib.import_module(f"actorrt.tune.search.{module}")
        assert mod.__all__ == [name]
        assert repr(getattr(mod, name)) == f"<class 'actorrt.tune.search.{module}.{name}'>"


def test_scheduler_modules_are_rays() -> None:
    from actorrt.tune import schedulers
    from actorrt.tune.schedulers import pb2

    assert schedulers.__all__ == [
        "PB2", "ASHAScheduler", "AsyncHyperBandScheduler", "FIFOScheduler", "HyperBandForBOHB",
        "HyperBandScheduler", "MedianStoppingRule", "PopulationBasedTraining",
        "ResourceChangingScheduler", "TrialScheduler",
    ]
    assert pb2.PB2 is schedulers.PB2 and pb2.__all__ == ["PB2"]
    from actorrt.tune.schedulers import resource_changing_scheduler as rcs

    assert rcs.__all__ == [
        "DistributeResources", "DistributeResourcesToTopJob", "ResourceChangingScheduler"
    ]
    assert rcs.ResourceChangingScheduler is schedulers.ResourceChangingScheduler
