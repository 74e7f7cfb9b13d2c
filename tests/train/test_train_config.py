"""Configs, checkpoints and the public surface of actorrt.train: no processes here."""

import ast
from pathlib import Path

import pytest

import actorrt.train as train
import actorrt.train.torch as train_torch
from actorrt.train._checkpoint_book import CheckpointBook
from actorrt.util.annotations import RayDeprecationWarning


def test_all_is_exactly_the_public_surface() -> None:
    assert set(train.__all__) == {
        "Checkpoint", "CheckpointConfig", "ControllerError", "DataParallelTrainer",
        "DataShard", "FailureConfig", "PlacementGroupSpec", "Result", "RunConfig",
        "ScalingConfig", "TrainContext", "TrainingFailedError", "WorkerGroupError",
        "get_checkpoint", "get_context", "get_dataset_shard", "report",
        "ReportedCheckpoint", "get_all_reported_checkpoints",
        "EnclosingTrial", "set_trial_provider", "BackendConfig", "UserCallback",
    }
    public = {n for n in dir(train) if not n.startswith("_")}
    # the integrations once imported, and the modules at Ray's paths
    subpackages = {"torch", "lightning", "huggingface", "collective", "xgboost", "lightgbm"} | {
        "backend", "constants", "context", "data_parallel_trainer", "error", "v2",
    }
    assert public - {"annotations"} - subpackages == set(train.__all__)
    assert set(train_torch.__all__) == {
        "TorchConfig", "TorchTrainer", "enable_reproducibility", "get_device", "get_devices",
        "prepare_data_loader", "prepare_model",
    }
    for name in train.__all__:
        assert getattr(train, name).__module__ == "actorrt.train", name
    for name in train_torch.__all__:
        assert getattr(train_torch, name).__module__ == "actorrt.train.torch", name


def test_train_does_not_import_tune() -> None:
    root = Path(train.__file__).parent
    for source in root.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [("." * node.level) + (node.module or "")]
            else:
                continue
            assert not any("tune" in name for name in names), (source, names)


def test_scaling_config_factory_shape() -> None:
    # Ray Train V2: the controller takes nothing; only the workers are reserved.
    scaling = train.ScalingConfig(num_workers=3)
    spec = scaling.as_placement_group_factory()
    assert spec.bundles == [{"CPU": 1.0}] * 3  # Ray's: the empty head is left out
    assert spec.group_bundles == [{}] + [{"CPU": 1.0}] * 3
    assert spec.strategy == "PACK"
    assert spec.required_resources == scaling.total_resources == {"CPU": 3.0}
    assert spec.head_bundle_is_empty
    assert train.ScalingConfig().total_resources == {"CPU": 1.0}  # one CPU worker

    gpu = train.ScalingConfig(num_workers=2, use_gpu=True, placement_strategy="SPREAD")
    assert gpu.as_placement_group_factory().group_bundles == [{}, {"GPU": 1.0}, {"GPU": 1.0}]
    assert gpu.as_placement_group_factory().strategy == "SPREAD"
    assert gpu.total_resources == {"GPU": 2.0}

    with pytest.warns(RayDeprecationWarning, match="Ray Train V2 rejects trainer_resources"):
        custom = train.ScalingConfig(
            num_workers=2,
            use_gpu=True,
            resources_per_worker={"cpu": 2, "GPU": 0.5, "memory": 1024},
            trainer_resources={"CPU": 1, "TRAIN_DRIVER_RESOURCE": 1},
        )
    spec = custom.as_placement_group_factory()
    assert spec.bundles[0] == {"CPU": 1.0, "TRAIN_DRIVER_RESOURCE": 1.0}
    assert spec.bundles[1:] == [{"CPU": 2.0, "GPU": 0.5, "memory": 1024.0}] * 2
    assert spec.required_resources == {
        "CPU": 5.0, "GPU": 1.0, "memory": 2048.0, "TRAIN_DRIVER_RESOURCE": 1.0,
    }
    assert custom.num_cpus_per_worker == 2 and custom.num_gpus_per_worker == 0.5

    # use_gpu adds a GPU when resources_per_worker does not mention one
    assert train.ScalingConfig(
        num_workers=1, use_gpu=True, resources_per_worker={"CPU": 4}
    ).worker_bundle() == {"CPU": 4.0, "GPU": 1.0}
    with pytest.warns(RayDeprecationWarning):
        empty_head = train.ScalingConfig(num_workers=1, trainer_resources={})
    assert empty_head.as_placement_group_factory().head_bundle_is_empty
    assert empty_head.as_placement_group_factory() == train.PlacementGroupSpec(
        [{}, {"CPU": 1.0}], "PACK"
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_workers": 0}, ValueError, "num_workers must be at least 1, got 0"),
        ({"num_workers": -2}, ValueError, "got -2"),
        ({"num_workers": 1.5}, TypeError, "num_workers must be an int"),
        ({"num_workers": True}, TypeError, "num_workers must be an int"),
        ({"num_workers": 1, "use_gpu": "yes"}, TypeError, "use_gpu"),
        ({"num_workers": 1, "resources_per_worker": {"GPU": 1}}, ValueError,
         r"`use_gpu` is False but `GPU` was found in `resources_per_worker` \({'GPU': 1} "
         "asks for 1 GPU per worker"),
        ({"num_workers": 1, "use_gpu": True, "resources_per_worker": {"CPU": 1, "GPU": 0}},
         ValueError, "use_gpu=True but resources_per_worker sets GPU to 0"),
        ({"num_workers": 1, "resources_per_worker": {"CPU": -1}}, ValueError,
         r"resources_per_worker\['CPU'\] must be finite and >= 0, got -1"),
        ({"num_workers": 1, "resources_per_worker": {"CPU": "2"}}, TypeError, "must be a number"),
        ({"num_workers": 1, "resources_per_worker": {"cpu": 1, "CPU": 2}}, ValueError,
         "CPU twice"),
        ({"num_workers": 1, "resources_per_worker": {}}, ValueError, "reserves nothing"),
        ({"num_workers": 1, "placement_strategy": "PACKED"}, ValueError,
         "placement_strategy must be one of PACK, SPREAD"),
        ({"num_workers": 1, "trainer_resources": [1]}, TypeError, "trainer_resources must be"),
    ],
)
def test_scaling_config_validation(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        train.ScalingConfig(**kwargs)


def test_run_configs_validate() -> None:
    with pytest.raises(ValueError, match="max_failures must be -1 .* got -2"):
        train.FailureConfig(max_failures=-2)
    with pytest.raises(TypeError, match="max_failures must be an int"):
        train.FailureConfig(max_failures=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_to_keep must be at least 1"):
        train.CheckpointConfig(num_to_keep=0)
    with pytest.raises(ValueError, match="'max' or 'min', got 'best'"):
        train.CheckpointConfig(checkpoint_score_order="best")
    with pytest.raises(ValueError, match="without '/'"):
        train.RunConfig(name="a/b")
    with pytest.raises(TypeError, match="failure_config must be a FailureConfig"):
        train.RunConfig(failure_config=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="backend must be None, 'gloo' or 'nccl', got 'mpi'"):
        train_torch.TorchConfig(backend="mpi")
    with pytest.raises(ValueError, match="timeout_s must be a positive"):
        train_torch.TorchConfig(timeout_s=0)
    assert train.RunConfig(name="x", storage_path="/tmp/s").run_dir("d") == Path("/tmp/s/x")
    assert train.RunConfig(storage_path="/tmp/s").run_dir("d") == Path("/tmp/s/d")


def test_trainer_checks_the_training_function() -> None:
    with pytest.raises(TypeError, match="train_loop_per_worker must be a function"):
        train.DataParallelTrainer(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="requires 2"):
        train.DataParallelTrainer(lambda a, b: None)
    with pytest.raises(ValueError, match="takes no argument to receive it"):
        train.DataParallelTrainer(lambda: None, train_loop_config={"lr": 1})
    with pytest.raises(TypeError, match="scaling_config must be a ScalingConfig"):
        train.DataParallelTrainer(lambda: None, scaling_config={"num_workers": 2})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="torch_config must be a TorchConfig"):
        train_torch.TorchTrainer(lambda: None, torch_config="gloo")  # type: ignore[arg-type]


def test_session_functions_outside_a_training_function() -> None:
    with pytest.raises(RuntimeError, match=r"train.report\(\) works inside a training function"):
        train.report({"loss": 1.0})
    with pytest.raises(RuntimeError, match="get_context"):
        train.get_context()
    with pytest.raises(RuntimeError, match="get_checkpoint"):
        train.get_checkpoint()


def test_checkpoint_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="is not one"):
        train.Checkpoint.from_directory(tmp_path / "missing")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "w.txt").write_text("7")
    ckpt = train.Checkpoint.from_directory(tmp_path / "c")
    assert ckpt.path == str(tmp_path / "c")
    with ckpt.as_directory() as d:
        assert Path(d, "w.txt").read_text() == "7"
    copy = ckpt.to_directory(tmp_path / "copy")
    assert Path(copy, "w.txt").read_text() == "7"
    assert Path(ckpt.to_directory(), "w.txt").read_text() == "7"


