"""What Tune and Train share: one ``Checkpoint`` class, the trial hook, the error tree.

``actorrt.tune.Checkpoint is actorrt.train.Checkpoint`` (as in Ray): a checkpoint made
under either name and reported from a Tune function trainable, from a Train worker, or from
a trainer inside a Tune trial comes back as that one class, across processes. Neither
library imports the other; the trial hook through which a trainer finds its trial is
public (``train.set_trial_provider``), and the libraries' errors are ``ActorrtError``\\ s.
"""

from __future__ import annotations

import ast
import pickle
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import Recorder

import actorrt
from actorrt import air, train, tune
from actorrt._shared import _trial_hook

WORKER_ENV = {"OMP_NUM_THREADS": "1"}
PACKAGE = Path(actorrt.__file__).parent


def test_one_checkpoint_class_under_every_name(tmp_path: Path) -> None:
    assert tune.Checkpoint is train.Checkpoint is air.Checkpoint
    assert repr(tune.Checkpoint) == "<class 'actorrt.train.Checkpoint'>"
    checkpoint = tune.Checkpoint.from_directory(tmp_path)
    assert isinstance(checkpoint, train.Checkpoint)
    assert checkpoint == train.Checkpoint(tmp_path)
    assert len({checkpoint, air.Checkpoint(tmp_path)}) == 1
    again = pickle.loads(pickle.dumps(checkpoint))
    assert type(again) is tune.Checkpoint and again == checkpoint
    # Both libraries' spellings of a missing directory still catch it.
    with pytest.raises(ValueError, match="is not one"):
        tune.Checkpoint.from_directory(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="is not one"):
        train.Checkpoint.from_directory(tmp_path / "missing")


def _imported_modules(source: Path) -> list[str]:
    """Every module an ``import`` of ``source`` names, relative ones resolved."""
    parts = list(source.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = parts[:-1]  # what a relative import of a module or an __init__ starts from
    names = []
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            names += [module] + [f"{module}.{alias.name}" for alias in node.names]
    return names


@pytest.mark.parametrize(("library", "forbidden"), [
    ("tune", ("actorrt.train", "actorrt.air")),
    ("train", ("actorrt.tune",)),
    ("_shared", ("actorrt.tune", "actorrt.train", "actorrt.air")),
])
def test_the_libraries_do_not_import_each_other(library: str, forbidden: tuple[str, ...]) -> None:
    for source in (PACKAGE / library).rglob("*.py"):
        if source.is_relative_to(PACKAGE / "tune" / "integration"):
            continue  # callbacks over both libraries: the application layer, as Ray has it
        for name in _imported_modules(source):
            assert not name.startswith(forbidden), (source, name)


def test_library_errors_are_in_the_package_tree() -> None:
    for error in (train.TrainingFailedError, train.WorkerGroupError, train.ControllerError):
        assert issubclass(error, actorrt.ActorrtError) and issubclass(error, RuntimeError)
    assert issubclass(tune.TuneError, actorrt.ActorrtError)
    # Tune's stop signal is control flow, not an error: user code's `except Exception`
    # (and `except ActorrtError`) lets it through.
    assert not issubclass(tune.StopTrial, Exception)
    failed = pickle.loads(pickle.dumps(train.ControllerError(ValueError("x"))))
    assert isinstance(failed, actorrt.ActorrtError) and "ValueError: x" in str(failed)


def test_set_trial_provider_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match="name must be a non-empty string, got ''"):
        train.set_trial_provider("", lambda: None)
    with pytest.raises(TypeError, match="provider must be a function .* got 3"):
        train.set_trial_provider("mysweep", 3)  # type: ignore[arg-type]


def test_providers_are_asked_in_order_and_replaced_by_name() -> None:
    first, second = object(), object()
    answers: dict[str, Any] = {"a": None, "b": second}
    try:
        train.set_trial_provider("test.a", lambda: answers["a"])
        train.set_trial_provider("test.b", lambda: answers["b"])
        assert _trial_hook.enclosing_trial() is second
        answers["a"] = first
        assert _trial_hook.enclosing_trial() is first  # registered first, asked first
        train.set_trial_provider("test.a", lambda: None)  # replaced in its place
        assert _trial_hook.enclosing_trial() is second
        train.set_trial_provider("test.b", None)
        assert _trial_hook.enclosing_trial() is None
    finally:
        train.set_trial_provider("test.a", None)
        train.set_trial_provider("test.b", None)