def _book_with(tmp_path: Path, config: train.CheckpointConfig, scores: list[float]) -> list[str]:
    book = CheckpointBook(config)
    for i, score in enumerate(scores):
        d = tmp_path / f"checkpoint_{i:06d}"
        d.mkdir()
        book.add(train.Checkpoint(d), {"acc": score, "i": i})
    return sorted(p.name for p in tmp_path.iterdir())


def test_checkpoint_book_keeps_the_best_and_the_latest(tmp_path: Path) -> None:
    kept = _book_with(
        tmp_path,
        train.CheckpointConfig(num_to_keep=2, checkpoint_score_attribute="acc"),
        [0.1, 0.5, 0.3, 0.9, 0.2],
    )
    assert kept == ["checkpoint_000001", "checkpoint_000003", "checkpoint_000004"]


def test_checkpoint_book_min_order_and_recency(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    kept = _book_with(
        tmp_path / "a",
        train.CheckpointConfig(
            num_to_keep=1, checkpoint_score_attribute="acc", checkpoint_score_order="min"
        ),
        [0.4, 0.1, 0.3],
    )
    assert kept == ["checkpoint_000001", "checkpoint_000002"]
    assert _book_with(tmp_path / "b", train.CheckpointConfig(num_to_keep=2), [0, 0, 0, 0]) == [
        "checkpoint_000002", "checkpoint_000003",
    ]


def test_failure_config_takes_ray_v2s_limits() -> None:
    # Ray Train V2: max_failures (worker errors, default 0), controller_failure_limit and
    # max_preemption_failures (default -1: unlimited).
    config = train.FailureConfig()
    assert (config.max_failures, config.controller_failure_limit) == (0, -1)
    assert config.max_preemption_failures == -1
    given = train.FailureConfig(max_failures=2, controller_failure_limit=3,
                                max_preemption_failures=0)
    assert given.controller_failure_limit == 3 and given.max_preemption_failures == 0
    with pytest.raises(ValueError, match="controller_failure_limit must be -1"):
        train.FailureConfig(controller_failure_limit=-2)
    with pytest.raises(TypeError, match="max_preemption_failures must be an int"):
        train.FailureConfig(max_preemption_failures=1.5)  # type: ignore[arg-type]