def _write(folder: str, step: int) -> None:
    Path(folder, "step").write_text(str(step))


def _step(checkpoint: train.Checkpoint | None) -> str:
    """The step a checkpoint was written at (a tiny local file, read synchronously)."""
    assert checkpoint is not None
    return Path(checkpoint, "step").read_text()


def tune_trainable(config: dict[str, Any]) -> None:
    """A Tune function trainable that reports a checkpoint under each library's name."""
    given = config["given"]
    for step, (name, report) in enumerate([("tune", tune.report), ("train", train.report)]):
        latest = train.get_checkpoint()  # in a trial: the trial's latest checkpoint
        with tempfile.TemporaryDirectory() as d:
            _write(d, step)
            made = getattr(actorrt, name).Checkpoint.from_directory(d)
            report(
                {
                    "given_is_shared": type(given) is train.Checkpoint,
                    "latest": None if latest is None else type(latest) is tune.Checkpoint,
                },
                checkpoint=made,
            )


def train_loop(config: dict[str, Any]) -> None:
    """A Train worker that reports a checkpoint made under Tune's name and sends the
    checkpoint it was given back to the test's process."""
    given = config["given"]
    actorrt.get(config["recorder"].record(given))
    with tempfile.TemporaryDirectory() as d:
        _write(d, 7)
        train.report(
            {"given_is_shared": type(given) is tune.Checkpoint},
            checkpoint=tune.Checkpoint.from_directory(d),
        )


def trainer_in_a_trial(config: dict[str, Any]) -> None:
    train.DataParallelTrainer(
        train_loop,
        train_loop_config=config,
        scaling_config=train.ScalingConfig(num_workers=1),
    ).fit()


@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_checkpoints_reported_by_tune_and_by_train_round_trip_as_one_class(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    folder = tmp_path / "given"
    folder.mkdir()
    given = air.Checkpoint.from_directory(folder)
    run = tune.RunConfig(storage_path=str(tmp_path / "tune"), verbose=0)

    # A Tune function trainable, in a trial's worker process.
    [trial] = await tune.Tuner(
        tune_trainable, param_space={"given": given}, run_config=run
    ).fit_async()
    assert trial.error is None, trial.error
    assert trial.metrics["given_is_shared"] is True
    assert trial.metrics["latest"] is True  # the first report's, read back by the second
    assert type(trial.checkpoint) is train.Checkpoint
    assert _step(trial.checkpoint) == "1"

    # A Train worker, in its own worker process.
    recorder = await Recorder.spawn()
    result = await train.DataParallelTrainer(
        train_loop,
        train_loop_config={"given": given, "recorder": recorder},
        scaling_config=train.ScalingConfig(num_workers=1),
        run_config=train.RunConfig(storage_path=str(tmp_path / "train")),
    ).fit_async()
    assert result.metrics["given_is_shared"] is True
    assert type(result.checkpoint) is tune.Checkpoint
    assert _step(result.checkpoint) == "7"
    [back] = await recorder.all()
    assert type(back) is tune.Checkpoint and back == given

    # A trainer inside a Tune trial: rank 0's checkpoint becomes the trial's.
    recorder = await Recorder.spawn()
    [trial] = await tune.Tuner(
        tune.with_resources(trainer_in_a_trial, train.ScalingConfig(num_workers=1)),
        param_space={"given": given, "recorder": recorder},
        run_config=tune.RunConfig(storage_path=str(tmp_path / "both"), verbose=0),
    ).fit_async()
    assert trial.error is None, trial.error
    assert trial.metrics["given_is_shared"] is True
    assert type(trial.checkpoint) is train.Checkpoint
    assert _step(trial.checkpoint) == "7"
    [back] = await recorder.all()
    assert type(back) is train.Checkpoint and back == given
